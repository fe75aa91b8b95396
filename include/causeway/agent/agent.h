// SPDX-License-Identifier: Apache-2.0
#pragma once
// The agent: the pipeline discover -> attach -> consume -> store, and the
// event loop that runs it (drains, library rescans, Python registration,
// kernel counters, a traced child, stop signals). The CLI only fills an
// AgentConfig (src/present/cmd_trace.cpp) and shows Progress.
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "causeway/common/hang.h"
#include "causeway/common/op_table.h"
#include "causeway/consume/live_stats.h"
#include "causeway/model/gpu_samples.h"
#include "causeway/model/op_counts.h"
#include "causeway/model/processes.h"

namespace causeway::agent {

enum class ProbeTier {
  Full,   // normal tracing
  Entry,  // benchmarks: entry uprobes that only count (the floor of the cost table)
  Floor,  // benchmarks: entry+return pair, a start time in a hash and one no-wakeup record
};
enum class LaunchLayer { Auto, Driver, Runtime, Both };  // Auto: driver when libcuda is there

// Every knob of `trace`, with its one default.
struct AgentConfig {
  int64_t duration_ns = 0;               // 0: until SIGINT/SIGTERM (or the command exits)
  std::string db_path;                   // empty: store::default_db_path
  std::vector<uint32_t> pids;            // trace only these (filtered in the kernel)
  std::vector<std::string> comms;        // ... or processes with these command names (at most 8)
  std::string cgroup;                    // ... or tasks in this cgroup v2 (path)
  std::vector<std::string> libs;         // extra library files/folders to probe
  std::vector<std::string> command;      // run and trace this command
  std::set<Layer> layers = {Layer::Runtime, Layer::Driver, Layer::Nccl, Layer::Hip, Layer::Verbs, Layer::Torch};
  bool host = true;                      // sched/block/tcp/process/reclaim probes, cgroup CPU limits
  bool metrics = false;                  // an observer serves metrics (--prometheus): per-process and per-op counters each second
  bool stacks = true;                    // Python + native stacks of rare and slow calls
  int64_t launch_min_ns = 0;             // record launches only when this slow (no sampling)
  // --launch-sampling N (0: every launch a row). docs/performance.md: a traced
  // training step costs 1.1% instead of 2.5%, a trace holds 60x fewer launch
  // rows, explain finds the same slow launches.
  uint32_t launch_sample_every = 64;
  int64_t offcpu_min_ns = 20'000;
  // On-CPU samples of traced Python threads (their Python line), per second
  // on every CPU; 0: off. Odd, so it does not beat with 10 ms timers.
  uint32_t cpu_sample_hz = 49;
  int64_t pystack_launch_min_ns = 1'000'000;
  // Library-call ring in MiB; 0: 8 with launch sampling, 16 without. Mapped
  // twice (wrap-around): it counts double in the agent's RSS.
  uint32_t ring_mb = 0;
  int64_t max_db_bytes = 0;              // retention (0: none)
  std::string node_id;                   // empty: the host name
  std::string sysfs_root = "/sys";       // RDMA counters (tests point it elsewhere)
  std::string runtime_root = "/";        // container runtimes' state, for pod names (tests point it elsewhere)
  // NVML, opened at run time (a soname or a path; "off": no GPU samples).
  std::string nvml_library = "libnvidia-ml.so.1";
  // The kernel log, read for the NVIDIA driver's XID lines (they name the
  // faulting process; NVML's events do not). A FIFO of records in tests; "off".
  std::string kmsg_path = "/dev/kmsg";
  // A call in flight this long is reported (a row in stalled_calls and a
  // warning): a hung collective, before the NCCL watchdog ends the job. 0: off.
  int64_t hang_after_ns = kDefaultHangAfterNs;
  // --launch-duty: the share of the time the once-per-launch probes
  // (launches, cuKernelGetFunction) are attached; every other call is traced
  // throughout. kDutyAuto adapts it so that their trap pairs cost about
  // launch_budget of a launching thread at the launch rate last measured
  // (a first window of 100 ms measures the rate of the trace and of each
  // newly traced process: launch_duty.h); 1:
  // always attached (incident captures; docs/performance.md has the costs).
  static constexpr double kDutyAuto = -1;
  double launch_duty = kDutyAuto;
  double launch_budget = 0.005;
  int64_t launch_trap_ns = 2'000;        // one entry+return trap pair on the H100 VM (docs/performance.md)
  ProbeTier tier = ProbeTier::Full;
  LaunchLayer launch_layer = LaunchLayer::Auto;
};

struct TraceSummary {
  std::string db_path;
  int64_t calls = 0;       // exact, from kernel counters
  int64_t rows = 0;        // rows written
  int64_t dropped = 0;     // records lost
  int64_t shed = 0;        // rows of fast calls shed under overload (their calls are counted)
  int64_t unprobed_returns = 0;  // tensor allocations that returned through a site not yet probed
  int64_t return_sites = 0;      // call sites whose return is probed (CW_COOKIE_RETSITE ops)
  int command_exit = -1;   // exit status of the traced command, -1 if none
  std::string stop_reason;
  int ops_attached = 0;    // functions probed
  size_t library_files = 0;
  double launch_probed_share = 1;  // of the trace's time (--launch-duty)
  // The launch windows' probes going on and off: each attach or detach of a
  // uprobe rewrites a code page in every process mapping the file.
  int64_t duty_toggles = 0, duty_links_max = 0, duty_toggle_ns = 0, duty_toggle_max_ns = 0;
  // Probed functions the kernel single-steps at entry here, what that adds
  // to each call against an emulated probe (attach/trap_cost.h), and how
  // many calls paid it.
  struct SingleStepped {
    uint16_t op = 0;
    std::string symbol;
    int64_t extra_ns = 0;
    int64_t calls = 0;
  };
  std::vector<SingleStepped> single_stepped;
  // The trap pair adaptive windows were last sized for, where launches that
  // single-step made it more than launch_trap_ns assumes; else 0.
  int64_t launch_trap_ns = 0;
  // The most an adaptive launch window's probing cost, as a share of the
  // window: its traps and its programs (launch_duty.h); 0 with no such window.
  double launch_window_cost = 0;
  // Each traced process that used a GPU library, and how it was seen: its
  // CUDA runtime (shared copies, linked in, none to probe) and the layers
  // probed (discover::ProcessCoverage::describe).
  struct ProcessSeen {
    uint32_t pid = 0;
    std::string comm;
    std::string coverage;
  };
  std::vector<ProcessSeen> processes;
};

// What a running trace shows (the live view; later the metrics endpoint).
struct Progress {
  const consume::LiveStats& stats;
  int64_t dropped = 0, shed = 0, rows = 0, elapsed_ns = 0;
  // Every second (not in finished()): the kernel's exact per-op counters,
  // records lost by source (cumulative), the latest NVML samples, and the
  // share of the time launches were probed (--launch-duty).
  const std::vector<model::OpCount>* op_counts = nullptr;
  const uint64_t* drops_by_source = nullptr;  // CW_DROP_MAX entries
  const std::vector<model::GpuSample>* gpus = nullptr;
  // Traced processes alive now (and for two minutes after they exit), with
  // their container and pod.
  const std::map<uint32_t, model::ProcessInfo>* processes = nullptr;
  double launch_probed_share = 1;
  // The oldest call in flight for a second or more, per (process, op): its age.
  const std::map<std::pair<uint32_t, uint16_t>, int64_t>* in_flight = nullptr;
};
class Observer {
 public:
  virtual ~Observer() = default;
  virtual void started(const std::string& /*db_path*/) {}
  // About once a second; then reset_interval() on the stats follows.
  virtual void every_second(const Progress&) {}
  virtual void finished(const Progress&, const TraceSummary&) {}
};

// Runs the trace to its end. Throws causeway::Error (UsageError for bad
// configuration) before anything is written when it cannot start.
TraceSummary run(const AgentConfig& config, const std::string& command_line, Observer& observer);

}  // namespace causeway::agent
