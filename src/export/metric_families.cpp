// SPDX-License-Identifier: Apache-2.0
#include "causeway/export/metric_families.h"

#include <algorithm>
#include <deque>
#include <iterator>
#include <map>
#include <sstream>

#include "causeway/analyze/account.h"
#include "causeway/analyze/recent_explain.h"
#include "causeway/common/op_table.h"
#include "causeway/model/drops.h"

namespace causeway::exporters {
namespace {

// Histogram edges: 1 us x 4^k up to 16 s (13 buckets and +Inf).
constexpr int kEdges = 13;

std::string copy_direction(int kind) {
  return kind < 0 ? "unknown" : std::string(copy_kind_name(CopyKind(kind)));
}

// References to families stay valid while more are added (a deque).
class Families {
 public:
  MetricFamily& add(std::string name, MetricType type, std::string unit, std::string help) {
    out.push_back({std::move(name), std::move(help), std::move(unit), type, {}, {}});
    return out.back();
  }
  std::vector<MetricFamily> take() { return {std::make_move_iterator(out.begin()), std::make_move_iterator(out.end())}; }
  std::deque<MetricFamily> out;
};

void point(MetricFamily& f, Labels labels, double v) { f.points.push_back({std::move(labels), v, {}, 0, 0}); }

// The kernel's exact per-op counters.
void add_op_counters(Families& fs, const std::vector<model::OpCount>& counts) {
  auto per_op = [&](const char* name, const char* unit, const char* help, auto value) {
    auto& f = fs.add(name, MetricType::Counter, unit, help);
    for (const auto& c : counts)
      if (const OpSpec* op = find_op(c.op_id))
        point(f, {{"op", std::string(op->name)}, {"layer", std::string(layer_name(op->layer))}}, value(c));
  };
  per_op("causeway_calls_total", "1", "Calls of each traced function, exact (counted in the kernel).",
         [](const model::OpCount& c) { return double(c.calls); });
  per_op("causeway_call_errors_total", "1", "Calls that returned an error, exact.",
         [](const model::OpCount& c) { return double(c.errors); });
  per_op("causeway_call_seconds_total", "s", "Time spent inside each traced function, exact.",
         [](const model::OpCount& c) { return double(c.total_ns) / 1e9; });
}

void add_in_flight(Families& fs, const std::map<std::pair<uint32_t, uint16_t>, int64_t>& in_flight) {
  // Every second, also with no call in flight: an empty family says none.
  auto& f = fs.add("causeway_call_in_flight_seconds", MetricType::Gauge, "s",
                   "Age of the oldest call still in flight for a second or more, per process and op (a hang "
                   "grows here before the call returns, if it ever does).");
  for (const auto& [key, ns] : in_flight)
    if (const OpSpec* op = find_op(key.second))
      point(f, {{"pid", std::to_string(key.first)}, {"op", std::string(op->name)}}, double(ns) / 1e9);
}

// Per traced process alive now: its identity, its calls, NCCL traffic,
// copies and tensor memory.
void add_process_families(Families& fs, const agent::Progress& p) {
  auto& info = fs.add("causeway_process_info", MetricType::Gauge, "1",
                      "1 for each traced process, with its container and Kubernetes pod (join on pid).");
  for (const auto& [pid, i] : *p.processes)
    point(info,
          {{"pid", std::to_string(pid)}, {"comm", i.comm}, {"container_id", i.container_id},
           {"pod_uid", i.pod_uid}, {"pod", i.pod_name}, {"namespace", i.pod_namespace}},
          1);
  auto& calls = fs.add("causeway_process_calls_total", MetricType::Counter, "1",
                       "Recorded calls per traced process and function (rows shed under overload not included).");
  auto& errors = fs.add("causeway_process_call_errors_total", MetricType::Counter, "1",
                        "Of those, calls that returned an error, per process and function.");
  auto& nccl_calls = fs.add("causeway_nccl_calls_total", MetricType::Counter, "1",
                            "NCCL calls per process, communicator (its hash, the same on every rank), rank and "
                            "function (docs/fleet.md joins them to find the straggler rank).");
  auto& nccl_bytes = fs.add("causeway_nccl_bytes_total", MetricType::Counter, "By",
                            "Bytes of those calls (count x datatype size).");
  auto& nccl_secs = fs.add("causeway_nccl_seconds_total", MetricType::Counter, "s",
                           "Time inside those calls on the host: enqueueing (a collective's wait shows in the "
                           "syncs after it).");
  auto& copies =
      fs.add("causeway_copies_total", MetricType::Counter, "1", "Memory copies per process and direction.");
  auto& copy_bytes = fs.add("causeway_copy_bytes_total", MetricType::Counter, "By", "Bytes copied, by direction.");
  auto& copy_secs = fs.add("causeway_copy_seconds_total", MetricType::Counter, "s",
                           "Time inside copy calls, by direction.");
  // Only while the allocator was probed all along: in launch windows, a
  // tensor freed between them would stay counted, and the gauge drift up.
  MetricFamily* tensors =
      p.launch_probed_share >= 1
          ? &fs.add("causeway_gpu_tensor_allocated_bytes", MetricType::Gauge, "By",
                    "Device memory PyTorch's tensors hold, per process (its caching allocator probed); the "
                    "pool's reserved memory is the driver's allocations. Absent once launches are probed "
                    "in windows (--launch-duty always keeps it).")
          : nullptr;
  for (const auto& [pid, t] : p.stats.processes) {
    if (!p.processes->count(pid)) continue;
    const std::string id = std::to_string(pid);
    if (tensors && t.has_tensors) point(*tensors, {{"pid", id}}, double(t.tensor_bytes));
    for (const auto& [op_id, n] : t.calls)
      if (const OpSpec* op = find_op(op_id)) point(calls, {{"pid", id}, {"op", std::string(op->name)}}, double(n));
    for (const auto& [op_id, n] : t.errors)
      if (const OpSpec* op = find_op(op_id)) point(errors, {{"pid", id}, {"op", std::string(op->name)}}, double(n));
    for (const auto& [k, n] : t.nccl) {
      const OpSpec* op = find_op(k.op);
      // Group brackets and setup calls without a communicator: in calls_total.
      if (!op || (k.comm.empty() && op->cls != OpClass::Collective && op->cls != OpClass::P2P)) continue;
      Labels l{{"pid", id},
               {"communicator", k.comm},
               {"rank", k.rank < 0 ? "" : std::to_string(k.rank)},
               {"nranks", k.nranks < 0 ? "" : std::to_string(k.nranks)},
               {"op", std::string(op->name)}};
      point(nccl_calls, l, double(n.calls));
      point(nccl_bytes, l, double(n.bytes));
      point(nccl_secs, l, double(n.ns) / 1e9);
    }
    for (const auto& [kind, n] : t.copies) {
      Labels l{{"pid", id}, {"direction", copy_direction(kind)}};
      point(copies, l, double(n.calls));
      point(copy_bytes, l, double(n.bytes));
      point(copy_secs, l, double(n.ns) / 1e9);
    }
  }
}

void add_latency_histogram(Families& fs, const consume::LiveStats& s) {
  auto& h = fs.add("causeway_call_duration_seconds", MetricType::Histogram, "s",
                   "Latency of recorded calls (launches counted in the kernel included); bucket edges within 6%.");
  int64_t edge_ns = 1000;
  for (int k = 0; k < kEdges; k++, edge_ns *= 4) h.bounds.push_back(double(edge_ns) / 1e9);
  for (const auto& [id, hist] : s.ops) {
    const OpSpec* op = find_op(id);
    if (!op) continue;
    MetricPoint pt{{{"op", std::string(op->name)}}, 0, {}, double(hist.total()) / 1e9, uint64_t(hist.count())};
    int64_t below = 0, e = 1000;
    for (int k = 0; k < kEdges; k++, e *= 4) {
      const int64_t le = hist.count_le(e);
      pt.buckets.push_back(uint64_t(le - below));
      below = le;
    }
    pt.buckets.push_back(uint64_t(hist.count() - below));
    h.points.push_back(std::move(pt));
  }
}

// The trace's own counters (drops, rows) and the host context's.
void add_trace_and_host_counters(Families& fs, const agent::Progress& p) {
  if (p.drops_by_source) {
    auto& f = fs.add("causeway_dropped_records_total", MetricType::Counter, "1",
                     "Records lost, by source ('shed': rows of fast calls left out under overload, their calls still "
                     "counted).");
    for (int src = 0; src < CW_DROP_MAX; src++)
      point(f, {{"source", std::string(model::kDropSourceNames[src])}}, double(p.drops_by_source[src]));
  }
  point(fs.add("causeway_rows_written_total", MetricType::Counter, "1", "Rows written to the trace file."), {},
        double(p.rows));
  const auto& h = p.stats.host;
  auto& off =
      fs.add("causeway_offcpu_seconds_total", MetricType::Counter, "s", "Off-CPU time of traced threads, by state.");
  point(off, {{"state", "runnable"}}, double(h.offcpu_runnable_ns) / 1e9);
  point(off, {{"state", "waiting"}}, double(h.offcpu_ns - h.offcpu_runnable_ns) / 1e9);
  point(fs.add("causeway_block_io_requests_total", MetricType::Counter, "1", "Block I/O requests of traced processes."),
        {}, double(h.io_count));
  point(fs.add("causeway_block_io_bytes_total", MetricType::Counter, "By", "Bytes of those requests."), {},
        double(h.io_bytes));
  point(fs.add("causeway_tcp_retransmits_total", MetricType::Counter, "1", "TCP retransmits on the host."), {},
        double(h.retransmits));
  point(fs.add("causeway_launch_probed_ratio", MetricType::Gauge, "1",
               "Share of the trace's time kernel launches were probed (--launch-duty)."),
        {}, p.launch_probed_share);
}

// The latest NVML sample of each GPU.
void add_gpu_gauges(Families& fs, const std::vector<model::GpuSample>& gpus) {
  auto gauge = [&](const char* name, const char* unit, const char* help, auto field, double scale) {
    auto& f = fs.add(name, MetricType::Gauge, unit, help);
    for (const auto& g : gpus)
      if (const auto& v = g.*field) point(f, {{"gpu", std::to_string(g.gpu)}}, double(*v) * scale);
  };
  using model::GpuSample;
  gauge("causeway_gpu_utilization_ratio", "1", "GPU busy share over NVML's last sample period.", &GpuSample::util_gpu,
        0.01);
  gauge("causeway_gpu_memory_used_bytes", "By", "Device memory in use.", &GpuSample::mem_used, 1);
  gauge("causeway_gpu_sm_clock_hertz", "Hz", "SM clock.", &GpuSample::sm_clock, 1e6);
  gauge("causeway_gpu_power_watts", "W", "Power draw.", &GpuSample::power_mw, 1e-3);
  gauge("causeway_gpu_temperature_celsius", "Cel", "GPU temperature.", &GpuSample::temp_c, 1);
  gauge("causeway_gpu_throttle_reasons", "1", "nvmlClocksEventReasons bits (0: none).", &GpuSample::throttle, 1);
  gauge("causeway_gpu_ecc_uncorrected_errors", "1", "Volatile uncorrected ECC errors since boot.",
        &GpuSample::ecc_uncorrected, 1);
}

// The latest periodic explain: its window and cost, its chains by root cause,
// and where the busiest dispatcher threads' time went.
void add_recent_explain(Families& fs, const analyze::RecentSnapshot& recent) {
  const auto& e = recent.explanation;
  const double window_s = double(recent.to_ns - recent.from_ns) / 1e9;
  point(fs.add("causeway_explain_window_seconds", MetricType::Gauge, "s",
               "The recent window the chain and account series explain (a periodic explain)."),
        {}, window_s);
  point(fs.add("causeway_explain_cost_seconds", MetricType::Gauge, "s",
               "Wall time the last periodic explain took (it runs at the lowest CPU priority)."),
        {}, double(recent.took_ns) / 1e9);
  // Every root cause the rules can name would be unbounded only in theory:
  // the rule set is fixed, so one series per (root cause, severity) seen.
  std::map<std::pair<std::string, std::string>, std::pair<int64_t, int64_t>> by_cause;
  for (const auto& c : e.chains) {
    auto& v = by_cause[{c.root_cause, std::string(analyze::severity_name(c.severity))}];
    v.first++;
    v.second += c.impact_ns;
  }
  auto& chains = fs.add("causeway_chains", MetricType::Gauge, "1",
                        "Causal chains in the recent window, by root cause and severity.");
  auto& impact = fs.add("causeway_chain_impact_seconds", MetricType::Gauge, "s",
                        "Time those chains cost in the recent window (their impact).");
  for (const auto& [k, v] : by_cause) {
    point(chains, {{"root_cause", k.first}, {"severity", k.second}}, double(v.first));
    point(impact, {{"root_cause", k.first}, {"severity", k.second}}, double(v.second) / 1e9);
  }
  auto& share = fs.add("causeway_thread_time_ratio", MetricType::Gauge, "1",
                       "Where a dispatcher thread's time went in the recent window (per step when steps are "
                       "found): the share of each part, the busiest threads only.");
  for (size_t i = 0; i < e.accounts.size() && i < kMaxThreads; i++) {
    const auto& a = e.accounts[i];
    const auto& t = a.judged();
    const double total = double(std::max<int64_t>(1, t.total()));
    for (const auto& part : analyze::split_parts())
      point(share,
            {{"pid", std::to_string(a.pid)}, {"tid", std::to_string(a.tid)}, {"thread", a.name}, {"part", part.key}},
            double(t.*part.field) / total);
  }
}

}  // namespace

std::vector<MetricFamily> collect_metrics(const agent::Progress& p, const analyze::RecentSnapshot* recent) {
  Families fs;
  if (p.op_counts) add_op_counters(fs, *p.op_counts);
  if (p.in_flight) add_in_flight(fs, *p.in_flight);
  if (p.processes) add_process_families(fs, p);
  add_latency_histogram(fs, p.stats);
  add_trace_and_host_counters(fs, p);
  if (p.gpus && !p.gpus->empty()) add_gpu_gauges(fs, *p.gpus);
  if (recent && recent->error.empty()) add_recent_explain(fs, *recent);
  return fs.take();
}

std::string render_prometheus(const std::vector<MetricFamily>& families) {
  // Label values are escaped as the exposition format asks (\\, \", \n).
  auto esc = [](const std::string& v) {
    std::string out;
    for (char ch : v) {
      if (ch == '\\' || ch == '"') out += '\\';
      if (ch == '\n') {
        out += "\\n";
        continue;
      }
      out += ch;
    }
    return out;
  };
  auto labels = [&](const Labels& l, const std::string& extra = "") {
    if (l.empty() && extra.empty()) return std::string();
    std::string out = "{";
    for (size_t i = 0; i < l.size(); i++) out += (i ? "," : "") + l[i].first + "=\"" + esc(l[i].second) + "\"";
    if (!extra.empty()) out += (l.empty() ? "" : ",") + extra;
    return out + "}";
  };
  std::ostringstream o;
  o.precision(12);
  for (const auto& f : families) {
    o << "# HELP " << f.name << ' ' << f.help << "\n# TYPE " << f.name << ' '
      << (f.type == MetricType::Counter ? "counter" : f.type == MetricType::Gauge ? "gauge" : "histogram") << '\n';
    for (const auto& pt : f.points) {
      if (f.type != MetricType::Histogram) {
        o << f.name << labels(pt.labels) << ' ' << pt.value << '\n';
        continue;
      }
      uint64_t cumulative = 0;
      for (size_t b = 0; b < pt.buckets.size(); b++) {
        cumulative += pt.buckets[b];
        std::ostringstream le;
        le.precision(12);
        if (b < f.bounds.size()) le << f.bounds[b];
        else le << "+Inf";
        o << f.name << "_bucket" << labels(pt.labels, "le=\"" + le.str() + "\"") << ' ' << cumulative << '\n';
      }
      o << f.name << "_sum" << labels(pt.labels) << ' ' << pt.sum << '\n';
      o << f.name << "_count" << labels(pt.labels) << ' ' << pt.count << '\n';
    }
  }
  return o.str();
}

}  // namespace causeway::exporters
