// SPDX-License-Identifier: Apache-2.0
#pragma once
// Where a dispatcher thread's time goes (a thread that issues CUDA/HIP/NCCL
// calls): its wall time split into launching, waiting in syncs while the GPU
// is busy, syncs that return at once, copies, allocations, pinning host
// memory, collectives, other calls, off-CPU runnable (contention), asleep
// by what it waited for (the interpreter lock, another thread of the
// process, its input, a timer, other), D-state, and on-CPU outside every
// call (Python and host compute). Per window, and per step where a
// repeating call site marks steps; its start-up (imports, context, module
// loads, lazy loading) apart. The rules launch_bound, sync_bound,
// input_bound, host_bound, gil_contention, lock_contention and pinning stand
// on it (docs/explain.md).
#include <algorithm>
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
  int64_t allocations = 0;  // allocs and frees of device memory
  int64_t pinning = 0;      // pinning and unpinning host memory (cudaHostAlloc, cudaHostRegister, ...)
  int64_t collectives = 0;  // NCCL
  int64_t other_calls = 0;  // graph captures, module loads, naming, ...
  int64_t runnable = 0;     // off-CPU outside calls waiting for a CPU: preempted, or woken and queued (runq_ns)
  // Asleep outside calls, by what it waited for:
  int64_t gil = 0;          // the Python interpreter lock (a futex inside it)
  int64_t lock = 0;         // another thread of its process (woke it): a lock, a queue, its work
  int64_t input = 0;        // another process (a loader worker, a pipe), or a thread that waited for one
  int64_t timer = 0;        // its own sleep (time.sleep, nanosleep)
  int64_t sleeping = 0;     // anything else (a timeout, the network, a device)
  int64_t disk = 0;         // off-CPU outside calls, uninterruptible (I/O)
  int64_t on_cpu = 0;       // the rest: running outside any traced call
  int64_t asleep() const { return gil + lock + input + timer + sleeping; }
  int64_t total() const {
    return launching + sync_busy + sync_idle + copies + allocations + pinning + collectives + other_calls +
           runnable + asleep() + disk + on_cpu;
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
  bool child = false;     // a child process of the thread's process that woke its threads (a DataLoader worker)
  int64_t ns = 0;         // time it accounts for
  int64_t times = 0;
};

// A thread of the same process this one waited for (the interpreter lock's
// holder, or the thread that woke it from a lock or queue), and what that
// thread did meanwhile.
struct WaitedFor {
  uint32_t tid = 0;
  std::string name;
  bool gil = false;          // the interpreter lock's holder (else: woke it)
  int64_t ns = 0;            // time waited for it (outside calls)
  int64_t times = 0;
  int64_t runnable_ns = 0;   // of that, the holder was itself waiting for a CPU
  int64_t input_ns = 0;      // ... asleep until another process woke it (its input)
  int64_t on_cpu_ns = 0;     // ... running (doing the work the wait was for)
  // Who ran on its CPUs while it waited for one over the waits (most first;
  // same_process and child set): a starved holder's neighbours.
  std::vector<OtherTask> ran_instead;
  // Its line: where its CPU time went while this thread was accounted (its
  // CPU samples, the innermost user frame); none without samples.
  std::string where, func;
  double line_share = 0;     // of its samples
};

struct ThreadAccount {
  int64_t session_id = 0;
  uint32_t pid = 0, tid = 0;
  std::string name;            // thread name, else the process's
  int64_t from_ns = 0, to_ns = 0;
  TimeSplit time;              // over [max(from_ns, startup_end_ns), to_ns) (or its launch windows)
  bool launches_estimated = false;  // launching time scaled from the kernel's per-process counts
  int64_t launches = 0;        // launch calls (exact when counted in the kernel)
  int64_t syncs = 0, syncs_idle = 0;
  int64_t copies = 0, allocations = 0;
  int64_t after_sync_ns = 0;   // from each sync's return to the thread's next call (<= 1 ms each)
  // Steps: the interval between two calls of the repeating marker (the
  // least frequent synchronisation site recurring across the activity).
  int64_t steps = 0;            // whole steps in launch windows (what per_step averages)
  int64_t markers = 0;          // the most frequent marker site's occurrences, windows or not: steps taken
  int64_t step_ns = 0;         // the mean step
  int64_t steps_from_ns = 0, steps_to_ns = 0;  // the first and last marker
  int64_t marked_steps = 0;     // the steps between them, in launch windows or not
  int64_t gpu_work_end_ns = 0;  // its last launch, sync, copy or collective: what follows is its exit's teardown
  std::string step_marker;     // "cudaStreamSynchronize at train.py:61", or "train.py:88" (a line)
  TimeSplit per_step;          // the mean step
  // The split over time: kTimeSlices equal slices of the span (the report's bars).
  static constexpr int kTimeSlices = 24;
  std::vector<TimeSplit> over_time;
  std::vector<OtherTask> wakers;       // most time first
  std::vector<OtherTask> ran_instead;  // most time first
  std::vector<WaitedFor> waited_for;   // most time first
  // Threads of its process that woke it while they themselves waited for
  // another process (a pin-memory thread fed by loader workers): counted as
  // input; most time first.
  std::vector<OtherTask> input_via;
  // Start-up: from its first call to the end of its last start-up call
  // (module and library loads, kernel registration, first kernel lookups)
  // before the loop settles; not host-bound time. The judged time starts
  // after it when no step is found.
  int64_t startup_end_ns = 0;
  int64_t startup_ns() const { return startup_end_ns > from_ns ? startup_end_ns - from_ns : 0; }
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
  // The time the split covers: the span after start-up, or its launch windows.
  int64_t covered_ns() const { return launch_windows ? probed_ns : to_ns - std::max(from_ns, startup_end_ns); }
  // The split a rule judges: the mean step when there are steps, else the span.
  const TimeSplit& judged() const { return steps >= 3 ? per_step : time; }
  int64_t judged_ns() const { return steps >= 3 ? step_ns : covered_ns(); }
  double share(int64_t TimeSplit::*part) const;
};

// Synchronisations at least kMinSyncsPerStep a step, or kMinSyncsPerSecond:
// a sync storm (the critical path walks it as one; sync_bound names it).
constexpr double kMinSyncsPerStep = 10;
constexpr double kMinSyncsPerSecond = 1000;
// The rate alone is no storm where the thread's syncs wait on a busy GPU this
// share of its time or more: a fast loop (a replayed CUDA graph, 0.4 ms a
// step) that reads its loss back once a step is GPU-bound; its read-backs
// cost only the refill the GPU idles for (H200: 92% of the mean step in syncs
// that waited, 2,500 steps/s).
constexpr double kGpuPacedSyncShare = 0.8;
bool gpu_paced_syncs(const ThreadAccount& a);
bool sync_storm(const ThreadAccount& a);
// CPU time between launches up to this much a launch is per-op dispatch
// (eager PyTorch spends 10-30 us of Python and dispatcher an op).
constexpr int64_t kMaxDispatchNs = 50'000;

}  // namespace causeway::analyze
