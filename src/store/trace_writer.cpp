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
#include <map>
#include <tuple>
#include <variant>

#include "causeway/common/error.h"
#include "causeway/common/time.h"
#include "causeway/store/checked_sql.h"
#include "causeway/store/migrations.h"
#include "causeway/store/read_only_trace.h"

namespace causeway::store {

// One table's insert, built from its family's declaration: the statement and,
// per column, the dictionary cache its text goes through (if any).
template <typename T>
struct TableInsert {
  Statement st;
  std::vector<std::unordered_map<std::string, int64_t>*> dicts;  // one per column
};

template <typename... T>
struct InsertsOf;
template <typename... T>
struct InsertsOf<model::TableList<T...>> {
  std::tuple<TableInsert<T>...> tables;
};

struct TraceWriter::Statements {
  InsertsOf<model::AllTables> inserts;
  Statement drop;
  std::map<std::string, std::pair<Statement, Statement>, std::less<>> dict_sql;  // (insert, lookup)
};

std::string insert_sql(const auto& table) {
  std::string cols = table.per_session() ? sql<"session_id">() : "";
  std::string marks = table.per_session() ? "?" : "";
  for (const auto& c : table.columns) {
    cols += (cols.empty() ? "" : ", ") + std::string(c.name);
    marks += marks.empty() ? "?" : ",?";
  }
  const bool ignore = table.on_conflict == sql<"OR IGNORE">();
  return sql<"INSERT {}INTO {}({}) VALUES ({}){}">(
      ignore ? sql<"OR IGNORE ">() : "", table.name, cols, marks,
      ignore || table.on_conflict.empty() ? "" : " " + std::string(table.on_conflict));
}

namespace {

// An existing file keeps the mode it had (O_CREAT's 0600 applies to new files
// only), and SQLite gives a new -wal and -shm the trace's mode: a trace holds
// command lines, so group and others lose access to all three.
void owner_only(int fd, const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm"}) {
    const int f = *suffix ? ::open((path + suffix).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : fd;
    if (f < 0) continue;
    struct stat st;
    if (::fstat(f, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 077) != 0)
      (void)::fchmod(f, st.st_mode & 0700);
    if (f != fd) ::close(f);
  }
}

}  // namespace

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
  owner_only(lock_fd_, path);
  try {
    db_ = std::make_unique<Connection>(path, Connection::Mode::ReadWriteCreate);
    db_->exec(sql<"PRAGMA journal_mode=WAL">());
    // WAL + NORMAL: a crash loses at most the last transaction, never corrupts.
    db_->exec(sql<"PRAGMA synchronous=NORMAL">());
    migrate(*db_);
  } catch (...) {
    db_.reset();
    ::close(lock_fd_);
    lock_fd_ = -1;
    throw;
  }
  st_ = std::make_unique<Statements>();
  auto& d = *db_;
  model::for_each_table([&]<typename T>() {
    auto& ins = std::get<TableInsert<T>>(st_->inserts.tables);
    ins.st = d.prepare(insert_sql(T::kTable));
    for (const auto& c : T::kTable.columns) {
      std::unordered_map<std::string, int64_t>* cache = nullptr;
      if (!c.dictionary.empty()) {
        cache = &dict_ids_[std::string(c.dictionary)];
        if (!st_->dict_sql.count(c.dictionary)) {
          const std::string t(c.dictionary);
          st_->dict_sql.emplace(t, std::make_pair(d.prepare(sql<"INSERT OR IGNORE INTO {}(name) VALUES (?)">(t)),
                                                  d.prepare(sql<"SELECT id FROM {} WHERE name = ?">(t))));
        }
      }
      ins.dicts.push_back(cache);
    }
  });
  st_->drop = d.prepare(insert_sql(model::Drops::kTable));
}

TraceWriter::~TraceWriter() {
  st_.reset();
  db_.reset();
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

int64_t TraceWriter::begin_session(const model::SessionInfo& s) {
  auto st = db_->prepare(
      sql<"INSERT INTO sessions(host, node_id, boot_id, mono_to_wall_ns, version, command_line, "
          "start_ts_ns, source, cpus, agent_pid) VALUES (?,?,?,?,?,?,?,?,?,?)">());
  st.bind(1, s.host).bind(2, s.node_id.empty() ? s.host : s.node_id).bind(3, s.boot_id);
  st.bind(4, s.mono_to_wall_ns).bind(5, s.version).bind(6, s.command_line);
  st.bind(7, s.start_ts_ns).bind(8, s.source);
  if (s.cpus > 0) st.bind(9, int64_t(s.cpus)); else st.bind_null(9);
  // A trace is written by the agent's own process: explain keeps it out of
  // the neighbours it names (its threads run beside the traced ones).
  if (s.source == "trace") st.bind(10, int64_t(getpid())); else st.bind_null(10);
  st.exec();
  session_id_ = sqlite3_last_insert_rowid(db_->raw());
  return session_id_;
}

int64_t TraceWriter::dict_id(std::string_view dictionary, std::unordered_map<std::string, int64_t>& cache,
                             std::string_view name) {
  auto it = cache.find(std::string(name));
  if (it != cache.end()) return it->second;
  auto& [insert, lookup] = st_->dict_sql.find(dictionary)->second;
  insert.bind(1, name).exec();
  lookup.bind(1, name);
  int64_t id = lookup.step() ? lookup.col_int(0) : 0;
  lookup.reset();
  cache.emplace(std::string(name), id);
  return id;
}

template <typename T>
void TraceWriter::insert_rows(const std::vector<typename T::Row>& rows) {
  auto& ins = std::get<TableInsert<T>>(st_->inserts.tables);
  auto& q = ins.st;
  const auto& cols = T::kTable.columns;
  const int first = T::kTable.per_session() ? 2 : 1;
  for (const auto& row : rows) {
    if (T::kTable.per_session()) q.bind(1, session_id_);
    for (size_t i = 0; i < cols.size(); i++) {
      const int at = first + int(i);
      const model::SqlValue v = cols[i].get(row);
      if (const auto* text = std::get_if<std::string_view>(&v); text && ins.dicts[i]) {
        if (text->empty()) q.bind_null(at);
        else q.bind(at, dict_id(cols[i].dictionary, *ins.dicts[i], *text));
      } else if (const auto* n = std::get_if<int64_t>(&v)) {
        q.bind(at, *n);
      } else if (const auto* r = std::get_if<double>(&v)) {
        q.bind(at, *r);
      } else if (text) {
        q.bind(at, *text);
      } else {
        q.bind_null(at);
      }
    }
    q.exec();
  }
}

void TraceWriter::write(const model::Batch& b) {
  if (b.empty()) return;
  in_transaction(*db_, [&] {
    model::for_each_table([&]<typename T>() { insert_rows<T>(b.of<typename T::Row>()); });
  });
  rows_written_ += int64_t(b.size());
}

int64_t TraceWriter::enforce_max_size(int64_t max_bytes) {
  auto live_bytes = [&] {
    int64_t pages = db_->query_int(sql<"PRAGMA page_count">()).value_or(0);
    int64_t free_pages = db_->query_int(sql<"PRAGMA freelist_count">()).value_or(0);
    return (pages - free_pages) * db_->query_int(sql<"PRAGMA page_size">()).value_or(4096);
  };
  if (max_bytes <= 0 || live_bytes() <= max_bytes) return 0;
  // The tables whose oldest rows go first: events and samples (the model
  // says which); what was lost (drops), process identities and counters stay.
  std::vector<std::string> trimmed;
  model::for_each_table([&]<typename T>() {
    if (T::kTable.trimmed()) trimmed.emplace_back(T::kTable.name);
  });
  int64_t deleted = 0;
  in_transaction(*db_, [&] {
    // An eighth of each table per round, oldest first (rowids grow with
    // insertion), until under 3/4 of the limit so this does not run per batch.
    for (int round = 0; round < 32 && live_bytes() > max_bytes / 4 * 3; round++) {
      int64_t before = deleted;
      for (const auto& t : trimmed) {
        db_->exec(sql<"DELETE FROM {} WHERE rowid <= (SELECT min(rowid) FROM {})"
                      " + (SELECT (count(*) + 7) / 8 FROM {})">(t, t, t));
        deleted += sqlite3_changes(db_->raw());
      }
      if (deleted == before) break;  // nothing left to delete: the limit is below the fixed tables
    }
    if (deleted > 0) insert_rows<model::Drops>({{wall_now_ns(), "retention", deleted}});
  });
  return deleted;
}

void TraceWriter::write_op_counts(const std::vector<model::OpCount>& counts) {
  in_transaction(*db_, [&] { insert_rows<model::OpCounts>(counts); });
}

void TraceWriter::end_session(int64_t end_ts_ns) {
  auto st = db_->prepare(sql<"UPDATE sessions SET end_ts_ns = ? WHERE id = ?">());
  st.bind(1, end_ts_ns).bind(2, session_id_).exec();
  // Fold the WAL back so the file is self-contained when copied elsewhere.
  try {
    db_->exec(sql<"PRAGMA wal_checkpoint(TRUNCATE)">());
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

void AsyncTraceWriter::post(model::Batch&& batch) {
  if (batch.empty()) return;
  // A whole ring drained at once can hold ~80k calls: commit them in slices,
  // oldest first, so retention (--max-db-size) runs between slices and the
  // file stays within about one slice of its limit.
  constexpr size_t kSlice = 8192;
  auto& calls = batch.of<model::CudaCall>();
  if (calls.size() > kSlice) {
    std::vector<model::CudaCall> rest(std::make_move_iterator(calls.begin() + kSlice),
                                      std::make_move_iterator(calls.end()));
    calls.resize(kSlice);
    post(std::move(batch));
    model::Batch tail;
    tail.of<model::CudaCall>() = std::move(rest);
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
    model::Batch b = std::move(queue_.front());
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

void AsyncTraceWriter::close(int64_t end_ts_ns, const std::vector<model::OpCount>& counts) {
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
