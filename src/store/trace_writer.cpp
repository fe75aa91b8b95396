// SPDX-License-Identifier: Apache-2.0
#include "causeway/store/trace_writer.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "causeway/common/error.h"
#include "causeway/common/time.h"
#include "causeway/store/migrations.h"

namespace causeway::store {

struct TraceWriter::Statements {
  Statement cuda, offcpu, io, tcp, reclaim, proc, nccl, verbs, ib, drop, frame, op_count;
  Statement launch_stat, launch_bucket;
  Statement kernel_ins, kernel_get, comm_ins, comm_get;
};

TraceWriter::TraceWriter(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw UsageError(path + " is a directory, not a trace file");
  // Create 0600 before SQLite does (it would use 0644): traces hold command lines.
  lock_fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd_ < 0)
    throw UsageError("cannot open " + path + " for writing: " + std::strerror(errno));
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    ::close(lock_fd_);
    lock_fd_ = -1;
    throw Error(path + " is being written by another causeway trace; use --db for a new file");
  }
  try {
    db_ = std::make_unique<Connection>(path, Connection::Mode::ReadWriteCreate);
    db_->exec("PRAGMA journal_mode=WAL");
    // WAL + NORMAL: a crash loses at most the last transaction, never corrupts.
    db_->exec("PRAGMA synchronous=NORMAL");
    migrate(*db_);
  } catch (...) {
    db_.reset();
    ::close(lock_fd_);
    lock_fd_ = -1;
    throw;
  }
  auto& d = *db_;
  st_ = std::make_unique<Statements>(Statements{
      d.prepare("INSERT INTO cuda_call_events(session_id, ts_ns, dur_ns, pid, tid, op_id, ret, "
                "bytes, kind, stream, grid_x, grid_y, grid_z, block_x, block_y, block_z, "
                "shared_mem, kernel_id, stack_id, flags) VALUES "
                "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"),
      d.prepare("INSERT INTO offcpu_events(session_id, ts_ns, dur_ns, pid, tid, cpu, state, "
                "by_pid, by_comm_id, waker_pid) VALUES (?,?,?,?,?,?,?,?,?,?)"),
      d.prepare("INSERT INTO io_requests(session_id, ts_ns, dur_ns, pid, dev, bytes, op) VALUES "
                "(?,?,?,?,?,?,?)"),
      d.prepare("INSERT INTO tcp_retransmits(session_id, ts_ns, pid, saddr, daddr, sport, "
                "dport, state) VALUES (?,?,?,?,?,?,?,?)"),
      d.prepare("INSERT INTO reclaims(session_id, ts_ns, dur_ns, pid, tid, nr_reclaimed) "
                "VALUES (?,?,?,?,?,?)"),
      d.prepare("INSERT INTO processes(session_id, pid, comm, cmdline, cgroup, ppid, "
                "start_ts_ns, end_ts_ns, exit_code) VALUES (?,?,?,?,?,?,?,?,?) "
                "ON CONFLICT(session_id, pid) DO UPDATE SET "
                "comm=coalesce(nullif(excluded.comm,''), comm), "
                "cmdline=coalesce(nullif(excluded.cmdline,''), cmdline), "
                "cgroup=coalesce(nullif(excluded.cgroup,''), cgroup), "
                "ppid=coalesce(excluded.ppid, ppid), "
                "start_ts_ns=coalesce(start_ts_ns, excluded.start_ts_ns), "
                "end_ts_ns=coalesce(excluded.end_ts_ns, end_ts_ns), "
                "exit_code=coalesce(excluded.exit_code, exit_code)"),
      d.prepare("INSERT INTO nccl_call_events(session_id, ts_ns, dur_ns, pid, tid, op_id, ret, "
                "comm_hash, rank, nranks, seq, count, datatype, redop, bytes, stream, peer, "
                "stack_id) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"),
      d.prepare("INSERT INTO verbs_events(session_id, ts_ns, dur_ns, pid, tid, op_id, ret, "
                "qp_num, detail) VALUES (?,?,?,?,?,?,?,?,?)"),
      d.prepare("INSERT INTO ib_counters(session_id, ts_ns, device, port, counter, value) "
                "VALUES (?,?,?,?,?,?)"),
      d.prepare("INSERT INTO drops(session_id, ts_ns, source, count) VALUES (?,?,?,?)"),
      d.prepare("INSERT OR IGNORE INTO stack_frames(stack_id, depth, kind, func, file, line, "
                "module) VALUES (?,?,?,?,?,?,?)"),
      d.prepare("INSERT INTO op_counts(session_id, op_id, calls, errors, total_ns, nested, "
                "dropped, shed) VALUES (?,?,?,?,?,?,?,?) ON CONFLICT(session_id, op_id) DO UPDATE SET "
                "calls=excluded.calls, errors=excluded.errors, total_ns=excluded.total_ns, "
                "nested=excluded.nested, dropped=excluded.dropped, shed=excluded.shed"),
      d.prepare("INSERT INTO launch_stats(session_id, ts_ns, pid, op_id, kernel_id, calls, errors, "
                "total_ns) VALUES (?,?,?,?,?,?,?,?)"),
      d.prepare("INSERT INTO launch_buckets(session_id, ts_ns, pid, op_id, kernel_id, bucket, "
                "calls) VALUES (?,?,?,?,?,?,?)"),
      d.prepare("INSERT OR IGNORE INTO kernels(name) VALUES (?)"),
      d.prepare("SELECT id FROM kernels WHERE name = ?"),
      d.prepare("INSERT OR IGNORE INTO comms(name) VALUES (?)"),
      d.prepare("SELECT id FROM comms WHERE name = ?"),
  });
}

TraceWriter::~TraceWriter() {
  st_.reset();
  db_.reset();
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

int64_t TraceWriter::begin_session(const SessionInfo& s) {
  auto st = db_->prepare(
      "INSERT INTO sessions(host, node_id, boot_id, mono_to_wall_ns, version, command_line, "
      "start_ts_ns, source) VALUES (?,?,?,?,?,?,?,?)");
  st.bind(1, s.host).bind(2, s.node_id.empty() ? s.host : s.node_id).bind(3, s.boot_id);
  st.bind(4, s.mono_to_wall_ns).bind(5, s.version).bind(6, s.command_line);
  st.bind(7, s.start_ts_ns).bind(8, s.source).exec();
  session_id_ = sqlite3_last_insert_rowid(db_->raw());
  return session_id_;
}

int64_t TraceWriter::dict_id(std::unordered_map<std::string, int64_t>& cache, Statement& insert,
                             Statement& lookup, const std::string& name) {
  auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  insert.bind(1, name).exec();
  lookup.bind(1, name);
  int64_t id = lookup.step() ? lookup.col_int(0) : 0;
  lookup.reset();
  cache.emplace(name, id);
  return id;
}

void TraceWriter::write(const Batch& b) {
  if (b.empty()) return;
  auto& s = *st_;
  const int64_t sid = session_id_;
  in_transaction(*db_, [&] {
    for (const auto& c : b.cuda_calls) {
      auto& q = s.cuda;
      q.bind(1, sid).bind(2, c.ts_ns).bind(3, c.dur_ns).bind(4, int64_t(c.pid));
      q.bind(5, int64_t(c.tid)).bind(6, int64_t(c.op_id)).bind(7, c.ret).bind(8, c.bytes);
      q.bind(9, c.kind).bind(10, c.stream);
      for (int i = 0; i < 3; i++) {
        if (c.grid) q.bind(11 + i, int64_t((*c.grid)[i])); else q.bind_null(11 + i);
        if (c.block) q.bind(14 + i, int64_t((*c.block)[i])); else q.bind_null(14 + i);
      }
      q.bind(17, c.shared_mem);
      if (!c.kernel.empty())
        q.bind(18, dict_id(kernel_ids_, s.kernel_ins, s.kernel_get, c.kernel));
      else
        q.bind_null(18);
      q.bind(19, c.stack_id).bind(20, int64_t(c.flags));
      q.exec();
    }
    for (const auto& o : b.offcpu) {
      auto& q = s.offcpu;
      q.bind(1, sid).bind(2, o.ts_ns).bind(3, o.dur_ns).bind(4, int64_t(o.pid));
      q.bind(5, int64_t(o.tid)).bind(6, int64_t(o.cpu)).bind(7, int64_t(o.state));
      q.bind(8, int64_t(o.by_pid));
      q.bind(9, dict_id(comm_ids_, s.comm_ins, s.comm_get, o.by_comm));
      if (o.waker_pid) q.bind(10, int64_t(o.waker_pid)); else q.bind_null(10);
      q.exec();
    }
    for (const auto& r : b.io) {
      s.io.bind(1, sid).bind(2, r.ts_ns).bind(3, r.dur_ns).bind(4, int64_t(r.pid));
      s.io.bind(5, r.dev).bind(6, r.bytes).bind(7, r.op).exec();
    }
    for (const auto& t : b.tcp) {
      s.tcp.bind(1, sid).bind(2, t.ts_ns).bind(3, int64_t(t.pid)).bind(4, t.saddr);
      s.tcp.bind(5, t.daddr).bind(6, int64_t(t.sport)).bind(7, int64_t(t.dport));
      s.tcp.bind(8, t.state).exec();
    }
    for (const auto& r : b.reclaims) {
      s.reclaim.bind(1, sid).bind(2, r.ts_ns).bind(3, r.dur_ns).bind(4, int64_t(r.pid));
      s.reclaim.bind(5, int64_t(r.tid)).bind(6, r.nr_reclaimed).exec();
    }
    for (const auto& p : b.processes) {
      s.proc.bind(1, sid).bind(2, int64_t(p.pid)).bind(3, p.comm).bind(4, p.cmdline);
      s.proc.bind(5, p.cgroup).bind(6, p.ppid).bind(7, p.start_ts_ns).bind(8, p.end_ts_ns);
      s.proc.bind(9, p.exit_code).exec();
    }
    for (const auto& n : b.nccl_calls) {
      auto& q = s.nccl;
      q.bind(1, sid).bind(2, n.ts_ns).bind(3, n.dur_ns).bind(4, int64_t(n.pid));
      q.bind(5, int64_t(n.tid)).bind(6, int64_t(n.op_id)).bind(7, n.ret);
      if (n.comm_hash.empty()) q.bind_null(8); else q.bind(8, n.comm_hash);
      q.bind(9, n.rank).bind(10, n.nranks).bind(11, n.seq).bind(12, n.count);
      if (n.datatype.empty()) q.bind_null(13); else q.bind(13, n.datatype);
      if (n.redop.empty()) q.bind_null(14); else q.bind(14, n.redop);
      q.bind(15, n.bytes).bind(16, n.stream).bind(17, n.peer).bind(18, n.stack_id);
      q.exec();
    }
    for (const auto& v : b.verbs) {
      s.verbs.bind(1, sid).bind(2, v.ts_ns).bind(3, v.dur_ns).bind(4, int64_t(v.pid));
      s.verbs.bind(5, int64_t(v.tid)).bind(6, int64_t(v.op_id)).bind(7, v.ret);
      s.verbs.bind(8, v.qp_num).bind(9, v.detail).exec();
    }
    for (const auto& c : b.ib_counters) {
      s.ib.bind(1, sid).bind(2, c.ts_ns).bind(3, c.device).bind(4, int64_t(c.port));
      s.ib.bind(5, c.counter).bind(6, c.value).exec();
    }
    for (const auto& l : b.launch_stats) {
      std::optional<int64_t> kernel_id;
      if (!l.kernel.empty()) kernel_id = dict_id(kernel_ids_, s.kernel_ins, s.kernel_get, l.kernel);
      s.launch_stat.bind(1, sid).bind(2, l.ts_ns).bind(3, int64_t(l.pid)).bind(4, int64_t(l.op_id));
      s.launch_stat.bind(5, kernel_id).bind(6, l.calls).bind(7, l.errors).bind(8, l.total_ns).exec();
      for (size_t i = 0; i < l.buckets.size(); i++) {
        if (!l.buckets[i]) continue;
        auto& q = s.launch_bucket;
        q.bind(1, sid).bind(2, l.ts_ns).bind(3, int64_t(l.pid)).bind(4, int64_t(l.op_id));
        q.bind(5, kernel_id).bind(6, int64_t(i)).bind(7, l.buckets[i]).exec();
      }
    }
    for (const auto& d : b.drops) {
      s.drop.bind(1, sid).bind(2, d.ts_ns).bind(3, d.source).bind(4, d.count).exec();
    }
    for (const auto& [id, frames] : b.stacks) {
      for (size_t i = 0; i < frames.size(); i++) {
        const auto& f = frames[i];
        s.frame.bind(1, id).bind(2, int64_t(i)).bind(3, f.kind).bind(4, f.func).bind(5, f.file);
        s.frame.bind(6, f.line).bind(7, f.module).exec();
      }
    }
  });
  rows_written_ += int64_t(b.size());
}

int64_t TraceWriter::enforce_max_size(int64_t max_bytes) {
  auto live_bytes = [&] {
    int64_t pages = db_->query_int("PRAGMA page_count").value_or(0);
    int64_t free_pages = db_->query_int("PRAGMA freelist_count").value_or(0);
    return (pages - free_pages) * db_->query_int("PRAGMA page_size").value_or(4096);
  };
  if (max_bytes <= 0 || live_bytes() <= max_bytes) return 0;
  static const char* const kEventTables[] = {"cuda_call_events", "offcpu_events",   "io_requests",
                                             "tcp_retransmits",  "reclaims",        "nccl_call_events",
                                             "verbs_events",     "ib_counters",     "launch_stats",
                                             "launch_buckets"};
  int64_t deleted = 0;
  in_transaction(*db_, [&] {
    // An eighth of each table per round, oldest first (rowids grow with
    // insertion), until under 3/4 of the limit so this does not run per batch.
    for (int round = 0; round < 32 && live_bytes() > max_bytes / 4 * 3; round++) {
      int64_t before = deleted;
      for (const char* t : kEventTables) {
        db_->exec(std::string("DELETE FROM ") + t + " WHERE rowid <= (SELECT min(rowid) FROM " + t +
                  ") + (SELECT (count(*) + 7) / 8 FROM " + t + ")");
        deleted += sqlite3_changes(db_->raw());
      }
      if (deleted == before) break;  // nothing left to delete: the limit is below the fixed tables
    }
    if (deleted > 0) {
      auto& q = st_->drop;
      q.bind(1, session_id_).bind(2, wall_now_ns()).bind(3, std::string_view("retention"));
      q.bind(4, deleted).exec();
    }
  });
  return deleted;
}

void TraceWriter::write_op_counts(const std::vector<OpCount>& counts) {
  in_transaction(*db_, [&] {
    for (const auto& c : counts) {
      auto& q = st_->op_count;
      q.bind(1, session_id_).bind(2, int64_t(c.op_id)).bind(3, c.calls).bind(4, c.errors);
      q.bind(5, c.total_ns).bind(6, c.nested).bind(7, c.dropped).bind(8, c.shed).exec();
    }
  });
}

void TraceWriter::end_session(int64_t end_ts_ns) {
  auto st = db_->prepare("UPDATE sessions SET end_ts_ns = ? WHERE id = ?");
  st.bind(1, end_ts_ns).bind(2, session_id_).exec();
  // Fold the WAL back so the file is self-contained when copied elsewhere.
  try {
    db_->exec("PRAGMA wal_checkpoint(TRUNCATE)");
  } catch (const Error&) {
  }
}

AsyncTraceWriter::AsyncTraceWriter(std::unique_ptr<TraceWriter> writer, int64_t max_db_bytes)
    : writer_(std::move(writer)), max_db_bytes_(max_db_bytes), thread_([this] { run(); }) {}

AsyncTraceWriter::~AsyncTraceWriter() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void AsyncTraceWriter::post(Batch&& batch) {
  if (batch.empty()) return;
  // A whole ring drained at once can hold ~80k calls: commit them in slices,
  // oldest first, so retention (--max-db-size) runs between slices and the
  // file stays within about one slice of its limit.
  constexpr size_t kSlice = 8192;
  if (batch.cuda_calls.size() > kSlice) {
    std::vector<CudaCall> rest(std::make_move_iterator(batch.cuda_calls.begin() + kSlice),
                               std::make_move_iterator(batch.cuda_calls.end()));
    batch.cuda_calls.resize(kSlice);
    post(std::move(batch));
    Batch tail;
    tail.cuda_calls = std::move(rest);
    post(std::move(tail));
    return;
  }
  {
    std::unique_lock lk(mu_);
    // Bounded: a producer faster than the disk waits here (the kernel's ring
    // buffer absorbs the burst, and counts what it cannot), memory stays flat.
    idle_cv_.wait(lk, [this] {
      return (queue_.size() < kMaxQueuedBatches && queued_rows_ < kMaxQueuedRows) || !error_.empty();
    });
    if (!error_.empty()) return;
    queued_rows_ += batch.size();
    queue_.push_back(std::move(batch));
  }
  cv_.notify_one();
}

void AsyncTraceWriter::run() {
  std::unique_lock lk(mu_);
  for (;;) {
    cv_.wait(lk, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) {
      if (stop_) return;
      continue;
    }
    Batch b = std::move(queue_.front());
    queue_.pop_front();
    queued_rows_ -= b.size();
    busy_ = true;
    lk.unlock();
    std::string err;
    try {
      writer_->write(b);
      if (max_db_bytes_ > 0) writer_->enforce_max_size(max_db_bytes_);
    } catch (const std::exception& e) {
      err = e.what();
    }
    lk.lock();
    busy_ = false;
    if (!err.empty() && error_.empty()) {
      error_ = err;
      queue_.clear();
      queued_rows_ = 0;
    }
    idle_cv_.notify_all();
  }
}

void AsyncTraceWriter::flush() {
  std::unique_lock lk(mu_);
  idle_cv_.wait(lk, [this] { return queue_.empty() && !busy_; });
}

void AsyncTraceWriter::close(int64_t end_ts_ns, const std::vector<OpCount>& counts) {
  flush();
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (!error_.empty()) throw Error("writing the trace failed: " + error_);
  writer_->write_op_counts(counts);
  writer_->end_session(end_ts_ns);
}

bool AsyncTraceWriter::failed() const {
  std::lock_guard lk(mu_);
  return !error_.empty();
}
std::string AsyncTraceWriter::error() const {
  std::lock_guard lk(mu_);
  return error_;
}
size_t AsyncTraceWriter::queued() const {
  std::lock_guard lk(mu_);
  return queue_.size();
}
int64_t AsyncTraceWriter::rows_written() const { return writer_->rows_written(); }

std::string default_db_path(bool create_dir) {
  namespace fs = std::filesystem;
  fs::path dir;
  if (::geteuid() == 0) {
    dir = "/var/lib/causeway";
  } else if (const char* x = std::getenv("XDG_DATA_HOME"); x && *x) {
    dir = fs::path(x) / "causeway";
  } else {
    const char* home = std::getenv("HOME");
    dir = fs::path(home ? home : "/tmp") / ".local/share/causeway";
  }
  if (create_dir) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw Error("cannot create " + dir.string() + ": " + ec.message());
    fs::permissions(dir, fs::perms::owner_all, fs::perm_options::replace, ec);
  }
  return (dir / "causeway.db").string();
}

}  // namespace causeway::store
