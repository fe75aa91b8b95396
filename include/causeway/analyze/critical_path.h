// SPDX-License-Identifier: Apache-2.0
#pragma once
// The critical path of each process's steps (docs/explain.md, "The critical
// path"): every moment of the judged time belongs to exactly one thread.
// The path starts at the thread the GPU waits for (the process's loop: its
// main thread, else its busiest synchronising thread); where that thread
// sleeps until another thread wakes it (a lock, a queue, an event, a join,
// the GIL), the path moves to the waker for that interval, recursively and
// across processes (loader workers). The segment where the path ends has one
// class and one line. An idle helper waiting for work is never on it: the
// path reaches a thread only for the time another thread on it waited.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "causeway/analyze/account.h"
#include "causeway/analyze/frame.h"

namespace causeway::analyze {

enum class PathClass : uint8_t {
  GpuBusy,     // in a synchronisation (or blocking copy) while the GPU ran queued work
  Launching,   // in launch calls, and the per-op dispatch between them
  SyncIdle,    // in synchronisations that found the GPU (nearly) drained: a storm's cost
  Copy,
  Alloc,
  Pin,
  Collective,
  OtherCall,
  OnCpu,       // running its own code at a line
  Compile,     // running a compiler (torch.compile, Triton, XLA, nvrtc) at a line
  Checkpoint,  // serialising state to write it (torch.save, pickle, safetensors, numpy.save)
  Runnable,    // waiting for a CPU while another task ran
  Throttled,   // waiting for a CPU while the CPU ran its idle task: a CPU limit (cgroup quota)
  DiskRead,    // uninterruptible I/O: a read, a page fault
  DiskWrite,   // ... writing back (write, fsync)
  Timer,       // its own sleep (time.sleep)
  Sleeping,    // asleep with no waker seen (a timeout, a device), or a wait the path cannot follow
  Input,       // woken by a process that is not traced (a pipe's or socket's writer)
  InFlight,    // a call still in flight when the trace stopped
  Autotune,    // inside an autotuner's search (cuDNN's, Triton's, inductor's): its calls, compiles and CPU time
};
constexpr int kPathClasses = int(PathClass::Autotune) + 1;
// The judged time in equal slices: where in it a part's time lies (an
// episode: a neighbour that ran for a minute of ten).
constexpr int kPathSlices = 10;
// Stable key ("gpu_busy") and words ("sync wait, GPU busy").
std::string_view path_class_key(PathClass c);
std::string_view path_class_words(PathClass c);
// Host work whose saving the GPU's own busy time bounds (not a wait).
bool path_class_on_host(PathClass c);

// How the path reached the segment's thread from the process's loop thread.
enum class PathVia : uint8_t {
  Own,    // the loop thread itself
  Lock,   // a thread of its process it waited for (a lock, a queue, its work)
  Gil,    // the thread that held the interpreter lock it waited for
  Input,  // another process it waited for (a loader worker)
};
std::string_view path_via_key(PathVia v);

struct PathPart {
  PathClass cls = PathClass::OnCpu;
  PathVia via = PathVia::Own;
  uint32_t pid = 0, tid = 0;   // the thread the path was on
  std::string thread;          // its name
  int64_t stack_id = -1;       // its line's stack (-1: none)
  std::optional<UserFrame> frame;  // ... as a line
  uint32_t by_pid = 0;         // Runnable: the task that ran instead
  std::string by_comm;
  int64_t ns = 0;              // critical-path time over the judged time
  int64_t times = 0;           // pieces
  std::array<int64_t, kPathSlices> slices{};  // its time in each slice
};

struct ProcessPath {
  int64_t session_id = 0;
  uint32_t pid = 0, tid = 0;   // the loop thread the path starts at
  std::string thread;
  int64_t from_ns = 0, to_ns = 0;  // the judged time: its steps, else after start-up
  int64_t probed_ns = 0;           // of it, in launch windows (trace --launch-duty): what the path covers
  int64_t steps = 0, step_ns = 0;  // from the loop thread's account
  std::string step_marker;
  std::optional<double> gpu_busy;  // NVML over the judged time
  bool sync_storm = false;         // the loop synchronises >= 10 times a step
  // Off-CPU intervals were recorded (host probes on): without them, time
  // between calls is unknown, not host work, and no wait can be followed.
  bool host_context = false;
  // Launch windows held too little of the loop to judge, so the path runs
  // over the whole judged time: launches outside the windows pass for host
  // work there, and the rules that judge host time pass this path over.
  bool launches_unseen = false;
  std::string text;                // the breakdown in one line (the step's parts, largest first)
  std::vector<PathPart> parts;     // most time first
  int64_t syncs = 0;               // synchronisations on the path
  double launches = 0;             // launches on the path (probed; sampled rows stand for theirs)
  int64_t tracer_ns = 0;           // the probes' own cost taken out of it (2 us a probed launch)
  std::array<int64_t, kPathSlices> slice_ns{};  // the time each slice covers
  int64_t covered_ns() const { return probed_ns; }
  // Enough of the loop to judge: a second of it; or, where launch windows
  // sampled it, five of its steps in them over a quarter second, or twenty
  // over a tenth. Less is a start, not a step.
  bool judged_enough() const;
  int64_t ns(PathClass c) const;
  double share(PathClass c) const;
  // What shortening a part could save at most: its share, bounded by the
  // GPU's idle time when the part is host work (Coz: once the GPU is the
  // bottleneck, faster host work does not shorten the step).
  double saving(double share, bool on_host) const;
};

}  // namespace causeway::analyze
