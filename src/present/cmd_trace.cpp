// SPDX-License-Identifier: Apache-2.0
// `causeway trace`: flags into one agent::AgentConfig (whose members hold the
// defaults), then the agent runs with the live view watching.
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>

#include <unistd.h>

#include <spdlog/spdlog.h>

#include "causeway/agent/agent.h"
#include "causeway/analyze/engine.h"
#include "causeway/analyze/recent_explain.h"
#include "causeway/common/error.h"
#include "causeway/common/time.h"
#include "causeway/discover/processes.h"
#include "causeway/export/metrics_server.h"
#include "causeway/export/otlp.h"
#include "causeway/present/commands.h"
#include "causeway/present/live_view.h"

namespace causeway::present {
namespace {
// Stored in the session row: how this trace was taken.
std::string self_command_line() {
  std::ifstream f("/proc/self/cmdline");
  return discover::join_cmdline(std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>()));
}

// "64m", "1g", "500k" or plain bytes (k/m/g are powers of 1024).
int64_t parse_size_bytes(const std::string& text) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) digits++;
  const std::string unit = text.substr(digits);
  int shift = unit.empty() || unit == "b" ? 0
              : unit == "k" || unit == "K" ? 10
              : unit == "m" || unit == "M" ? 20
              : unit == "g" || unit == "G" ? 30
                                           : -1;
  if (digits == 0 || digits > 12 || shift < 0)
    throw UsageError("bad size '" + text + "': use e.g. 64m, 1g, 500k");
  const int64_t bytes = std::stoll(text.substr(0, digits)) << shift;
  if (bytes < (1 << 20)) throw UsageError("--max-db-size " + text + " is below the 1m minimum");
  return bytes;
}

std::set<Layer> parse_layers(const std::vector<std::string>& names) {
  std::set<Layer> out;
  for (const auto& n : names) {
    bool found = false;
    for (Layer l : {Layer::Runtime, Layer::Driver, Layer::Nccl, Layer::Hip, Layer::Verbs, Layer::Torch})
      if (layer_name(l) == n) out.insert(l), found = true;
    if (!found) throw UsageError("--layers: unknown layer '" + n + "' (runtime, driver, nccl, hip, verbs, torch)");
  }
  return out;
}

uint32_t parse_sampling(const std::string& text) {
  if (text == "off") return 0;
  char* end = nullptr;
  errno = 0;
  const unsigned long n = std::strtoul(text.c_str(), &end, 10);
  if (text.empty() || text[0] == '-' || *end || errno || n < 1 || n > 1000000000)
    throw UsageError("--launch-sampling: expected a number from 1 to 1000000000, or off (got '" + text + "')");
  return uint32_t(n);
}

// The flags as given, bound by CLI11; the callback turns them into a config.
struct TraceArgs {
  agent::AgentConfig c;
  std::vector<std::string> layers;
  std::string launch_sampling, duration, max_db_size, launch_min, offcpu_min, pystack_min, hang_after;
  std::string launch_duty = "auto";
  std::string prometheus;
  std::string explain_every = "5s";
  std::string otlp;
  std::string live = "auto", tier = "full", launch_layer = "auto";
};

// What is traced, for how long, and into which file.
void add_scope_options(CLI::App& sub, TraceArgs& a) {
  sub.add_option("-d,--duration", a.duration, "Stop after this long (30s, 5m); default: Ctrl-C");
  sub.add_option("--db", a.c.db_path,
                 "Trace file (default /var/lib/causeway/causeway.db as root, else "
                 "$XDG_DATA_HOME/causeway/causeway.db)");
  sub.add_option("--max-db-size", a.max_db_size,
                 "Keep the trace file near this size (64m, 1g): the oldest events are deleted "
                 "first, their count recorded in drops as 'retention'");
  sub.add_option("-p,--pid", a.c.pids, "Trace only these processes (repeatable); filtered in the kernel")
      ->allow_extra_args(false);
  sub.add_option("--comm", a.c.comms, "Trace only processes with this command name (repeatable)")
      ->allow_extra_args(false);
  sub.add_option("--cgroup", a.c.cgroup, "Trace only tasks in this cgroup v2 (path under /sys/fs/cgroup)");
  sub.add_option("--lib", a.c.libs, "Also probe this library file or folder (repeatable)")
      ->allow_extra_args(false);
  sub.add_option("--layers", a.layers,
                 "Probe only these layers: runtime, driver, nccl, hip, verbs, torch (PyTorch's caching allocator)")
      ->delimiter(',');
  sub.add_flag("!--no-host", a.c.host, "Do not trace host context (sched, block, tcp, reclaim)");
  sub.add_flag("!--no-stacks", a.c.stacks, "Do not capture Python/native stacks");
}

// How launches are probed, and what leaves the agent while it traces (metrics, the periodic explain).
void add_launch_and_export_options(CLI::App& sub, TraceArgs& a, const agent::AgentConfig& defaults) {
  sub.add_option("--launch-min", a.launch_min,
                 "Record launches only when at least this slow (exact counts are always kept)");
  sub.add_option("--launch-sampling", a.launch_sampling,
                 "Count every launch per (process, kernel) in the kernel, with a latency "
                 "histogram, and record as rows only one in N plus every launch >= 100us "
                 "(N, or off: every launch is a row; default " +
                     std::to_string(defaults.launch_sample_every) + ")");
  sub.add_option("--launch-duty", a.launch_duty,
                 "Share of the time kernel launches are probed: auto (default: windows every ~2 s sized to keep "
                 "their cost near 0.5% of the launching thread at the rate last measured; a 100 ms window "
                 "measures each new process), always (every "
                 "launch: for an incident capture), or a share such as 0.05. Every other call is traced "
                 "all the time");
  sub.add_option("--prometheus", a.prometheus,
                 "Serve Prometheus metrics at http://HOST:PORT/metrics while tracing (PORT alone: "
                 "127.0.0.1; another host must be named). Off by default: nothing listens");
  sub.add_option("--otlp", a.otlp,
                 "Send the same metrics every 10 s, and each causal chain as a log record, to an OpenTelemetry "
                 "collector over OTLP/HTTP protobuf: http://HOST:PORT[/path] (/v1/metrics and /v1/logs are "
                 "appended). Queued, retried, never slows tracing; drops are counted. Off by default");
  sub.add_option("--explain-every", a.explain_every,
                 "Explain the last 10 s this often while tracing, for the live view's per-thread time account "
                 "and chains and the metrics' chain series (default 5s, at the lowest CPU priority; off: never)");
}

// Thresholds, the ring's size, the live view, where launches are probed, the
// node's name and the sources of host context; then the command to trace and
// the benchmarks' probe tier.
void add_tuning_options(CLI::App& sub, TraceArgs& a, const agent::AgentConfig& defaults) {
  sub.add_option("--hang-after", a.hang_after,
                 "Report a CUDA/NCCL call still in flight after this long (a hung collective): a warning and a "
                 "stalled_calls row (default " + format_duration(defaults.hang_after_ns) + "; off: never)");
  sub.add_option("--offcpu-min", a.offcpu_min,
                 "Shortest off-CPU interval recorded (default " + format_duration(defaults.offcpu_min_ns) + ")");
  sub.add_option("--pystack-launch-min", a.pystack_min,
                 "Capture the Python stack of launches this slow (default " +
                     format_duration(defaults.pystack_launch_min_ns) + ")");
  sub.add_option("--ring-mb", a.c.ring_mb,
                 "Library-call ring buffer size in MiB (power of 2; default 8, 16 with --launch-sampling off)")
      ->check(CLI::Range(1, 1024));
  sub.add_option("--live", a.live, "Live view: auto (table on a terminal), table, lines, off")
      ->check(CLI::IsMember({"auto", "table", "lines", "off"}));
  sub.add_option("--launch-layer", a.launch_layer,
                 "Where launches are probed: driver (one trap per launch; names from the driver's "
                 "naming calls), runtime, both, or auto = driver when libcuda is found")
      ->check(CLI::IsMember({"auto", "driver", "runtime", "both"}));
  sub.add_option("--node-id", a.c.node_id, "Name of this node in merged traces (default: host name)");
  sub.add_option("--sysfs-root", a.c.sysfs_root, "Root of /sys for RDMA counters (tests)");
  sub.add_option("--runtime-root", a.c.runtime_root,
                 "Root under which the container runtimes keep their state (run/containerd, run/containers), "
                 "for pod names (default /; tests)");
  sub.add_option("--nvml-lib", a.c.nvml_library,
                 "NVML library sampled once a second for GPU utilisation, memory, clocks, throttling, "
                 "ECC and XIDs (default " + defaults.nvml_library + "; off: none)");
  sub.add_option("--cpu-sample-hz", a.c.cpu_sample_hz,
                 "On-CPU samples per second of traced Python threads, with their Python line: where host "
                 "time goes and which thread holds a lock (default " + std::to_string(defaults.cpu_sample_hz) +
                     "; 0: off)")
      ->check(CLI::Range(0, 999));
  sub.add_option("--kmsg", a.c.kmsg_path,
                 "Kernel log read for the NVIDIA driver's XID lines, which name the faulting process "
                 "(default " + defaults.kmsg_path + "; needs CAP_SYSLOG where dmesg_restrict=1; off: none)");
  sub.add_option("command", a.c.command, "Command to run and trace (after --)");
  sub.add_option("--probe-tier", a.tier,
                 "Benchmarks only: 'entry' attaches entry probes that only count; 'floor' an "
                 "entry+return pair that records a start time and one ring record (the floor a "
                 "traced call is measured against); 'full' is normal tracing")
      ->check(CLI::IsMember({"entry", "floor", "full"}));
}

// The flags into the agent's config; a bad value or combination is a UsageError.
agent::AgentConfig config_from(const TraceArgs& a) {
  agent::AgentConfig c = a.c;
  if (!a.layers.empty()) c.layers = parse_layers(a.layers);
  if (!a.duration.empty()) c.duration_ns = parse_duration_ns(a.duration);
  if (!a.max_db_size.empty()) c.max_db_bytes = parse_size_bytes(a.max_db_size);
  if (!a.launch_min.empty()) c.launch_min_ns = parse_duration_ns(a.launch_min);
  if (!a.launch_sampling.empty()) {
    c.launch_sample_every = parse_sampling(a.launch_sampling);
    if (c.launch_sample_every && c.launch_min_ns)
      throw UsageError("--launch-min and --launch-sampling cannot be combined: sampling keeps "
                       "every launch >= 100us already");
  } else if (c.launch_min_ns) {
    c.launch_sample_every = 0;  // --launch-min alone: its own filter, no aggregation
  }
  if (a.launch_duty == "always") {
    c.launch_duty = 1;
  } else if (a.launch_duty != "auto") {
    char* end = nullptr;
    c.launch_duty = std::strtod(a.launch_duty.c_str(), &end);
    if (end == a.launch_duty.c_str() || *end || !(c.launch_duty > 0 && c.launch_duty <= 1))
      throw UsageError("--launch-duty " + a.launch_duty + ": expected auto, always, or a share in (0, 1]");
  }
  if (!a.offcpu_min.empty()) c.offcpu_min_ns = parse_duration_ns(a.offcpu_min);
  if (a.hang_after == "off")
    c.hang_after_ns = 0;
  else if (!a.hang_after.empty())
    c.hang_after_ns = parse_duration_ns(a.hang_after);
  if (!a.pystack_min.empty()) c.pystack_launch_min_ns = parse_duration_ns(a.pystack_min);
  if ((c.ring_mb & (c.ring_mb - 1)) != 0) throw UsageError("--ring-mb must be a power of 2");
  c.tier = a.tier == "entry" ? agent::ProbeTier::Entry
           : a.tier == "floor" ? agent::ProbeTier::Floor
                               : agent::ProbeTier::Full;
  c.launch_layer = a.launch_layer == "driver"    ? agent::LaunchLayer::Driver
                   : a.launch_layer == "runtime" ? agent::LaunchLayer::Runtime
                   : a.launch_layer == "both"    ? agent::LaunchLayer::Both
                                                 : agent::LaunchLayer::Auto;
  return c;
}

// What limited the trace, as the flags that did: "--pid 1 --comm x".
std::string filters_of(const agent::AgentConfig& c) {
  std::string out;
  for (auto pid : c.pids) out += " --pid " + std::to_string(pid);
  for (const auto& comm : c.comms) out += " --comm " + comm;
  if (!c.cgroup.empty()) out += " --cgroup " + c.cgroup;
  if (!c.command.empty()) out += " --";
  for (const auto& arg : c.command) out += " " + arg;
  return out.empty() ? "no filter" : out.substr(1);
}

// The last lines of a trace: what it found first (explain over this run's
// time only: the default file keeps earlier runs) and what to run next; or,
// when no GPU library call was traced, that nothing matched.
void print_outcome(const agent::AgentConfig& c, const agent::TraceSummary& sum, int64_t started_ns) {
  if (sum.calls == 0) {
    std::printf("empty trace: no GPU library call was traced (%s): the filters matched no process that made one\n",
                filters_of(c).c_str());
    std::fflush(stdout);
    return;
  }
  std::string top;
  try {
    analyze::ExplainOptions o;
    o.from_ns = started_ns;
    o.top = 1;
    const auto e = analyze::explain_file(sum.db_path, o);
    if (e.chains.empty()) {
      top = "none: nothing was slow for a reason causeway can see";
    } else {
      const auto& ch = e.chains.front();
      const auto& s = ch.symptom;
      top = std::string(analyze::severity_name(ch.severity)) + " " + ch.root_cause;
      if (s.pid) top += " pid " + std::to_string(s.pid) + (s.comm.empty() ? "" : " " + s.comm);
      if (ch.frame) top += " at " + ch.frame->where();
    }
  } catch (const std::exception& ex) {
    top = std::string("not found: explain failed: ") + ex.what();
  }
  std::printf("top finding: %s\nnext: causeway explain --db %s\n", top.c_str(), sum.db_path.c_str());
  std::fflush(stdout);
}

// The trace, watched by the live view and the exporters asked for.
agent::TraceSummary run_trace(const TraceArgs& a) {
  agent::AgentConfig c = config_from(a);
  std::unique_ptr<analyze::RecentExplain> recent;
  if (a.explain_every != "off") {
    const int64_t every = parse_duration_ns(a.explain_every);
    if (every < kNsPerSec) throw UsageError("--explain-every " + a.explain_every + ": at least 1s, or off");
    recent = std::make_unique<analyze::RecentExplain>(every, 10 * kNsPerSec);
  }
  LiveView view(a.live == "table"   ? LiveMode::Table
                : a.live == "lines" ? LiveMode::Lines
                : a.live == "off"   ? LiveMode::Off
                                    : LiveMode::Auto,
                recent.get());
  // Observers in a chain: the OTLP exporter, then the metrics endpoint,
  // then the live view; each passes every call on.
  agent::Observer* top = &view;
  std::unique_ptr<exporters::MetricsServer> metrics;
  std::unique_ptr<exporters::OtlpExporter> otlp;
  if (!a.prometheus.empty()) {
    c.metrics = true;
    metrics = std::make_unique<exporters::MetricsServer>(a.prometheus, *top, recent.get());
    top = metrics.get();
    spdlog::info("serving Prometheus metrics on port {} (/metrics)", metrics->port());
  }
  if (!a.otlp.empty()) {
    c.metrics = true;
    exporters::OtlpResource resource{{"service.name", "causeway"}, {"service.version", CAUSEWAY_VERSION}};
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) == 0) resource.emplace_back("host.name", host);
    if (!c.node_id.empty()) resource.emplace_back("causeway.node_id", c.node_id);
    otlp = std::make_unique<exporters::OtlpExporter>(a.otlp, *top, recent.get(), std::move(resource));
    top = otlp.get();
  }
  const int64_t started_ns = wall_now_ns();
  agent::TraceSummary sum = agent::run(c, self_command_line(), *top);
  print_outcome(c, sum, started_ns);
  return sum;
}
}  // namespace

bool traces_a_command(int argc, const char* const* argv) {
  bool in_trace = false;
  for (int i = 1; i < argc; i++) {
    const std::string arg = argv[i];
    if (arg == "--") return in_trace && i + 1 < argc;
    if (arg == "trace") in_trace = true;
  }
  return false;
}

void add_trace_command(CLI::App& app, int& exit_status) {
  const agent::AgentConfig defaults;
  auto* sub = app.add_subcommand(
      "trace",
      "Trace CUDA/NCCL/HIP calls and their host context (off-CPU, I/O, TCP, reclaim) into a "
      "SQLite file, with a live per-call latency table. Needs root (or CAP_BPF+CAP_PERFMON).\n"
      "  causeway trace --duration 30s\n"
      "  causeway trace --pid 4242 --db run.db\n"
      "  causeway trace -- python train.py     (trace a command and its children)");
  auto a = std::make_shared<TraceArgs>();
  add_scope_options(*sub, *a);
  add_launch_and_export_options(*sub, *a, defaults);
  add_tuning_options(*sub, *a, defaults);
  // causeway's own failures with a command: kExitTracerFailure (main.cpp).
  sub->callback([a, &exit_status] {
    const agent::TraceSummary sum = run_trace(*a);
    // -1: the trace ended first and stopped the command: --duration says so
    // with 124, as timeout(1) does; a stop asked for by a signal is the clean
    // end it always was (0).
    if (!a->c.command.empty())
      exit_status = sum.command_exit >= 0 ? sum.command_exit : sum.stop_reason == "duration reached" ? 124 : 0;
  });
}

}  // namespace causeway::present
