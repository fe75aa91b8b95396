// SPDX-License-Identifier: Apache-2.0
#include "causeway/present/perfetto_export.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "causeway/common/time.h"

namespace causeway::present {
namespace {

using json = nlohmann::ordered_json;

// "12.345": µs with exact nanoseconds. Doubles would lose them at wall-clock
// magnitudes, so times are made relative and written as fixed text.
std::string micros(int64_t ns) {
  if (ns < 0) return "-" + micros(-ns);
  std::string frac = std::to_string(ns % 1000);
  return std::to_string(ns / 1000) + "." + std::string(3 - frac.size(), '0') + frac;
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

class EventWriter {
 public:
  EventWriter(std::ostream& out, int64_t base) : out_(out), base_(base) {}
  // Fields common to every event, then the ph-specific ones; `extra` is
  // spliced in as raw JSON members (ts/dur must stay exact text).
  void event(const json& head, int64_t ts_ns, const std::string& extra, const json& args) {
    std::string s = dump(head);
    s.pop_back();  // reopen the object
    s += ",\"ts\":" + micros(ts_ns - base_) + extra;
    if (!args.empty()) s += ",\"args\":" + dump(args);
    s += "}";
    raw(s);
  }
  void slice(const std::string& name, const std::string& cat, int64_t pid, int64_t tid,
             int64_t ts_ns, int64_t dur_ns, const json& args) {
    json head = {{"name", name}, {"cat", cat}, {"ph", "X"}, {"pid", pid}, {"tid", tid}};
    event(head, ts_ns, ",\"dur\":" + micros(std::max<int64_t>(dur_ns, 0)), args);
  }
  void raw(const std::string& s) {
    out_ << (first_ ? "\n" : ",\n") << s;
    first_ = false;
  }

 private:
  std::ostream& out_;
  int64_t base_;
  bool first_ = true;
};

void put(json& args, const char* key, store::Statement& st, int col) {
  if (st.col_null(col)) return;
  if (sqlite3_column_type(st.raw(), col) == SQLITE_INTEGER)
    args[key] = st.col_int(col);
  else
    args[key] = st.col_text(col);
}

}  // namespace

ExportCounts write_perfetto_json(store::Connection& db, const TraceWindow& w,
                                 const std::vector<TraceFlow>& flows, std::ostream& out) {
  ExportCounts n;
  const std::string where = " WHERE 1" + w.sql_and();
  int64_t base = INT64_MAX;
  for (const char* table : {"cuda_call_events", "nccl_call_events", "offcpu_events",
                            "io_requests", "tcp_retransmits", "reclaims"}) {
    auto v = db.query_int("SELECT min(ts_ns) FROM " + std::string(table) + where);
    if (v) base = std::min(base, *v);
  }
  if (base == INT64_MAX) base = w.from_ns.value_or(0);

  out << "{\"traceEvents\":[";
  EventWriter ev(out, base);
  std::set<std::pair<int64_t, int64_t>> threads;  // (pid, tid) seen
  std::set<int64_t> pids;

  {
    auto st = db.prepare(
        "SELECT ts_ns, dur_ns, pid, tid, op, layer, ret, bytes, kind, stream, grid_x, grid_y, "
        "grid_z, block_x, block_y, block_z, shared_mem, kernel, stack_id FROM cuda_calls" +
        where + " ORDER BY ts_ns");
    while (st.step()) {
      json args = json::object();
      args["ret"] = st.col_int(6);
      put(args, "bytes", st, 7);
      put(args, "kind", st, 8);
      put(args, "stream", st, 9);
      if (!st.col_null(10))
        args["grid"] = std::to_string(st.col_int(10)) + "x" + std::to_string(st.col_int(11)) +
                       "x" + std::to_string(st.col_int(12));
      if (!st.col_null(13))
        args["block"] = std::to_string(st.col_int(13)) + "x" + std::to_string(st.col_int(14)) +
                        "x" + std::to_string(st.col_int(15));
      put(args, "shared_mem", st, 16);
      put(args, "kernel", st, 17);
      put(args, "stack_id", st, 18);
      const int64_t pid = st.col_int(2), tid = st.col_int(3);
      ev.slice(st.col_text(4), "cuda." + st.col_text(5), pid, tid, st.col_int(0), st.col_int(1),
               args);
      threads.emplace(pid, tid);
      n.cuda++;
    }
  }
  {
    auto st = db.prepare(
        "SELECT ts_ns, dur_ns, pid, tid, op, ret, comm_hash, rank, nranks, seq, count, datatype, "
        "redop, bytes, stream, peer, stack_id FROM nccl_calls" +
        where + " ORDER BY ts_ns");
    const char* keys[] = {"ret",   "comm_hash", "rank",   "nranks", "seq", "count",
                          "datatype", "redop",  "bytes", "stream", "peer", "stack_id"};
    while (st.step()) {
      json args = json::object();
      for (int k = 0; k < 12; k++) put(args, keys[k], st, 5 + k);
      const int64_t pid = st.col_int(2), tid = st.col_int(3);
      ev.slice(st.col_text(4), "nccl", pid, tid, st.col_int(0), st.col_int(1), args);
      threads.emplace(pid, tid);
      n.nccl++;
    }
  }
  {
    // An off-CPU interval nests inside whatever call the thread was in: a
    // thread cannot enter or leave a call while it is off the CPU.
    auto st = db.prepare(
        "SELECT ts_ns, dur_ns, pid, tid, cpu, state, by_pid, by_comm, waker_pid FROM offcpu" +
        where + " ORDER BY ts_ns");
    while (st.step()) {
      json args = json::object();
      args["cpu"] = st.col_int(4);
      args["state"] = st.col_text(5);
      put(args, "by_pid", st, 6);
      put(args, "by_comm", st, 7);
      put(args, "waker_pid", st, 8);
      const int64_t pid = st.col_int(2), tid = st.col_int(3);
      ev.slice("off-CPU (" + st.col_text(5) + ")", "offcpu", pid, tid, st.col_int(0),
               st.col_int(1), args);
      threads.emplace(pid, tid);
      n.offcpu++;
    }
  }
  {
    auto st = db.prepare("SELECT ts_ns, dur_ns, pid, tid, nr_reclaimed FROM reclaims" + where +
                         " ORDER BY ts_ns");
    while (st.step()) {
      const int64_t pid = st.col_int(2), tid = st.col_int(3);
      ev.slice("direct reclaim", "reclaim", pid, tid, st.col_int(0), st.col_int(1),
               {{"nr_reclaimed", st.col_int(4)}});
      threads.emplace(pid, tid);
      n.reclaim++;
    }
  }
  {
    // Block requests carry no thread and overlap one another: async slices,
    // which Perfetto draws on their own track under the process.
    auto st = db.prepare("SELECT ts_ns, dur_ns, pid, dev, bytes, op FROM io_requests" + where +
                         " ORDER BY ts_ns");
    int64_t id = 0;
    while (st.step()) {
      const int64_t pid = st.col_int(2);
      const std::string name = "block " + st.col_text(5);
      json args = {{"dev", st.col_text(3)}, {"bytes", st.col_int(4)}};
      json head = {{"name", name}, {"cat", "io"}, {"ph", "b"}, {"id", ++id},
                   {"pid", pid},   {"tid", pid}};
      ev.event(head, st.col_int(0), "", args);
      head["ph"] = "e";
      ev.event(head, st.col_int(0) + std::max<int64_t>(st.col_int(1), 0), "", json::object());
      pids.insert(pid);
      n.io++;
    }
  }
  {
    auto st = db.prepare(
        "SELECT ts_ns, pid, saddr, sport, daddr, dport, state FROM tcp_retransmits" + where +
        " ORDER BY ts_ns");
    while (st.step()) {
      const int64_t pid = st.col_int(1);
      json head = {{"name", "tcp retransmit"}, {"cat", "tcp"}, {"ph", "i"}, {"s", "p"},
                   {"pid", pid},               {"tid", pid}};
      json args = {{"src", st.col_text(2) + ":" + std::to_string(st.col_int(3))},
                   {"dst", st.col_text(4) + ":" + std::to_string(st.col_int(5))},
                   {"state", st.col_text(6)}};
      ev.event(head, st.col_int(0), "", args);
      pids.insert(pid);
      n.tcp++;
    }
  }
  // Counter tracks: each process's GPU memory held (device and managed),
  // after every allocation and free (the gpu_memory_timeline view).
  {
    auto st = db.prepare("SELECT ts_ns, pid, memory, held_bytes FROM gpu_memory_timeline WHERE memory != 'host'" +
                         w.sql_and() + " ORDER BY ts_ns");
    while (st.step()) {
      const int64_t pid = st.col_int(1);
      json head = {{"name", "GPU memory held (" + st.col_text(2) + ")"}, {"cat", "memory"}, {"ph", "C"}, {"pid", pid}, {"tid", pid}};
      ev.event(head, st.col_int(0), "", json{{"bytes", st.col_int(3)}});
      pids.insert(pid);
      n.counters++;
    }
  }
  // And, where PyTorch's allocator was probed, what its tensors held (the
  // allocated curve of gpu_memory_curves): the gap to the device curve is
  // its pool's cache. Older files have no such view.
  if (db.query_int("SELECT count(*) FROM sqlite_master WHERE name = 'gpu_memory_curves'").value_or(0)) {
    auto st = db.prepare("SELECT ts_ns, pid, held_bytes FROM gpu_memory_curves WHERE level = 'allocated'" +
                         w.sql_and() + " ORDER BY ts_ns");
    while (st.step()) {
      const int64_t pid = st.col_int(1);
      json head = {{"name", "GPU memory allocated (tensors)"}, {"cat", "memory"}, {"ph", "C"}, {"pid", pid}, {"tid", pid}};
      ev.event(head, st.col_int(0), "", json{{"bytes", st.col_int(2)}});
      pids.insert(pid);
      n.counters++;
    }
  }
  // Flow arrows: "s" binds to the slice enclosing its ts on its thread, "f"
  // with bp=e to the slice enclosing its ts on the target thread.
  int64_t flow_id = 0;
  for (const auto& f : flows) {
    if (!w.contains(f.from_ts_ns) && !w.contains(f.to_ts_ns)) continue;
    ++flow_id;
    json head = {{"name", f.name}, {"cat", "causal"}, {"ph", "s"}, {"id", flow_id},
                 {"pid", f.from_pid}, {"tid", f.from_tid}};
    ev.event(head, f.from_ts_ns, "", json::object());
    head = {{"name", f.name}, {"cat", "causal"}, {"ph", "f"}, {"bp", "e"}, {"id", flow_id},
            {"pid", f.to_pid}, {"tid", f.to_tid}};
    ev.event(head, f.to_ts_ns, "", json::object());
    threads.emplace(f.from_pid, f.from_tid);
    threads.emplace(f.to_pid, f.to_tid);
    n.flows++;
  }

  // Track names: "comm (pid)" per process, "comm (tid)" / "tid N" per thread.
  for (const auto& [pid, tid] : threads) pids.insert(pid);
  std::map<int64_t, std::string> comm;
  {
    auto st = db.prepare("SELECT pid, comm, cmdline FROM processes ORDER BY session_id");
    while (st.step()) comm[st.col_int(0)] = st.col_text(1);
  }
  for (int64_t pid : pids) {
    const std::string c = comm.count(pid) && !comm[pid].empty() ? comm[pid] : "pid";
    ev.raw(dump(json{{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"tid", 0},
                     {"args", {{"name", c + " (" + std::to_string(pid) + ")"}}}}));
    n.processes++;
  }
  for (const auto& [pid, tid] : threads) {
    std::string name = tid == pid && comm.count(pid) ? comm[pid] + " (main thread)"
                                                     : "thread " + std::to_string(tid);
    ev.raw(dump(json{{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", tid},
                     {"args", {{"name", name}}}}));
    n.threads++;
  }
  json other = {{"producer", "causeway " CAUSEWAY_VERSION},
                {"base_wall_ns", base},
                {"base_wall_time", format_wall_time(base)}};
  out << "\n],\"displayTimeUnit\":\"ns\",\"otherData\":" << dump(other) << "}\n";
  return n;
}

}  // namespace causeway::present
