// SPDX-License-Identifier: Apache-2.0
#include "causeway/agent/agent.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "causeway/attach/probes.h"
#include "causeway/attach/python_process.h"
#include "causeway/attach/trap_cost.h"
#include "causeway/common/error.h"
#include "causeway/common/time.h"
#include "causeway/consume/consumer.h"
#include "causeway/consume/ib_counters.h"
#include "causeway/consume/kmsg_xids.h"
#include "causeway/consume/nvml_sampler.h"
#include "causeway/model/launch_windows.h"
#include "causeway/model/stalled_calls.h"
#include "causeway/model/threads.h"
#include "calls_before.h"
#include "causeway/discover/cgroup_cpu.h"
#include "causeway/discover/cgroup_memory.h"
#include "causeway/discover/process_cpus.h"
#include "causeway/discover/libraries.h"
#include "causeway/discover/processes.h"
#include "causeway/store/read_only_trace.h"
#include "causeway/store/trace_writer.h"
#include "causeway/agent/launch_duty.h"
#include "traced_command.h"

namespace causeway::agent {
namespace {

std::atomic<int> g_stop_signal{0};
void on_stop_signal(int sig) { g_stop_signal = sig; }

// The library-call ring's default size: 8 MiB (16 where every launch is a
// record), and on a larger host at least 1 MiB for every 2 CPUs (to 64 MiB):
// every CPU can call at once, and the ring carries them through a drain that
// comes late (4 PyTorch ranks on 64 CPUs filled 8 MiB in under a second of
// start-up).
uint32_t default_ring_mb(bool launches_sampled) {
  uint32_t mb = launches_sampled ? 8u : 16u;
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  while (long(mb) * 2 < cpus && mb < 64) mb *= 2;
  return mb;
}

constexpr int64_t kDrainEvery = 50 * kNsPerMs;

std::string read_first_line(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
}

std::string host_name() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

uint64_t cgroup_id_of(const std::string& path) {
  std::string p = path;
  if (p.rfind("/sys/fs/cgroup", 0) != 0) p = "/sys/fs/cgroup/" + p;
  struct stat st;
  // cgroup v2: the cgroup id is the inode number of its directory.
  if (stat(p.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw UsageError("--cgroup " + path + ": no such cgroup v2 directory (" + p + ")");
  return st.st_ino;
}

// Checked before anything is loaded or written.
attach::ProbeConfig probe_config(const AgentConfig& c) {
  for (uint32_t pid : c.pids)
    if (kill(pid_t(pid), 0) != 0 && errno == ESRCH)
      throw UsageError("--pid " + std::to_string(pid) + ": no such process");
  attach::ProbeConfig p;
  p.filter_tgids = !c.pids.empty() || !c.comms.empty() || !c.command.empty();
  p.target_cgroup = c.cgroup.empty() ? 0 : cgroup_id_of(c.cgroup);
  p.comms = c.comms;
  p.launch_min_ns = uint64_t(c.launch_min_ns);
  p.launch_sample_every = c.launch_sample_every;
  p.offcpu_min_ns = uint64_t(c.offcpu_min_ns);
  p.cpu_sample_hz = c.tier == ProbeTier::Full ? c.cpu_sample_hz : 0;
  p.pystack_launch_min_ns = uint64_t(c.pystack_launch_min_ns);
  p.libcall_ring_bytes = (c.ring_mb ? c.ring_mb : default_ring_mb(c.launch_sample_every != 0)) << 20;
  p.host = c.host;
  p.stacks = c.stacks;
  p.entry_only = c.tier == ProbeTier::Entry;
  p.floor_pair = c.tier == ProbeTier::Floor;
  p.layers = c.layers;
  p.duty_cycled = c.launch_duty != 1.0 && c.tier == ProbeTier::Full;
  if (c.launch_duty != AgentConfig::kDutyAuto && !(c.launch_duty > 0 && c.launch_duty <= 1))
    throw UsageError("--launch-duty must be auto, always, or a share in (0, 1]");
  return p;
}

// SIGINT and SIGTERM stop the loop at its next turn; SIGPIPE is ignored.
void catch_stop_signals() {
  struct sigaction sa = {};
  sa.sa_handler = on_stop_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  g_stop_signal = 0;
}

// What kept the loop from draining, and for how long: the rings fill
// while it does anything else (a first look at a big process, a burst of
// new stacks to decode), and a fill is a drop.
struct LoopStall {
  int64_t at = monotonic_now_ns(), longest = 0;
  const char* longest_in = "";
  void step(const char* what) {
    const int64_t t = monotonic_now_ns(), took = t - at;
    if (took >= 100 * kNsPerMs) spdlog::debug("agent loop: {} took {} ms", what, took / kNsPerMs);
    if (took > longest) longest = took, longest_in = what;
    at = t;
  }
};

// The host context sampled beside the rings, when the trace starts, each
// second and when it stops: RDMA port counters, the GPUs, and the cgroups of
// the traced processes.
class ContextSamplers {
 public:
  using Traced = std::map<uint32_t, discover::ProcessCoverage>;  // the traced processes, by pid
  ContextSamplers(const AgentConfig& c, int64_t mono_to_wall);
  // `all`: every counter, cgroup and process, changed or not (the trace's
  // last sample).
  void sample(model::Batch& b, const Traced& traced, bool all);

 private:
  void sample_gpus(model::Batch& b);
  void sample_cgroups(model::Batch& b, const Traced& traced, bool all);
  void sample_memory_limits(model::Batch& b, const Traced& traced, bool all);

  const bool host_;
  const int64_t mono_to_wall_;
  // RDMA port counters: cumulative, sampled with the op counts (no HCA: no files).
  consume::IbCounterPoller ib_counters_;
  // The GPUs through NVML, once a second (none without a driver).
  consume::NvmlSampler nvml_;
  bool have_nvml_ = false;
  // GPU faults as the driver logs them, with the process they hit.
  consume::KmsgXidReader kmsg_;
  // The CPU limits of the traced processes' cgroups (host context): each
  // second where a limit is set (its counters say how often it throttled),
  // once otherwise.
  std::set<std::string> cgroups_told_;
  // Their memory limits (reclaim and refault counters, PSI) the same way,
  // and the CPUs each may use with its thread count when they change.
  std::set<std::string> memory_told_;
  // Where each process under a memory limit was, to read its cgroup once
  // more after it exits.
  std::map<uint32_t, discover::ProcCgroup> memory_where_;
  std::map<uint32_t, std::pair<int, int>> cpus_told_;
};

ContextSamplers::ContextSamplers(const AgentConfig& c, int64_t mono_to_wall)
    : host_(c.host), mono_to_wall_(mono_to_wall), ib_counters_(c.sysfs_root), nvml_(c.nvml_library),
      kmsg_(c.kmsg_path) {
  if (size_t n = ib_counters_.start()) spdlog::info("sampling {} RDMA port counters", n);
  have_nvml_ = c.nvml_library != "off" && nvml_.start();
  if (!have_nvml_ && c.nvml_library != "off") spdlog::info("no GPU samples: {}", nvml_.why());
  if (!kmsg_.start() && c.kmsg_path != "off")
    spdlog::warn("GPU faults will not be joined to their process: {}", kmsg_.why());
}

void ContextSamplers::sample(model::Batch& b, const Traced& traced, bool all) {
  ib_counters_.sample(b, wall_now_ns(), all);
  sample_gpus(b);
  sample_cgroups(b, traced, all);
}

void ContextSamplers::sample_gpus(model::Batch& b) {
  if (have_nvml_) nvml_.sample(b, wall_now_ns());
  kmsg_.read(b, mono_to_wall_);
}

void ContextSamplers::sample_cgroups(model::Batch& b, const Traced& traced, bool all) {
  if (!host_) return;  // host context, as the scheduler's records are
  std::set<std::string> now;
  for (const auto& [pid, c] : traced) {
    auto s = discover::read_cgroup_cpu(pid);
    if (!s || !now.insert(s->cgroup).second) continue;
    if (!s->quota_us && !all && !cgroups_told_.insert(s->cgroup).second) continue;
    s->ts_ns = wall_now_ns();
    b.add(std::move(*s));
  }
  sample_memory_limits(b, traced, all);
}

void ContextSamplers::sample_memory_limits(model::Batch& b, const Traced& traced, bool all) {
  std::set<std::string> now;
  for (const auto& [pid, c] : traced) {
    const auto where = discover::read_proc_cgroup(pid, "/proc", "memory");
    std::optional<model::CgroupMemorySample> s;
    if (where) {
      s = discover::read_cgroup_memory_in(*where);
      if (s && (s->limit_bytes || s->high_bytes)) memory_where_[pid] = *where;
    } else if (auto it = memory_where_.find(pid); it != memory_where_.end()) {
      // Gone since the last sample: its limited cgroup read once more, for
      // the counters over its last second (a job shorter than a couple of
      // seconds has no other reading after its steps).
      s = discover::read_cgroup_memory_in(it->second);
      memory_where_.erase(it);
    }
    if (s && now.insert(s->cgroup).second) {
      s->pid = pid;
      const bool limited = s->limit_bytes || s->high_bytes;
      if (limited || all || memory_told_.insert(s->cgroup).second) {
        s->ts_ns = wall_now_ns();
        b.add(std::move(*s));
      }
    }
    if (auto p = discover::read_process_cpus(pid)) {
      auto& told = cpus_told_[pid];
      if (all || told != std::pair(p->cpus, p->threads)) {
        told = {p->cpus, p->threads};
        p->ts_ns = wall_now_ns();
        b.add(std::move(*p));
      }
    }
  }
}

// One trace: the stages wired together and the loop that drives them.
class TraceAgent {
 public:
  TraceAgent(const AgentConfig& c, const std::string& command_line, Observer& observer)
      : cfg_(c), probe_cfg_(probe_config(c)), observer_(observer), probes_(probe_cfg_) {
    // Probes (above) fail fast, before any file is created, when BPF is not usable.
    for (const auto& name : c.comms) comms_.insert(name.substr(0, CW_COMM_LEN - 1));
    attach_discovered_libraries();
    open_store(command_line);
    wire_consumer();
  }

  TraceSummary run();

 private:
  // run()'s steps, in their order: the command prepared, the loop, the last
  // records, the summary.
  std::unique_ptr<TracedCommand> prepare_command();
  std::string trace_loop(TracedCommand* child, ContextSamplers& samplers);
  // Why the loop stops before this turn, if it does; a writer that failed
  // ends the trace with an error.
  std::optional<std::string> why_stop(TracedCommand* child, int64_t now, int64_t end) const;
  // The launch windows each turn: the first opens once the processes
  // already running were looked at; then a window due ends or begins.
  void turn_launch_duty(int64_t now);
  void start_launch_duty(int64_t at);
  bool duty_started_ = false;
  void every_second(int64_t now, ContextSamplers& samplers);
  void report_second(int64_t now);  // the observer's second
  // When the trace stops: the rings drained after the probes stop, with
  // what is still under way (threads asleep, calls in flight).
  model::Batch drain_at_stop();
  // The open window closed and the windows not yet posted added to `last`;
  // returns the share of the trace's time launches were probed.
  double finish_launch_duty(model::Batch& last);
  // The single-stepped entries that were called, most called first.
  std::vector<TraceSummary::SingleStepped> called_single_stepped();
  TraceSummary summarize(const std::vector<model::OpCount>& counts, TracedCommand* child,
                         const std::string& stop_reason, double probed);
  void attach_discovered_libraries();
  void attach_libraries(const std::vector<discover::LibraryFile>& libs);
  void attach_return_site(uint32_t pid, uint16_t op, uint64_t addr);
  void open_store(const std::string& command_line);
  void wire_consumer();
  void schedule_rescan(uint32_t pid, int64_t delay, int fast = 0);
  void trace_pid(uint32_t pid);
  void rescan_due_processes(int64_t now);
  void flush_drops(model::Batch& b);
  void find_stalled_calls(model::Batch& b, int64_t now, bool at_stop = false);
  model::Batch record_sleepers();
  // The kernel's per-op counters, read once where several readers need them.
  using OpStats = std::vector<std::pair<uint16_t, cw_op_stats>>;
  uint64_t duty_calls(const OpStats& stats) const;
  uint64_t duty_calls() const { return duty_calls(probes_.op_stats()); }
  void close_launch_window(std::optional<std::pair<int64_t, int64_t>> w);
  int64_t lost() const;
  std::vector<model::OpCount> op_counts() const;
  model::Batch take_batch();
  Progress progress(int64_t now) const;
  void close_store(const std::vector<model::OpCount>& counts);

  AgentConfig cfg_;
  attach::ProbeConfig probe_cfg_;
  Observer& observer_;
  attach::Probes probes_;
  std::set<std::string> comms_;
  std::set<std::pair<uint64_t, uint64_t>> attached_;  // library files by (device, inode)
  std::vector<std::string> probed_files_;
  int ops_attached_ = 0;
  std::string db_path_;
  int64_t mono_to_wall_ = 0;
  std::unique_ptr<store::AsyncTraceWriter> out_;
  std::unique_ptr<consume::EventConsumer> consumer_;
  consume::StackResolver* resolver_ = nullptr;
  // Processes whose maps are rescanned for newly loaded libraries (dlopen):
  // when the next rescan is due, and how many more come 50 ms apart (just
  // after an exec, while the loader maps libraries) before settling at 1 s.
  struct Rescan {
    int64_t due;
    int fast;
  };
  std::map<uint32_t, Rescan> rescan_due_;
  std::map<uint32_t, uint64_t> code_maps_;  // code_maps_signature at the last look
  // Processes offered to the Python walker (it reads ELF files: not again).
  std::set<uint32_t> python_checked_;
  std::vector<model::ProcessInfo> new_processes_;
  std::vector<model::ThreadName> new_threads_;
  int64_t trace_start_wall_ = 0;
  uint64_t last_drops_[CW_DROP_MAX] = {};
  int64_t start_ = 0;
  std::set<std::pair<uint32_t, uint64_t>> stalled_seen_;  // (tid, entry ktime) already reported
  // Calls in flight since before the trace, and the processes looked at for them.
  CallsBeforeTrace before_;
  std::set<uint32_t> looked_before_;
  std::set<uint32_t> announced_;  // processes whose ProcessInfo went out
  void process_seen(uint32_t pid);
  std::map<std::pair<uint32_t, uint16_t>, int64_t> in_flight_;  // (pid, op): the oldest call's age, for the gauge
  LaunchDuty duty_{cfg_.launch_duty, cfg_.launch_budget, cfg_.launch_trap_ns};
  std::vector<model::GpuSample> last_gpus_;  // the latest NVML sample of each GPU (metrics)
  // Traced processes for the metrics; an exited one stays kExitedKeepNs (its
  // last calls may still be in a ring), then goes with its counters.
  std::map<uint32_t, model::ProcessInfo> live_;
  std::map<uint32_t, int64_t> exited_at_;
  // Two minutes: a scraper at a 1-minute interval still sees a short job's
  // final counts.
  static constexpr int64_t kExitedKeepNs = 120 * kNsPerSec;
  void forget_exited(int64_t now);
  std::vector<model::LaunchWindow> launch_windows_;
  // The windows' probes going on and off, timed (the trace's summary).
  void toggle_duty_probes(bool on);
  // An adaptive window's cost beyond its traps: the kernel times the probes'
  // programs while it is open (launch_duty.h), from this reading on.
  int64_t window_prog_ns0_ = 0;
  int64_t window_prog_ns() const {
    return probes_.run_stats_on() ? probes_.call_programs_run_ns() - window_prog_ns0_ : 0;
  }
  double window_cost_max_ = 0;
  int64_t duty_toggles_ = 0, duty_links_max_ = 0, duty_toggle_ns_ = 0, duty_toggle_max_ns_ = 0;
  // Probed functions whose first instruction the kernel may single-step
  // (not a push, branch or one-byte nop): what their probes cost here is
  // measured once (attach/trap_cost.h), and the launch windows are sized
  // for it. Those found to single-step go in the summary.
  // Measured on a thread of its own (~0.5 s, most of it waiting for the
  // calibration probes to go) once the first launch window has run: its
  // uprobes take the kernel's uprobe locks, and at the trace's start they
  // held the first window back while a short job made its only launches
  // (TraceRuntime.DefaultSamplingCountsLaunchesPerKernel: 0 of 5 seen, CI).
  // Entries wait for it in unweighed_; without a window, it never runs.
  std::optional<attach::TrapCosts> trap_costs_;
  std::future<std::optional<attach::TrapCosts>> trap_costs_pending_;
  std::vector<attach::AttachResult::Entry> unweighed_;
  std::vector<TraceSummary::SingleStepped> single_stepped_;
  void weigh_entries(const std::vector<attach::AttachResult::Entry>& entries);
  void start_trap_costs();
  void take_trap_costs(bool wait);
  // What a single-step adds to each launch op probed in windows; the trap
  // pair of the launches a window saw, weighed by op (the launch functions a
  // job calls may begin with a push while others it never calls do not).
  std::map<uint16_t, int64_t> launch_extra_ns_;
  std::map<uint16_t, uint64_t> duty_calls_seen_;
  int64_t window_trap_ns(const OpStats& stats);
  // The open window's trap pair from its launches, once the costs are in
  // (`wait`: for the measurement still running).
  void weigh_open_window(bool wait, const OpStats& stats);
  // How each traced process is seen, from its latest rescan (the summary).
  std::map<uint32_t, discover::ProcessCoverage> coverage_;
  void note_coverage(uint32_t pid, const std::vector<discover::LibraryFile>& mapped);
};

void TraceAgent::note_coverage(uint32_t pid, const std::vector<discover::LibraryFile>& mapped) {
  auto c = discover::coverage_of(mapped);
  // Only the layers this trace probes.
  if (!probe_cfg_.layers.count(Layer::Runtime)) c.shared_runtimes = 0, c.embedded.clear();
  c.driver &= probe_cfg_.layers.count(Layer::Driver) > 0;
  c.nccl &= probe_cfg_.layers.count(Layer::Nccl) > 0;
  c.hip &= probe_cfg_.layers.count(Layer::Hip) > 0;
  c.verbs &= probe_cfg_.layers.count(Layer::Verbs) > 0;
  c.torch_allocator &= probe_cfg_.layers.count(Layer::Torch) > 0;
  if (c.empty()) return;
  // A later scan that sees less (the process is exiting) keeps what was seen.
  auto& known = coverage_[pid];
  if (c.shared_runtimes < known.shared_runtimes) c.shared_runtimes = known.shared_runtimes;
  if (c.embedded.empty()) c.embedded = known.embedded;
  c.driver |= known.driver, c.nccl |= known.nccl, c.hip |= known.hip, c.verbs |= known.verbs;
  c.torch_allocator |= known.torch_allocator;
  known = std::move(c);
}

// Calls of the duty-cycled ops so far (the kernel's exact counters).
uint64_t TraceAgent::duty_calls(const OpStats& stats) const {
  uint64_t n = 0;
  for (const auto& [op, s] : stats)
    if (const OpSpec* spec = find_op(op); spec && (spec->cookie_flags & CW_COOKIE_DUTY)) n += s.calls;
  return n;
}

void TraceAgent::forget_exited(int64_t now) {
  for (auto it = exited_at_.begin(); it != exited_at_.end();) {
    if (now - it->second < kExitedKeepNs) {
      ++it;
      continue;
    }
    live_.erase(it->first);
    consumer_->stats().processes.erase(it->first);
    it = exited_at_.erase(it);
  }
}

void TraceAgent::toggle_duty_probes(bool on) {
  // Held only while an adaptive window is open: the statistics cost every
  // BPF program on the host two clock reads a run.
  if (on && cfg_.launch_duty < 0 && probes_.set_run_stats(true)) window_prog_ns0_ = probes_.call_programs_run_ns();
  const int64_t t0 = monotonic_now_ns();
  const size_t before = probes_.duty_link_count();
  probes_.set_duty_probes(on);
  if (!on) probes_.set_run_stats(false);
  const int64_t ns = monotonic_now_ns() - t0;
  const int64_t links = int64_t(std::max(before, probes_.duty_link_count()));
  duty_toggles_++;
  duty_links_max_ = std::max(duty_links_max_, links);
  duty_toggle_ns_ += ns;
  duty_toggle_max_ns_ = std::max(duty_toggle_max_ns_, ns);
  spdlog::debug("launch probes {}: {} links in {} us", on ? "attached" : "detached", links, ns / 1000);
}

void TraceAgent::close_launch_window(std::optional<std::pair<int64_t, int64_t>> w) {
  if (!w) return;
  // What its launches cost the launching thread (explain takes it out of
  // their launching time): set from this window's launches just before.
  launch_windows_.push_back({w->first + mono_to_wall_, w->second + mono_to_wall_, duty_.trap_ns()});
}

void TraceAgent::attach_libraries(const std::vector<discover::LibraryFile>& libs) {
  for (const auto& lib : libs) {
    if (!attached_.insert({lib.id.dev, lib.id.ino}).second) continue;
    auto r = probes_.attach_library(lib.path, lib.kind);
    ops_attached_ += r.ops_attached;
    weigh_entries(r.entries);
    // Frames in a probed library stay nameable after their process exits.
    if (resolver_) resolver_->remember_file(lib.path);
    else probed_files_.push_back(lib.path);
    spdlog::info("probing {} ({} functions)", lib.path, r.ops_attached);
  }
}

void TraceAgent::weigh_entries(const std::vector<attach::AttachResult::Entry>& entries) {
  using discover::EntryInsn;
  for (const auto& e : entries)
    if (e.insn != EntryInsn::Push && e.insn != EntryInsn::Branch && e.insn != EntryInsn::Nop) unweighed_.push_back(e);
  take_trap_costs(false);
}

void TraceAgent::start_trap_costs() {
  if (unweighed_.empty() || trap_costs_ || trap_costs_pending_.valid()) return;
  const int64_t assumed = cfg_.launch_trap_ns;
  trap_costs_pending_ = std::async(std::launch::async, [assumed] {
    // Behind the agent's own work and the traced job's on a small box.
    setpriority(PRIO_PROCESS, unsigned(gettid()), 19);
    std::string err;
    auto costs = attach::measure_trap_costs(&err);
    if (!costs)
      spdlog::warn("what a probe costs here was not measured ({}): launch windows assume {} ns a launch", err,
                   assumed);
    return costs;
  });
}

void TraceAgent::take_trap_costs(bool wait) {
  using discover::EntryInsn;
  if (trap_costs_pending_.valid() &&
      (wait || trap_costs_pending_.wait_for(std::chrono::seconds(0)) == std::future_status::ready)) {
    trap_costs_ = trap_costs_pending_.get();
    if (!trap_costs_) unweighed_.clear();  // not measured: nothing to weigh them with, ever
  }
  if (!trap_costs_) return;
  std::vector<attach::AttachResult::Entry> entries;
  entries.swap(unweighed_);
  for (const auto& e : entries) {
    if (!trap_costs_->single_steps(e.insn)) continue;
    const int64_t extra = std::max<int64_t>(0, int64_t(trap_costs_->of(e.insn) - trap_costs_->of(EntryInsn::Push)));
    auto known = std::find_if(single_stepped_.begin(), single_stepped_.end(), [&](const auto& x) { return x.op == e.op; });
    if (known == single_stepped_.end()) single_stepped_.push_back({e.op, e.symbol, extra, 0});
    else known->extra_ns = std::max(known->extra_ns, extra);
    if (e.duty) launch_extra_ns_[e.op] = std::max(launch_extra_ns_[e.op], extra);
  }
}

int64_t TraceAgent::window_trap_ns(const OpStats& stats) {
  uint64_t calls = 0;
  double extra = 0;
  for (const auto& [op, s] : stats) {
    const OpSpec* spec = find_op(op);
    if (!spec || !(spec->cookie_flags & CW_COOKIE_DUTY)) continue;
    uint64_t& seen = duty_calls_seen_[op];
    const uint64_t now_calls = s.calls;
    const uint64_t n = now_calls - std::min(seen, now_calls);
    seen = now_calls;
    calls += n;
    if (auto it = launch_extra_ns_.find(op); it != launch_extra_ns_.end()) extra += double(n) * double(it->second);
  }
  // A window without launches keeps what the last one measured.
  return calls ? cfg_.launch_trap_ns + int64_t(extra / double(calls)) : duty_.trap_ns();
}

void TraceAgent::weigh_open_window(bool wait, const OpStats& stats) {
  take_trap_costs(wait);
  if (launch_extra_ns_.empty() || !duty_.on()) return;
  const int64_t trap = window_trap_ns(stats);
  if (trap != duty_.trap_ns()) spdlog::debug("launch window: {} ns a launch (single-stepped entries)", trap);
  duty_.set_trap_ns(trap);
}

void TraceAgent::attach_discovered_libraries() {
  discover::DiscoverOptions dopts;
  dopts.extra_paths = cfg_.libs;
  auto libs = discover::discover_libraries(dopts);
  // A GPU host: the NVIDIA kernel driver is loaded and a libcuda is probed.
  // (A libcuda alone, e.g. a stand-in mapped by some process, is not enough.)
  struct stat nv;
  const bool have_driver =
      probe_cfg_.layers.count(Layer::Driver) && stat("/proc/driver/nvidia/version", &nv) == 0 &&
      std::any_of(libs.begin(), libs.end(), [](const auto& l) { return l.kind == LibraryKind::Cuda; });
  const LaunchLayer layer = cfg_.launch_layer;
  if (layer == LaunchLayer::Driver || layer == LaunchLayer::Auto)
    probes_.set_runtime_launches(!(have_driver || layer == LaunchLayer::Driver));
  if (layer == LaunchLayer::Driver && !have_driver)
    spdlog::warn("--launch-layer driver: no libcuda found; runtime launches are not traced");
  spdlog::info("launches traced at the {} layer",
               have_driver && layer != LaunchLayer::Both && layer != LaunchLayer::Runtime ? "driver"
                                                                                         : "runtime");
  attach_libraries(libs);
}

void TraceAgent::open_store(const std::string& command_line) {
  db_path_ = cfg_.db_path.empty() ? store::default_db_path(true) : cfg_.db_path;
  auto writer = std::make_unique<store::TraceWriter>(db_path_);
  mono_to_wall_ = wall_now_ns() - monotonic_now_ns();
  model::SessionInfo session;
  session.host = host_name();
  session.node_id = cfg_.node_id.empty() ? session.host : cfg_.node_id;
  session.boot_id = read_first_line("/proc/sys/kernel/random/boot_id");
  session.mono_to_wall_ns = mono_to_wall_;
  session.version = CAUSEWAY_VERSION;
  session.command_line = command_line;
  session.start_ts_ns = wall_now_ns();
  trace_start_wall_ = session.start_ts_ns;
  session.cpus = int(sysconf(_SC_NPROCESSORS_ONLN));
  const int64_t session_id = writer->begin_session(session);
  out_ = std::make_unique<store::AsyncTraceWriter>(std::move(writer), cfg_.max_db_bytes);

  consumer_ = std::make_unique<consume::EventConsumer>(probes_.libcall_ring_fd(), probes_.host_ring_fd(),
                                                       mono_to_wall_);
  consume::StackOptions sopts;
  sopts.python = sopts.native = cfg_.stacks;
  sopts.first_stack_id = (session_id << 32) + 1;  // unique across the sessions of one file
  sopts.resend = [this](bool code, const cw_seen_key& key) { probes_.forget_seen(code, key); };
  consumer_->set_stack_resolver(consume::make_stack_resolver(sopts));
  resolver_ = consumer_->stacks();
  if (resolver_)
    for (const auto& f : probed_files_) resolver_->remember_file(f);
}

void TraceAgent::schedule_rescan(uint32_t pid, int64_t delay, int fast) {
  const int64_t due = monotonic_now_ns() + delay;
  auto [it, fresh] = rescan_due_.emplace(pid, Rescan{due, fast});
  if (!fresh) {
    it->second.due = std::min(it->second.due, due);
    it->second.fast = std::max(it->second.fast, fast);
  }
}

void TraceAgent::trace_pid(uint32_t pid) {
  probes_.trace_tgid(pid);
  schedule_rescan(pid, 0);
}

// A process first seen (its first record, or a call found in flight in it
// before the trace: a hung job sends none): its identity goes out once.
void TraceAgent::process_seen(uint32_t pid) {
  if (!announced_.insert(pid).second) return;
  // A new job: its launches seen whole for a while (its first steps).
  // (The kernel's counters are read only when the probes go on now.)
  if (probe_cfg_.duty_cycled && duty_.new_process(monotonic_now_ns(), duty_.on() ? 0 : duty_calls()))
    toggle_duty_probes(true);
  if (auto info = discover::read_process_info(pid, "/proc", cfg_.runtime_root)) {
    live_[pid] = *info;
    const bool older = info->start_ts_ns && *info->start_ts_ns < trace_start_wall_ - kNsPerSec;
    new_processes_.push_back(std::move(*info));
    // A job already running when the trace began named its threads long
    // before (pt_autograd_0, its loader's): their names as they are now.
    // (A process started since has its threads' creations and renames.)
    if (older)
      for (auto& t : discover::thread_names(pid, "/proc")) {
        t.ts_ns = wall_now_ns();
        new_threads_.push_back(std::move(t));
      }
  } else {
    new_processes_.push_back(model::ProcessInfo{.pid = pid});
    // Gone before its records were drained (a short job): its series still
    // show for a while, under the name the kernel gave.
    const auto* id = consumer_->identity(pid);
    live_[pid] = model::ProcessInfo{.pid = pid, .comm = id ? id->comm : ""};
    exited_at_[pid] = monotonic_now_ns();
  }
}

void TraceAgent::wire_consumer() {
  if (cfg_.launch_sample_every)
    consumer_->set_launch_source({[this] { return probes_.launch_aggregates(); },
                                  [this](const std::vector<cw_launch_key>& keys) {
                                    probes_.forget_launch_keys(keys);
                                  }});
  consumer_->count_per_process(cfg_.metrics);
  consume::ConsumerHooks hooks;
  hooks.on_new_process = [this](uint32_t pid) {
    process_seen(pid);
    schedule_rescan(pid, 0);
  };
  hooks.on_exec = [this](uint32_t pid, const std::string&, const std::string& comm) {
    if (!comms_.empty() && comms_.count(comm)) trace_pid(pid);
    python_checked_.erase(pid);  // a new image: maybe a different interpreter, or none
    code_maps_.erase(pid);
    // Now (the executable: a static Python's runtime), and again once the
    // dynamic loader has mapped the DT_NEEDED libraries.
    if (!probe_cfg_.filter_tgids || rescan_due_.count(pid)) schedule_rescan(pid, 0, 2);
  };
  hooks.on_fork = [this](uint32_t child, uint32_t) { schedule_rescan(child, 0); };
  hooks.on_return_site = [this](uint32_t pid, uint16_t op, uint64_t addr) { attach_return_site(pid, op, addr); };
  hooks.on_exit = [this](uint32_t pid) {
    announced_.erase(pid);  // the pid, reused, is another process
    if (live_.count(pid)) exited_at_[pid] = monotonic_now_ns();
    rescan_due_.erase(pid);
    code_maps_.erase(pid);
    if (python_checked_.erase(pid)) attach::unregister_python_process(probes_.py_procs_fd(), pid);
    if (probe_cfg_.filter_tgids) probes_.untrace_tgid(pid);
    probes_.forget_collective_numbers(pid);
  };
  consumer_->set_hooks(hooks);

  for (uint32_t pid : cfg_.pids) trace_pid(pid);
  if (!comms_.empty()) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
      const std::string name = entry.path().filename();
      if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
      if (comms_.count(read_first_line(entry.path() / "comm"))) trace_pid(uint32_t(std::stoul(name)));
    }
  }
}

void TraceAgent::attach_return_site(uint32_t pid, uint16_t op, uint64_t addr) {
  const OpSpec* spec = find_op(op);
  if (!spec) return;
  for (const auto& r : discover::read_proc_maps(pid)) {
    if (addr < r.start || addr >= r.end) continue;
    bool canonical = true;
    const std::string path =
        r.executable() && !r.path.empty() && r.path[0] == '/' ? discover::openable_mapped_path("/proc", pid, r, &canonical)
                                                              : std::string();
    if (path.empty()) {
      spdlog::debug("pid {}: return site {:#x} of {} is in no file mapped as code", pid, addr, spec->name);
      return;
    }
    if (probes_.attach_return_site(path, addr - r.start + r.offset, op | spec->cookie_flags))
      probes_.mark_return_site(pid, addr);
    return;
  }
}

void TraceAgent::rescan_due_processes(int64_t now) {
  std::vector<uint32_t> due;
  for (const auto& [pid, r] : rescan_due_)
    if (r.due <= now) due.push_back(pid);
  int64_t drained_at = monotonic_now_ns();
  for (uint32_t pid : due) {
    // The rings fill while this looks (4 PyTorch ranks and their loader
    // workers: 0.3-2 s a round): drained between processes. A drain may
    // end a process (its exit), so each is looked up again.
    if (monotonic_now_ns() - drained_at >= 20 * kNsPerMs) {
      consumer_->drain();
      drained_at = monotonic_now_ns();
    }
    auto it = rescan_due_.find(pid);
    if (it == rescan_due_.end()) continue;
    Rescan& r = it->second;
    // Nothing new mapped as code since the last look: only the reschedule.
    const uint64_t sig = discover::code_maps_signature(pid);
    uint64_t& last_sig = code_maps_[pid];
    const bool same = sig != 0 && sig == last_sig && (!cfg_.stacks || python_checked_.count(pid));
    last_sig = sig;
    if (same) {
      r.due = now + (r.fast > 0 ? 50 * kNsPerMs : kNsPerSec);
      if (r.fast > 0) r.fast--;
      continue;
    }
    const auto mapped = discover::libraries_mapped_by(pid);
    attach_libraries(mapped);
    note_coverage(pid, mapped);
    // Its files, while it lives: native frames stay nameable after it exits.
    if (resolver_) resolver_->remember_process(pid);
    // Tell the Python walker, and the resolver the same runtime (it decodes
    // frames after the process is gone). A shared-library Python
    // (libpython3.X.so) is mapped by the loader after exec: until the fast
    // rescans after an exec are over, a miss is tried again.
    std::optional<discover::PythonRuntime> rt;
    if (cfg_.stacks && !python_checked_.count(pid)) {
      rt = attach::register_python_process(probes_.py_procs_fd(), pid);
      if (rt && resolver_) resolver_->add_python_process(*rt);
      if (rt || r.fast == 0) python_checked_.insert(pid);
    }
    // A process that began before the trace: calls it was already inside
    // (a job traced after it started hanging), once, with its probes on.
    if (!mapped.empty() && looked_before_.insert(pid).second) {
      auto info = discover::read_process_info(pid);
      if (info && info->start_ts_ns && *info->start_ts_ns < trace_start_wall_ - kNsPerSec) {
        if (!rt && cfg_.stacks) rt = discover::find_python_runtime(pid);
        model::Batch b;
        if (before_.scan(pid, rt ? &*rt : nullptr, cfg_.stacks ? resolver_ : nullptr, b, monotonic_now_ns()))
          process_seen(pid);
        out_->post(std::move(b));
      }
    }
    // Traced processes keep being rescanned (late dlopen), once a second.
    r.due = now + (r.fast > 0 ? 50 * kNsPerMs : kNsPerSec);
    if (r.fast > 0) r.fast--;
  }
}

void TraceAgent::flush_drops(model::Batch& b) {
  const int64_t now = wall_now_ns();
  for (int s = 0; s < CW_DROP_MAX; s++) {
    const uint64_t total = probes_.drops(cw_drop_source(s));
    if (total <= last_drops_[s]) continue;
    b.add(model::Drop{now, std::string(model::kDropSourceNames[s]), int64_t(total - last_drops_[s])});
    last_drops_[s] = total;
  }
}

// Lost records; rows shed under overload are counted apart (planned, their
// calls stay counted), and so are the first calls through a return site not
// yet probed (no ring buffer fills up: they say what memory misses).
int64_t TraceAgent::lost() const {
  uint64_t t = 0;
  for (int s = 0; s < CW_DROP_MAX; s++)
    if (s != CW_DROP_SHED && s != CW_DROP_RETSITE) t += last_drops_[s];
  return int64_t(t);
}

std::vector<model::OpCount> TraceAgent::op_counts() const {
  std::vector<model::OpCount> counts;
  for (const auto& [op, s] : probes_.op_stats())
    counts.push_back({op, int64_t(s.calls), int64_t(s.errors), int64_t(s.total_ns), int64_t(s.nested),
                      int64_t(s.dropped), int64_t(s.shed)});
  return counts;
}

model::Batch TraceAgent::take_batch() {
  model::Batch b = consumer_->take_batch();
  for (auto& p : new_processes_) b.add(std::move(p));
  new_processes_.clear();
  for (auto& t : new_threads_) b.add(std::move(t));
  new_threads_.clear();
  return b;
}

Progress TraceAgent::progress(int64_t now) const {
  return Progress{consumer_->stats(), lost(), int64_t(last_drops_[CW_DROP_SHED]), out_->rows_written(),
                  now - start_};
}

// Calls in flight: once a second, a row and a warning for each call judged
// hung (common/hang.h: 1000 times its baseline and 5 s, or --hang-after),
// once; when the trace stops, a row for every call still in flight, hung or
// not (at_stop), so that a hang shorter than the rule's threshold when the
// trace ends is still on record. The gauge of the oldest call in flight per
// process and op (for the metrics) is refreshed with them.
void TraceAgent::find_stalled_calls(model::Batch& b, int64_t now, bool at_stop) {
  if (!at_stop && cfg_.hang_after_ns <= 0) return;
  in_flight_.clear();
  // A call younger than a second is neither hung nor worth a gauge.
  const int64_t youngest = at_stop ? 0 : std::min<int64_t>(kNsPerSec, cfg_.hang_after_ns);
  if (now - start_ < youngest) return;
  const auto& stats = consumer_->stats();
  // A call's baseline: its op's p50 so far, else its op class's.
  auto baseline = [&](uint16_t op_id) -> std::optional<int64_t> {
    if (auto it = stats.ops.find(op_id); it != stats.ops.end() && it->second.count() > 0) return it->second.percentile(50);
    const OpSpec* op = find_op(op_id);
    consume::LatencyHistogram cls;
    for (const auto& [id, h] : stats.ops)
      if (const OpSpec* o = find_op(id); o && op && o->cls == op->cls) cls.merge(h);
    return cls.count() > 0 ? std::optional<int64_t>(cls.percentile(50)) : std::nullopt;
  };
  for (const auto& c : probes_.calls_in_flight(uint64_t(now - youngest))) {
    if (c.depth != 0) continue;  // the outermost traced call of the thread is the one to name
    const uint16_t op_id = uint16_t(c.frame.cookie & CW_COOKIE_OP_MASK);
    const OpSpec* op = find_op(op_id);
    if (!op || op->cls == OpClass::Verbs) continue;  // ibv_get_async_event blocks by design
    const int64_t waited = now - int64_t(c.frame.ts);
    const bool hung = cfg_.hang_after_ns > 0 && judged_hung(waited, baseline(op_id), cfg_.hang_after_ns);
    // The thread's process; a thread that died mid-call left a stale frame.
    uint32_t pid = 0;
    std::ifstream status("/proc/" + std::to_string(c.tid) + "/status");
    for (std::string line; std::getline(status, line);)
      if (line.rfind("Tgid:", 0) == 0) pid = uint32_t(std::strtoul(line.c_str() + 5, nullptr, 10));
    if (!pid) continue;
    auto& oldest = in_flight_[{pid, op_id}];
    oldest = std::max(oldest, waited);
    if (!hung && !at_stop) continue;
    // Once while tracing; and again when the trace stops, with its age then.
    if (!stalled_seen_.insert({c.tid, c.frame.ts}).second && !at_stop) continue;
    model::StalledCall row;
    row.ts_ns = int64_t(c.frame.ts) + mono_to_wall_;
    row.pid = pid;
    row.tid = c.tid;
    row.op_id = op_id;
    row.waited_ns = waited;
    row.seen_ts_ns = now + mono_to_wall_;
    row.at_stop = at_stop;
    if ((c.frame.cookie & CW_COOKIE_SEQ_MASK) && c.frame.aux) row.seq = int64_t(c.frame.aux - 1);
    if (resolver_ && (c.frame.flags & CW_CALL_HAS_PYSTACK) && c.frame.stack_hash) {
      cw_call_event e{};
      e.hdr.pid = pid;
      e.hdr.tid = c.tid;
      e.flags = c.frame.flags;
      e.stack_hash = c.frame.stack_hash;
      row.stack_id = resolver_->stack_for_call(e, b);
    }
    if (hung && !at_stop)
      spdlog::warn("pid {} thread {}: {} has not returned after {:.0f} s{}", pid, c.tid, op->name, double(waited) / 1e9,
                   op->layer == Layer::Nccl || op->cls == OpClass::Sync
                       ? " (a hung collective or a GPU that stopped: `causeway explain` names the ranks)"
                       : "");
    b.add(std::move(row));
  }
  // Calls in flight since before the trace (calls_before.h), while they
  // stay: judged by the same rule, from the latest they can have begun.
  if (before_.calls().empty()) return;
  before_.recheck();
  for (const auto& c : before_.calls()) {
    const OpSpec* op = find_op(c.op_id);
    if (!op) continue;
    const int64_t waited = now - c.entered_ns;
    auto& oldest = in_flight_[{c.pid, c.op_id}];
    oldest = std::max(oldest, waited);
    const bool hung = cfg_.hang_after_ns > 0 && judged_hung(waited, baseline(c.op_id), cfg_.hang_after_ns);
    if (!hung && !at_stop) continue;
    if (!stalled_seen_.insert({c.tid, uint64_t(c.entered_ns)}).second && !at_stop) continue;
    model::StalledCall row;
    row.ts_ns = c.entered_ns + mono_to_wall_;
    row.pid = c.pid;
    row.tid = c.tid;
    row.op_id = c.op_id;
    row.waited_ns = waited;
    row.seen_ts_ns = now + mono_to_wall_;
    row.stack_id = c.stack_id;
    row.at_stop = at_stop;
    row.entered_before = true;
    if (hung && !at_stop)
      spdlog::warn("pid {} thread {}: {} has not returned after {:.0f} s (in it since before the trace began)", c.pid,
                   c.tid, op->name, double(waited) / 1e9);
    b.add(std::move(row));
  }
}

// When the trace stops: every traced thread off the CPU for a second or
// more, as the off-CPU record its switch back would give, with the Python
// line it went to sleep at (taken at the switch, else read now from its
// memory: the walk at the switch is rate-limited per thread). The stack
// rows go in the returned batch.
model::Batch TraceAgent::record_sleepers() {
  model::Batch b;
  std::map<uint32_t, std::optional<discover::PythonRuntime>> runtimes;
  std::map<uint32_t, std::unique_ptr<consume::python::ProcessMemory>> memory;
  for (auto e : probes_.offcpu_in_progress(uint64_t(monotonic_now_ns()), uint64_t(kNsPerSec))) {
    // No stack at the switch, or one whose record was lost: read it now.
    if (cfg_.stacks && resolver_ && (!e.stack_hash || !resolver_->stack_for(e.hdr.pid, e.stack_hash))) {
      auto [it, fresh] = runtimes.try_emplace(e.hdr.pid);
      if (fresh) it->second = discover::find_python_runtime(e.hdr.pid);
      if (it->second) e.stack_hash = python_stack_now(e.hdr.pid, e.hdr.tid, *it->second, *resolver_, b, memory[e.hdr.pid]);
    }
    consumer_->handle(&e, sizeof e);
  }
  return b;
}

void TraceAgent::close_store(const std::vector<model::OpCount>& counts) {
  try {
    out_->close(wall_now_ns(), counts);
  } catch (const Error& e) {
    // Same one line as a failure mid-run (e.g. the disk filled while the
    // last batches were written).
    throw Error("writing " + db_path_ + " failed: " + (out_->failed() ? out_->error() : e.what()) +
                " (events up to the last commit are kept)");
  }
}

// The command to trace (--), forked stopped: it is in the traced set, and a
// runtime linked into it probed, before its first instruction runs.
std::unique_ptr<TracedCommand> TraceAgent::prepare_command() {
  if (cfg_.command.empty()) return nullptr;
  auto child = std::make_unique<TracedCommand>(cfg_.command);
  // Its exec event (which wakes the consumer) triggers the first rescan;
  // this one is the fallback without host probes.
  probes_.trace_tgid(uint32_t(child->pid()));
  schedule_rescan(uint32_t(child->pid()), kNsPerSec);
  // A runtime linked into the command itself is probed before it runs:
  // its first call comes before any rescan could find it.
  if (auto exe = child->executable(); !exe.empty() && probe_cfg_.layers.count(Layer::Runtime))
    if (auto id = discover::file_id(exe); id && discover::embeds_cuda_runtime(exe)) {
      const std::vector<discover::LibraryFile> own = {
          discover::LibraryFile{exe, LibraryKind::Cudart, *id, {"command"}, {}, {exe}, true}};
      attach_libraries(own);
      note_coverage(uint32_t(child->pid()), own);
    }
  return child;
}

void TraceAgent::start_launch_duty(int64_t at) {
  duty_started_ = true;
  duty_.start(at, duty_calls(), start_);
  toggle_duty_probes(true);
}

std::optional<std::string> TraceAgent::why_stop(TracedCommand* child, int64_t now, int64_t end) const {
  if (g_stop_signal) return g_stop_signal == SIGINT ? "interrupted" : "terminated";
  if (now >= end) return "duration reached";
  if (child && child->poll_exit()) return "command exited with status " + std::to_string(child->exit_code());
  if (out_->failed())
    throw Error("writing " + db_path_ + " failed: " + out_->error() + " (events up to the last commit are kept)");
  return std::nullopt;
}

void TraceAgent::turn_launch_duty(int64_t now) {
  if (!duty_started_) {
    // The first launch window: now that the processes already running
    // have been looked at, so that it lasts as long as planned.
    start_launch_duty(now);
    return;
  }
  if (!duty_.due(now)) return;
  // A single-stepped launch costs more than the budget's pair: the
  // next window is sized for what this one's launches cost.
  start_trap_costs();
  const auto stats = probes_.op_stats();
  weigh_open_window(false, stats);
  auto closed = duty_.transition(now, duty_calls(stats), window_prog_ns());
  window_cost_max_ = std::max(window_cost_max_, duty_.last_cost());
  if (duty_.on() != probes_.duty_probes_on()) {
    toggle_duty_probes(duty_.on());
    if (!duty_.on()) {
      // The window ended as detaching began (the probes' entries do
      // nothing from then on; the links take a grace period to go):
      // the launches counted in it go out stamped inside it.
      if (closed) closed->second = probes_.duty_off_at();
      consumer_->flush_launch_aggregates(closed ? closed->second + mono_to_wall_ : wall_now_ns());
    }
    spdlog::debug("launch probes {} (duty {:.4f}; the last window cost {:.2f}% of its time, {:.2f}% in traps)",
                  duty_.on() ? "attached" : "detached", duty_.last_duty(), 100 * duty_.last_cost(),
                  100 * duty_.last_trap_cost());
  }
  close_launch_window(closed);
}

// Once a second: the kernel's launch counters and drop counters, the RDMA
// counters, the GPUs and cgroups, calls in flight, and the observer.
void TraceAgent::every_second(int64_t now, ContextSamplers& samplers) {
  consumer_->flush_launch_aggregates(wall_now_ns());
  consumer_->flush_cpu_samples(wall_now_ns());
  model::Batch b = take_batch();
  flush_drops(b);
  samplers.sample(b, coverage_, false);
  if (!b.of<model::GpuSample>().empty()) last_gpus_ = b.of<model::GpuSample>();
  find_stalled_calls(b, now);
  for (auto& w : launch_windows_) b.add(std::move(w));
  launch_windows_.clear();
  out_->post(std::move(b));
  report_second(now);
  consumer_->stats().reset_interval();
}

void TraceAgent::report_second(int64_t now) {
  Progress p = progress(now);
  // The kernel's counters and the process list only for a metrics observer.
  const auto counts = cfg_.metrics ? op_counts() : std::vector<model::OpCount>{};
  if (cfg_.metrics) p.op_counts = &counts;
  p.drops_by_source = last_drops_;
  p.gpus = &last_gpus_;
  p.launch_probed_share = probe_cfg_.duty_cycled ? duty_.probed_share(now) : 1.0;
  p.in_flight = &in_flight_;
  forget_exited(now);
  if (cfg_.metrics) p.processes = &live_;
  observer_.every_second(p);
}

// The event loop, until a signal, the duration, the command's exit or a
// failed writer: each turn drains the rings, looks at the processes due,
// turns the launch windows, does the second's work or posts the batch, and
// sleeps until the next drain. Returns why it stopped.
std::string TraceAgent::trace_loop(TracedCommand* child, ContextSamplers& samplers) {
  const int64_t end = cfg_.duration_ns ? start_ + cfg_.duration_ns : INT64_MAX;
  int64_t next_second = start_ + kNsPerSec;
  std::string stop_reason;
  LoopStall stall;
  for (;;) {
    int64_t now = monotonic_now_ns();
    if (auto why = why_stop(child, now, end)) {
      stop_reason = std::move(*why);
      break;
    }
    stall.step("waiting");
    consumer_->drain();
    stall.step("draining");
    now = monotonic_now_ns();  // hooks run by the drain schedule rescans for "now"
    rescan_due_processes(now);
    stall.step("looking at processes");
    now = monotonic_now_ns();  // a first look at a big process takes a while
    if (probe_cfg_.duty_cycled) turn_launch_duty(now);
    const bool second_done = now >= next_second;
    if (second_done) {
      every_second(now, samplers);
      next_second = now + kNsPerSec;
    } else {
      out_->post(take_batch());
    }
    stall.step(second_done ? "the once-a-second work" : "launch windows and posting");
    // Sleep until the next drain, or until an exec wakes us.
    const int64_t sleep_ns = std::min(kDrainEvery, std::max<int64_t>(end - monotonic_now_ns(), 0));
    consumer_->wait_and_drain(int(sleep_ns / kNsPerMs));
  }
  spdlog::debug("agent loop: longest step {} ms ({})", stall.longest / kNsPerMs, stall.longest_in);
  return stop_reason;
}

model::Batch TraceAgent::drain_at_stop() {
  // Final drain: a child that just exited has its last records in the ring.
  // The probes stop first: a process traced by --pid goes on calling, and
  // its calls after the drain would be counted without their rows.
  probes_.stop();
  while (consumer_->drain() > 0) {
  }
  // Threads still asleep for a second or more (a rank blocked for good):
  // their waits up to now, with the line they went to sleep at.
  model::Batch asleep = record_sleepers();
  consumer_->flush_launch_aggregates(wall_now_ns());
  consumer_->flush_cpu_samples(wall_now_ns(), /*all=*/true);
  consumer_->flush_requests();
  model::Batch last = take_batch();
  last.append(std::move(asleep));
  flush_drops(last);
  find_stalled_calls(last, monotonic_now_ns(), /*at_stop=*/true);
  return last;
}

double TraceAgent::finish_launch_duty(model::Batch& last) {
  // (Stopped before the first window opened: no launch was probed.)
  const double probed =
      !probe_cfg_.duty_cycled ? 1.0 : duty_started_ ? duty_.probed_share(monotonic_now_ns()) : 0.0;
  if (probe_cfg_.duty_cycled && duty_started_) {
    const int64_t stopped_at = monotonic_now_ns();
    weigh_open_window(true, probes_.op_stats());
    close_launch_window(duty_.finish(stopped_at));
  }
  for (auto& w : launch_windows_) last.add(std::move(w));
  return probed;
}

std::vector<TraceSummary::SingleStepped> TraceAgent::called_single_stepped() {
  take_trap_costs(true);
  std::map<uint16_t, int64_t> calls;
  for (const auto& [op, st] : probes_.op_stats()) calls[op] += int64_t(st.calls);
  std::vector<TraceSummary::SingleStepped> called;
  for (auto e : single_stepped_) {
    e.calls = calls[e.op];
    if (e.calls > 0) called.push_back(e);
  }
  std::stable_sort(called.begin(), called.end(), [](const auto& a, const auto& b) { return a.calls > b.calls; });
  return called;
}

TraceSummary TraceAgent::summarize(const std::vector<model::OpCount>& counts, TracedCommand* child,
                                   const std::string& stop_reason, double probed) {
  TraceSummary sum;
  sum.db_path = db_path_;
  for (const auto& c : counts) sum.calls += c.calls;
  sum.rows = out_->rows_written();
  sum.dropped = lost();
  sum.shed = int64_t(last_drops_[CW_DROP_SHED]);
  sum.unprobed_returns = int64_t(last_drops_[CW_DROP_RETSITE]);
  sum.return_sites = int64_t(probes_.return_sites());
  if (child) {
    child->poll_exit();
    sum.command_exit = child->exit_code();
  }
  sum.stop_reason = stop_reason;
  sum.ops_attached = ops_attached_;
  sum.library_files = attached_.size();
  sum.launch_probed_share = probed;
  sum.duty_toggles = duty_toggles_;
  sum.duty_links_max = duty_links_max_;
  sum.duty_toggle_ns = duty_toggle_ns_;
  sum.duty_toggle_max_ns = duty_toggle_max_ns_;
  sum.launch_window_cost = window_cost_max_;
  sum.single_stepped = called_single_stepped();
  // What adaptive windows were last sized for, where single-stepped launches
  // made it more than the pair assumed (a fixed --launch-duty is not sized).
  sum.launch_trap_ns =
      probe_cfg_.duty_cycled && cfg_.launch_duty < 0 && duty_.trap_ns() > cfg_.launch_trap_ns ? duty_.trap_ns() : 0;
  for (const auto& [pid, c] : coverage_) {
    const auto* id = consumer_->identity(pid);
    sum.processes.push_back({pid, id ? id->comm : "", c.describe()});
  }
  return sum;
}

TraceSummary TraceAgent::run() {
  std::unique_ptr<TracedCommand> child = prepare_command();
  catch_stop_signals();
  observer_.started(db_path_);

  start_ = monotonic_now_ns();
  // A command's first launch window opens before it runs: a short job's
  // launches come at once, before the loop first turns (opening the GPU
  // library alone takes tens of ms where there is none). Without a
  // command, the first window waits for the running processes' first look.
  if (child && probe_cfg_.duty_cycled) start_launch_duty(start_);
  if (child) child->start();
  ContextSamplers samplers(cfg_, mono_to_wall_);
  {
    model::Batch first;
    samplers.sample(first, coverage_, false);
    out_->post(std::move(first));
  }
  const std::string stop_reason = trace_loop(child.get(), samplers);

  model::Batch last = drain_at_stop();
  const double probed = finish_launch_duty(last);
  samplers.sample(last, coverage_, /*all=*/true);
  out_->post(std::move(last));
  const auto counts = op_counts();
  close_store(counts);
  TraceSummary sum = summarize(counts, child.get(), stop_reason, probed);
  observer_.finished(progress(monotonic_now_ns()), sum);
  return sum;
}

}  // namespace

TraceSummary run(const AgentConfig& config, const std::string& command_line, Observer& observer) {
  TraceAgent agent(config, command_line, observer);
  return agent.run();
}

}  // namespace causeway::agent
