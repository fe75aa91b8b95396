// SPDX-License-Identifier: Apache-2.0
#pragma once
// Where a dispatcher thread's time goes (a thread that issues CUDA/HIP/NCCL
// calls): its wall time split into launching, waiting in syncs while the GPU
// is busy, syncs that return at once, copies, allocations, collectives,
// other calls, off-CPU runnable (contention), sleeping (waiting for a
// waker), D-state, and on-CPU outside every call (Python and host compute).
// Per window, and per step where a repeating synchronisation marks steps.
// The rules launch_bound, sync_bound, input_bound and host_bound stand on it
// (docs/explain.md).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace causeway::analyze {

// Nanoseconds in each kind of activity; they add up to the span.
struct TimeSplit {
  int64_t launching = 0;    // in launch calls (estimated from kernel counts when launches are sampled)
  int64_t sync_busy = 0;    // in syncs that waited: the GPU was still busy
  int64_t sync_idle = 0;    // in syncs that returned at once: the GPU was already idle
  int64_t copies = 0;
  int64_t allocations = 0;  // allocs and frees
  int64_t collectives = 0;  // NCCL
  int64_t other_calls = 0;  // graph captures, naming, ...
  int64_t runnable = 0;     // off-CPU outside calls, preempted (runnable)
  int64_t sleeping = 0;     // off-CPU outside calls, waiting to be woken
  int64_t disk = 0;         // off-CPU outside calls, uninterruptible (I/O)
  int64_t on_cpu = 0;       // the rest: running outside any traced call
  int64_t total() const {
    return launching + sync_busy + sync_idle + copies + allocations + collectives + other_calls + runnable +
           sleeping + disk + on_cpu;
  }
};

// The parts of a split, in display order: a stable key, words for people.
struct SplitPart {
  const char* key;
  const char* words;
  int64_t TimeSplit::*field;
};
const std::vector<SplitPart>& split_parts();

// Who woke the thread from sleeps outside calls, or ran while it was runnable.
struct OtherTask {
  uint32_t pid = 0, tid = 0;
  std::string name;       // thread or process name, "" when unknown
  bool same_process = false;
  bool child = false;     // a child process of the thread's process (a DataLoader worker)
  int64_t ns = 0;         // time it accounts for
  int64_t times = 0;
};

struct ThreadAccount {
  int64_t session_id = 0;
  uint32_t pid = 0, tid = 0;
  std::string name;            // thread name, else the process's
  int64_t from_ns = 0, to_ns = 0;
  TimeSplit time;              // over [from_ns, to_ns)
  bool launches_estimated = false;  // launching time scaled from the kernel's per-process counts
  int64_t launches = 0;        // launch calls (exact when counted in the kernel)
  int64_t syncs = 0, syncs_idle = 0;
  int64_t copies = 0, allocations = 0;
  int64_t after_sync_ns = 0;   // from each sync's return to the thread's next call (<= 1 ms each)
  // Steps: the interval between two calls of the repeating marker (the
  // least frequent synchronisation site recurring across the activity).
  int64_t steps = 0;
  int64_t step_ns = 0;         // the mean step
  std::string step_marker;     // "cudaStreamSynchronize at train.py:61"
  TimeSplit per_step;          // the mean step
  // The split over time: kTimeSlices equal slices of the span (the report's bars).
  static constexpr int kTimeSlices = 24;
  std::vector<TimeSplit> over_time;
  std::vector<OtherTask> wakers;       // most time first
  std::vector<OtherTask> ran_instead;  // most time first
  std::optional<double> gpu_busy;      // NVML: the GPU's utilisation over the span (0..1)
  // Off-CPU intervals were recorded in this session (host probes on): without
  // them, time outside calls is unknown rather than on-CPU.
  bool host_context = false;
  // Launches were probed only in windows (trace --launch-duty): time,
  // per_step and over_time cover those windows alone (probed_ns of the
  // span), since outside them launching would pass for host work.
  bool launch_windows = false;
  int64_t probed_ns = 0;
  int64_t span_ns() const { return to_ns - from_ns; }
  // The time the split covers: the span, or its launch windows.
  int64_t covered_ns() const { return launch_windows ? probed_ns : span_ns(); }
  // The split a rule judges: the mean step when there are steps, else the span.
  const TimeSplit& judged() const { return steps >= 3 ? per_step : time; }
  int64_t judged_ns() const { return steps >= 3 ? step_ns : covered_ns(); }
  double share(int64_t TimeSplit::*part) const;
};

}  // namespace causeway::analyze
