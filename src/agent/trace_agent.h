// SPDX-License-Identifier: Apache-2.0
// One trace's agent: the class the loop (agent.cpp), the processes it
// tracks (process_tracking.cpp), its launch windows (launch_windows.cpp) and
// the calls it finds stalled (stalled_calls.cpp) are members of.
#pragma once

#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "calls_before.h"
#include "causeway/agent/agent.h"
#include "causeway/agent/launch_duty.h"
#include "causeway/attach/probes.h"
#include "causeway/attach/trap_cost.h"
#include "causeway/common/time.h"
#include "causeway/consume/consumer.h"
#include "causeway/discover/libraries.h"
#include "causeway/model/launch_windows.h"
#include "causeway/model/threads.h"
#include "causeway/store/trace_writer.h"
#include "traced_command.h"

namespace causeway::agent {

class ContextSamplers;

// The probes' configuration, checked before anything is loaded or written.
attach::ProbeConfig probe_config(const AgentConfig& c);
// A file's first line, "" where there is none (/proc's comm, the boot id).
std::string read_first_line(const std::string& path);

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

}  // namespace causeway::agent
