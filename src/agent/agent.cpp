// SPDX-License-Identifier: Apache-2.0
#include "causeway/agent/agent.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <fstream>

#include "causeway/common/error.h"
#include "causeway/common/time.h"
#include "causeway/store/read_only_trace.h"
#include "context_samplers.h"
#include "trace_agent.h"

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

}  // namespace

std::string read_first_line(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
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

namespace {

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

}  // namespace

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

std::optional<std::string> TraceAgent::why_stop(TracedCommand* child, int64_t now, int64_t end) const {
  if (g_stop_signal) return g_stop_signal == SIGINT ? "interrupted" : "terminated";
  if (now >= end) return "duration reached";
  if (child && child->poll_exit()) return "command exited with status " + std::to_string(child->exit_code());
  if (out_->failed())
    throw Error("writing " + db_path_ + " failed: " + out_->error() + " (events up to the last commit are kept)");
  return std::nullopt;
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

TraceSummary run(const AgentConfig& config, const std::string& command_line, Observer& observer) {
  TraceAgent agent(config, command_line, observer);
  return agent.run();
}

}  // namespace causeway::agent
