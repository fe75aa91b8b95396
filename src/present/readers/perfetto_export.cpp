// SPDX-License-Identifier: Apache-2.0
#include "causeway/present/perfetto_export.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "causeway/common/time.h"
#include "causeway/analyze/trace_view.h"

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

template <typename T>
void put(json& args, const char* key, const std::optional<T>& v) {
  if (v) args[key] = *v;
}

}  // namespace

ExportCounts write_perfetto_json(store::Connection& db, const TraceWindow& w,
                                 const std::vector<TraceFlow>& flows, std::ostream& out) {
  ExportCounts n;
  int64_t base = analyze::first_event_ns(db, w).value_or(INT64_MAX);
  if (base == INT64_MAX) base = w.from_ns.value_or(0);

  out << "{\"traceEvents\":[";
  EventWriter ev(out, base);
  std::set<std::pair<int64_t, int64_t>> threads;  // (pid, tid) seen
  std::set<int64_t> pids;

  analyze::each_cuda_call(db, w, [&](const analyze::CudaCallRow& c) {
    json args = json::object();
    args["ret"] = c.ret;
    put(args, "bytes", c.bytes);
    put(args, "kind", c.kind);
    put(args, "stream", c.stream);
    if (c.grid)
      args["grid"] = std::to_string(c.grid->x) + "x" + std::to_string(c.grid->y) + "x" +
                     std::to_string(c.grid->z);
    if (c.block)
      args["block"] = std::to_string(c.block->x) + "x" + std::to_string(c.block->y) + "x" +
                      std::to_string(c.block->z);
    put(args, "shared_mem", c.shared_mem);
    put(args, "kernel", c.kernel);
    put(args, "stack_id", c.stack_id);
    ev.slice(c.op, "cuda." + c.layer, c.pid, c.tid, c.ts_ns, c.dur_ns, args);
    threads.emplace(c.pid, c.tid);
    n.cuda++;
  });
  analyze::each_nccl_call(db, w, [&](const analyze::NcclCallRow& c) {
    json args = json::object();
    args["ret"] = c.ret;
    put(args, "comm_hash", c.comm_hash);
    put(args, "rank", c.rank);
    put(args, "nranks", c.nranks);
    put(args, "seq", c.seq);
    put(args, "count", c.count);
    put(args, "datatype", c.datatype);
    put(args, "redop", c.redop);
    put(args, "bytes", c.bytes);
    put(args, "stream", c.stream);
    put(args, "peer", c.peer);
    put(args, "stack_id", c.stack_id);
    ev.slice(c.op, "nccl", c.pid, c.tid, c.ts_ns, c.dur_ns, args);
    threads.emplace(c.pid, c.tid);
    n.nccl++;
  });
  // An off-CPU interval nests inside whatever call the thread was in: a
  // thread cannot enter or leave a call while it is off the CPU.
  analyze::each_offcpu_interval(db, w, [&](const analyze::OffcpuRow& o) {
    json args = json::object();
    args["cpu"] = o.cpu;
    args["state"] = o.state;
    put(args, "by_pid", o.by_pid);
    put(args, "by_comm", o.by_comm);
    put(args, "waker_pid", o.waker_pid);
    ev.slice("off-CPU (" + o.state + ")", "offcpu", o.pid, o.tid, o.ts_ns, o.dur_ns, args);
    threads.emplace(o.pid, o.tid);
    n.offcpu++;
  });
  analyze::each_reclaim(db, w, [&](const analyze::ReclaimRow& r) {
    ev.slice("direct reclaim", "reclaim", r.pid, r.tid, r.ts_ns, r.dur_ns,
             {{"nr_reclaimed", r.nr_reclaimed}});
    threads.emplace(r.pid, r.tid);
    n.reclaim++;
  });
  // Block requests carry no thread and overlap one another: async slices,
  // which Perfetto draws on their own track under the process.
  int64_t io_id = 0;
  analyze::each_io_request(db, w, [&](const analyze::IoRequestRow& r) {
    json args = {{"dev", r.dev}, {"bytes", r.bytes}};
    json head = {{"name", "block " + r.op}, {"cat", "io"}, {"ph", "b"}, {"id", ++io_id},
                 {"pid", r.pid},            {"tid", r.pid}};
    ev.event(head, r.ts_ns, "", args);
    head["ph"] = "e";
    ev.event(head, r.ts_ns + std::max<int64_t>(r.dur_ns, 0), "", json::object());
    pids.insert(r.pid);
    n.io++;
  });
  analyze::each_tcp_retransmit(db, w, [&](const analyze::TcpRetransmitRow& r) {
    json head = {{"name", "tcp retransmit"}, {"cat", "tcp"}, {"ph", "i"}, {"s", "p"},
                 {"pid", r.pid},             {"tid", r.pid}};
    json args = {{"src", r.saddr + ":" + std::to_string(r.sport)},
                 {"dst", r.daddr + ":" + std::to_string(r.dport)},
                 {"state", r.state}};
    ev.event(head, r.ts_ns, "", args);
    pids.insert(r.pid);
    n.tcp++;
  });
  // Counter tracks: each process's GPU memory held (device and managed),
  // after every allocation and free.
  analyze::each_gpu_memory_held(db, w, [&](const analyze::MemoryHeldRow& m) {
    json head = {{"name", "GPU memory held (" + m.memory + ")"}, {"cat", "memory"}, {"ph", "C"},
                 {"pid", m.pid}, {"tid", m.pid}};
    ev.event(head, m.ts_ns, "", json{{"bytes", m.held_bytes}});
    pids.insert(m.pid);
    n.counters++;
  });
  // And, where PyTorch's allocator was probed, what its tensors held: the
  // gap to the device curve is its pool's cache.
  analyze::each_tensor_memory_held(db, w, [&](const analyze::TensorsHeldRow& m) {
    json head = {{"name", "GPU memory allocated (tensors)"}, {"cat", "memory"}, {"ph", "C"},
                 {"pid", m.pid}, {"tid", m.pid}};
    ev.event(head, m.ts_ns, "", json{{"bytes", m.held_bytes}});
    pids.insert(m.pid);
    n.counters++;
  });
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
  for (const auto& p : analyze::processes_by_session(db)) comm[p.pid] = p.comm;
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
