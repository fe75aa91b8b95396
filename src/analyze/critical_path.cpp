// SPDX-License-Identifier: Apache-2.0
// The critical path of each process (include/causeway/analyze/critical_path.h).
// One walk over the loop thread's judged time: its calls and off-CPU
// intervals in time order, the gaps between them on-CPU. A sleep that another
// thread ended (a futex, a pipe, the GIL) is followed into the waker for that
// interval, recursively (a wait-for graph, as wPerf walks it). On-CPU time is
// split per second into per-op dispatch (a launch's worth of host time, 20 us,
// for each launch in that second) and work at the lines its CPU samples name.
#include "causeway/analyze/critical_path.h"

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <tuple>

#include "causeway/common/op_table.h"
#include "causeway/common/time.h"
#include "causeway/events.h"
#include "causeway/model/offcpu.h"
#include "causeway/store/path_reads.h"
#include "rule_context.h"
#include "timeline.h"

namespace causeway::analyze {

namespace {

constexpr int kMaxDepth = 6;                     // hops followed from the loop thread
constexpr int64_t kSecond = 1'000'000'000;
// Host time a launch takes with its dispatch (eager PyTorch spends 10-30 us
// of Python and dispatcher an op; the launch call itself a few us).
constexpr int64_t kDispatchPerLaunchNs = 20'000;
// On a sync storm, a sync that waited less than this waited for the few
// kernels the loop queued since the last one: the storm's cost, not the GPU's.
constexpr int64_t kStormSyncNs = 1'000'000;
// The loop thread's host work after the process's last launch, before a wait
// on a busy GPU, ran while the GPU worked on what was queued before it
// (in-order queues), unless what was queued after it could have taken the
// wait: more than this many times the launches after it at the stretch's
// time per launch (its length, less the host work in question, over its
// launches: the most each could take on average were the GPU idle through
// that work), with its copies at kSlowCopyBytesPerNs.
constexpr double kHiddenMargin = 2.0;
// 4 GB/s: a third of a PCIe 3.0 x16 link's pinned rate (a pageable copy is
// staged by the CPU inside its call, then sent from pinned buffers). At 1
// GB/s a step's 1-MiB batch copy (133 us a call on an H100 host) counted
// as 1 ms of queued work and kept its 6 ms of preparation on the path.
constexpr double kSlowCopyBytesPerNs = 4.0;
// A helper thread that spends this share of its time on the path waiting for
// other processes feeds the loop its input.
constexpr double kFeederShare = 0.2;
constexpr int64_t kMinJudgedNs = 1'000'000'000;
// Launch windows sample the loop (trace --launch-duty): their time is what
// the path covers, a few hundred ms of a short trace (a 4-s training loop
// of 60-ms steps had 0.9 s). A quarter second and five steps in them are
// enough to judge, as a second of them is; so are twenty steps in a tenth
// of a second or more: windows sized for what probing costs gave a 4-s
// decode loop of 4-ms steps 0.22 s (53 steps, launching 92%), and no chain.
constexpr int64_t kMinWindowedNs = 250'000'000;
constexpr int64_t kMinWindowedSteps = 5;
constexpr int64_t kManyWindowedSteps = 20;
constexpr int64_t kMinManyStepsNs = 100'000'000;

struct PartKey {
  PathClass cls;
  PathVia via;
  uint32_t pid, tid;
  int64_t stack;
  uint32_t by_pid;
  std::string by_comm;
  auto tie() const { return std::tie(cls, via, pid, tid, stack, by_pid, by_comm); }
  bool operator<(const PartKey& o) const { return tie() < o.tie(); }
};

// A part's time and pieces, and its time in each slice of the judged time.
struct Acc {
  int64_t ns = 0, times = 0;
  std::array<int64_t, kPathSlices> slices{};
};

// Adds [at, at + ns) to the slices of [from, from + span).
void spread(std::array<int64_t, kPathSlices>& slices, int64_t from, int64_t span, int64_t at, int64_t ns) {
  if (span <= 0 || ns <= 0) return;
  for (int64_t t = at, end = at + ns; t < end;) {
    const int64_t i = std::clamp<int64_t>((t - from) * kPathSlices / span, 0, kPathSlices - 1);
    const int64_t slice_end = i + 1 == kPathSlices ? end : std::max(t + 1, from + span * (i + 1) / kPathSlices);
    const int64_t e = std::min(end, slice_end);
    slices[size_t(i)] += e - t;
    t = e;
  }
}

struct Bucket {  // one thread's on-CPU path time and launches in one second
  int64_t on_cpu = 0;
  double launches = 0;
  int64_t origin = -1;     // the loop's line that waited for it (Walker::walk)
  int64_t hidden = 0;      // its host work the GPU's queue outlasted: off the path (Walker::finish)
  std::array<int64_t, kPathSlices> slices{};  // where in the judged time its on-CPU time lay
};

class Walker {
 public:
  Walker(const RuleContext& ctx, int64_t session, uint32_t pid, bool storm, int64_t from, int64_t span)
      : ctx_(ctx), session_(session), pid_(pid), storm_(storm), from_(from), span_(span) {}
  int64_t syncs = 0;  // synchronisations the path went through
  // Host work the GPU's queue outlasted leaves the path (settle); not where
  // launches go unseen (a whole trace judged beyond its launch windows).
  bool hides = true;
  std::optional<double> nvml_busy;  // NVML over the judged steps: bounds what is hidden
  const std::set<int64_t>* tuning = nullptr;  // autotuners' stacks: their syncs are not the loop's
  bool tuned(int64_t stack) const { return tuning && stack >= 0 && tuning->count(stack); }

  // `origin`: the stack the loop thread went to sleep in when the path left
  // it (loss.backward() waiting for the autograd thread): the line of the
  // followed thread's parts that have none of their own.
  void walk(uint32_t pid, uint32_t tid, int64_t a, int64_t b, PathVia via, int depth, int64_t origin = -1) {
    if (b <= a) return;
    const int64_t saved = origin_;
    origin_ = origin;
    if (on_path_.empty()) root_pid_ = pid, root_tid_ = tid;
    on_path_.push_back(tid);
    const Timeline& tl = ctx_.timelines().get(session_, pid, tid);
    auto [ci, chi] = tl.calls_in(a, b);
    auto oi = tl.offs_from(a);
    int64_t t = a;
    while (t < b) {
      const TimelineCall* c = ci < chi ? &tl.calls[ci] : nullptr;
      while (oi != tl.offs.end() && oi->end <= t) ++oi;
      const TimelineOff* o = oi != tl.offs.end() && oi->ts < b ? &*oi : nullptr;
      const int64_t next = std::min({b, c ? std::max(t, c->ts) : b, o ? std::max(t, o->ts) : b});
      if (next > t) {  // running its own code between calls and sleeps
        // Up to an autotuner's call, its own search (building, compiling
        // and timing candidates: cuDNN's plans finalised for a new shape
        // take ~0.7 s of CPU each before the library they compiled loads,
        // and its backward has no Python frame for CPU samples to tell it
        // by).
        if (c && tuned(c->stack_id)) {
          at_ = t;
          add(PathClass::Autotune, via, pid, tid, c->stack_id, next - t);
        } else {
          on_cpu(pid, tid, t, next, via);
        }
        t = next;
        continue;
      }
      if (c && c->ts <= t) {
        const int64_t end = std::min(b, c->end);
        call(tl, *c, pid, tid, t, end, via);
        t = end;
        ci++;
        continue;
      }
      // Off-CPU outside calls, up to the next call (clock skew between probes).
      const int64_t end = std::min({b, o->end, c ? std::max(t, c->ts) : b});
      off(*o, pid, tid, t, end, via, depth);
      t = std::max(end, t + 1);
    }
    if (on_path_.size() == 1) settle(nullptr);  // the range ends: nothing more is known
    on_path_.pop_back();
    origin_ = saved;
  }

  // The hidden host work goes on the path as the GPU's. A piece nothing was
  // launched after is certain (settle); of the others no more than NVML says
  // the GPU was busy beyond the path's own waits on it and the certain pieces
  // over the `covered` ns walked (NVML samples a GPU-bound loop's launch gaps
  // as idle: 81-86% busy for one that waits on it half of every step); the
  // rest stays host time.
  void finish(int64_t covered) {
    int64_t waits = 0, certain = 0, inferred = 0;
    for (const auto& [k, acc] : parts)
      if (k.cls == PathClass::GpuBusy) waits += acc.ns;
    for (const auto& h : hidden_) (h.certain ? certain : inferred) += h.b - h.a;
    const double allowed = nvml_busy ? std::max(0.0, *nvml_busy * double(covered) - double(waits + certain))
                                     : double(inferred);
    const double keep = inferred > 0 ? std::min(1.0, allowed / double(inferred)) : 0;
    const int64_t at = at_, origin = origin_;
    for (const auto& h : hidden_) {
      const int64_t gpu = h.certain ? h.b - h.a : int64_t(keep * double(h.b - h.a));
      origin_ = h.origin;
      host_time(h.pid, h.tid, h.a, h.b - gpu, h.via);
      for_each_second(h.b - gpu, h.b,
                      [&](int64_t sec, int64_t, int64_t ns) { buckets[{h.pid, h.tid, h.via, sec}].hidden += ns; });
      at_ = h.b - gpu;
      add(PathClass::GpuBusy, PathVia::Own, root_pid_, root_tid_, h.wait_stack, gpu);
    }
    at_ = at, origin_ = origin;
    hidden_.clear();
  }

  std::map<PartKey, Acc> parts;
  std::map<std::tuple<uint32_t, uint32_t, PathVia, int64_t>, Bucket> buckets;  // (pid, tid, via, second)

 private:
  void add(PathClass cls, PathVia via, uint32_t pid, uint32_t tid, int64_t stack, int64_t ns, uint32_t by_pid = 0,
           std::string by_comm = {}) {
    if (ns <= 0) return;
    if (stack < 0) stack = origin_;
    auto& p = parts[{cls, via, pid, tid, stack, by_pid, std::move(by_comm)}];
    p.ns += ns;
    p.times++;
    spread(p.slices, from_, span_, at_, ns);
  }

  // Host work on the path waits until the loop's GPU queue next drains
  // (settle): the GPU may have run queued work all through it. The loop
  // thread's, and that of the threads of its process that make no CUDA
  // call (the loop waiting in a parallel region is followed to its OpenMP
  // workers); a thread with calls of its own queues and waits itself.
  void on_cpu(uint32_t pid, uint32_t tid, int64_t a, int64_t b, PathVia via) {
    if (hides && pid == root_pid_ && (tid == root_tid_ || cpu_only(pid, tid)))
      return pending_.push_back({pid, tid, a, b, origin_, via});
    host_time(pid, tid, a, b, via);
  }

  bool cpu_only(uint32_t pid, uint32_t tid) {
    auto [it, fresh] = cpu_only_.try_emplace(tid);
    if (fresh) it->second = ctx_.timelines().get(session_, pid, tid).calls.empty();
    return it->second;
  }

  // f(second, start, ns) for each second [a, b) touches.
  template <class F>
  static void for_each_second(int64_t a, int64_t b, F&& f) {
    for (int64_t s = a; s < b;) {
      const int64_t sec = s / kSecond, e = std::min(b, (sec + 1) * kSecond);
      f(sec, s, e - s);
      s = e;
    }
  }

  void host_time(uint32_t pid, uint32_t tid, int64_t a, int64_t b, PathVia via) {
    for_each_second(a, b, [&](int64_t sec, int64_t s, int64_t ns) {
      Bucket& k = buckets[{pid, tid, via, sec}];
      k.on_cpu += ns;
      spread(k.slices, from_, span_, s, ns);
      if (k.origin < 0) k.origin = origin_;
    });
  }

  // A call [a, b) of it: its class, but off-CPU time inside it waiting for a
  // CPU or for the disk is that (a driver's own wait in its ioctl is the
  // call's).
  void call(const Timeline& tl, const TimelineCall& c, uint32_t pid, uint32_t tid, int64_t a, int64_t b, PathVia via) {
    at_ = a;
    PathClass cls;
    switch (c.kind) {
      case CallKind::Launch:
      case CallKind::SampledLaunch: cls = PathClass::Launching; break;
      case CallKind::SyncBusy:
        cls = storm_ && c.end - c.ts < kStormSyncNs ? PathClass::SyncIdle : PathClass::GpuBusy;
        break;
      case CallKind::SyncIdle: cls = PathClass::SyncIdle; break;
      case CallKind::Copy: cls = PathClass::Copy; break;
      case CallKind::Alloc: cls = PathClass::Alloc; break;
      case CallKind::Pin: cls = PathClass::Pin; break;
      case CallKind::Collective: cls = PathClass::Collective; break;
      default: cls = PathClass::OtherCall; break;
    }
    // A value read back is a synchronisation however it is issued (JAX's
    // worker threads copy asynchronously, then wait on an event).
    // An autotuner's syncs time its candidates: not the loop's read-backs.
    if ((c.kind == CallKind::SyncBusy || c.kind == CallKind::SyncIdle || c.readback) && c.ts >= a && !tuned(c.stack_id))
      syncs++;
    if (c.kind == CallKind::Launch || c.kind == CallKind::SampledLaunch)
      buckets[{pid, tid, via, a / kSecond}].launches +=
          c.kind == CallKind::SampledLaunch && tl.launches_per_sampled > 0 ? tl.launches_per_sampled : 1;
    int64_t rest = b - a;
    for (auto o = tl.offs_from(a); o != tl.offs.end() && o->ts < b; ++o) {
      const int64_t ns = overlap_ns(o->ts, o->end, a, b);
      if (o->state == CW_STATE_RUNNING) {
        add(runnable_class(*o), via, pid, tid, c.stack_id, ns, o->by_pid, o->by_comm);
        rest -= ns;
      } else if (disk_wait(*o)) {
        add(PathClass::DiskRead, via, pid, tid, c.stack_id, ns);
        rest -= ns;
      }
    }
    add(cls, via, pid, tid, c.stack_id, rest);
    if (pid == root_pid_ && tid == root_tid_) {
      queue(c, cls, a);
    } else if (pid == root_pid_ && unknown_length(c)) {
      settle(nullptr);  // another thread's graph or collective: work of unknown length queued
    }
  }

  // What a call of the loop thread says of the GPU's queue, for its pending
  // host work.
  void queue(const TimelineCall& c, PathClass cls, int64_t a) {
    const OpSpec* op = find_op(uint16_t(c.op_id));
    if (c.launch_seq >= 0 && c.last_launch) {
      // Where the launches lie: host work after the process's last launch
      // before this call queued nothing; before it, maybe.
      for (auto& h : pending_)
        if (h.seq < 0) {
          h.seq = c.launch_seq;
          h.free_from = *c.last_launch < h.b ? std::max(h.a, *c.last_launch) : h.b;
        }
    }
    if (cls == PathClass::GpuBusy && c.ts >= a) return settle(&c);
    // A sync that returned at once found the queue empty; a blocking copy
    // drains it too (cudaMemcpy waits for the work queued before it). An
    // async read-back that returned at once only queued its copy.
    const bool drained = (op && op->cls == OpClass::Sync) ||
                         (op && op->cls == OpClass::Copy && op->name.find("Async") == std::string_view::npos);
    // The queue found empty, or work of unknown length queued (a graph's
    // replay, a collective): the host work stays on the path.
    if (drained || unknown_length(c)) {
      settle(nullptr);
      // A drain is where the next stretch starts: the queue was empty when
      // the call returned, with the process's launches so far known.
      if (drained && !unknown_length(c) && c.launch_seq >= 0) stretch_from_ = c.end, stretch_seq_ = c.launch_seq;
      return;
    }
    if (c.kind == CallKind::Copy && c.bytes > 0)
      for (auto& h : pending_) h.copy_bytes += c.bytes;
  }

  static bool unknown_length(const TimelineCall& c) {
    const OpSpec* op = find_op(uint16_t(c.op_id));
    return c.kind == CallKind::Collective ||
           (op && (op->cls == OpClass::Graph || op->cls == OpClass::Capture || op->cls == OpClass::Collective));
  }

  // The loop thread's host work since the queue last drained, at `wait` (a
  // call that waited for the GPU, knowing the launches before it), or where
  // nothing more is known (null: all of it host time).
  void settle(const TimelineCall* wait) {
    const int64_t at = at_, origin = origin_;
    // The wait knows the launches before it; the stretch since the queue last
    // drained gives their mean length (a drain in between leaves it unknown).
    const bool known = wait && wait->launch_seq >= 0 && wait->last_launch;
    const bool stretch = known && stretch_seq_ >= 0;
    const double launches = stretch ? double(std::max<int64_t>(1, wait->launch_seq - stretch_seq_)) : 1;
    const double per_launch =
        stretch ? double(std::max<int64_t>(0, wait->end - std::min(stretch_from_, wait->ts) - pending_span())) / launches
                : 0;
    const double waited = wait ? double(wait->end - wait->ts) : 0;
    for (const auto& h : pending_) {
      origin_ = h.origin;
      int64_t hidden = 0;
      const int64_t after = known ? std::max<int64_t>(0, wait->launch_seq - h.seq) : 0;
      // Nothing launched after the piece: the GPU still ran work queued before
      // it when the wait began, and in order, so all through it; only its
      // copies may have taken the wait. With launches after it, the stretch's
      // time per launch is a mean, not what they took (one heavy GEMM after
      // many small kernels): only NVML bounds what that hides (finish).
      if (known && h.seq >= 0 && h.free_from < h.b && (after == 0 || (nvml_busy && stretch))) {
        const double queued = double(after) * per_launch + double(h.copy_bytes) / kSlowCopyBytesPerNs;
        if (waited > kHiddenMargin * queued) hidden = h.b - h.free_from;
      }
      host_time(h.pid, h.tid, h.a, h.b - hidden, h.via);
      if (hidden > 0) {
        HostPiece& x = hidden_.emplace_back(h);
        x.a = h.b - hidden;
        x.wait_stack = wait->stack_id;
        x.certain = after == 0;
      }
    }
    at_ = at, origin_ = origin;
    pending_.clear();
    stretch_from_ = wait ? wait->end : 0;
    stretch_seq_ = wait ? wait->launch_seq : -1;
  }

  // The wall time the pending host work covers (a parallel region's threads
  // overlap), where it may lie after the last launch before it.
  int64_t pending_span() const {
    std::vector<std::pair<int64_t, int64_t>> spans;
    for (const auto& h : pending_)
      if (h.seq >= 0 && h.free_from < h.b) spans.emplace_back(h.free_from, h.b);
    std::sort(spans.begin(), spans.end());
    int64_t total = 0, end = INT64_MIN;
    for (const auto& [a, b] : spans) {
      if (b <= end) continue;
      total += b - std::max(a, end);
      end = b;
    }
    return total;
  }

  bool gpu_event_thread(uint32_t pid, uint32_t tid) {
    auto [it, fresh] = event_threads_.try_emplace(tid);
    if (fresh) it->second = ctx_.thread_name(session_, pid, tid, INT64_MAX) == "cuda-EvtHandlr";
    return it->second;
  }

  static PathClass runnable_class(const TimelineOff& o) {
    // The CPU ran its idle task while the thread could run: its group's CPU
    // time for the period was spent (a quota), not taken by anyone. A woken
    // thread also waits behind the idle task while that CPU wakes up (tens
    // of microseconds): only a wait a quota's length can be is a throttle.
    constexpr int64_t kThrottleNs = 1'000'000;
    const bool idle = o.by_pid == 0 && o.by_comm.rfind("swapper", 0) == 0;
    if (!idle) return PathClass::Runnable;
    return !o.queued || o.end - o.ts >= kThrottleNs ? PathClass::Throttled : PathClass::Runnable;
  }

  void off(const TimelineOff& o, uint32_t pid, uint32_t tid, int64_t a, int64_t b, PathVia via, int depth) {
    if (b <= a) return;
    at_ = a;
    const int64_t stack = o.stack_id >= 0 ? o.stack_id : -1;
    if (o.state == CW_STATE_RUNNING) return add(runnable_class(o), via, pid, tid, stack, b - a, o.by_pid, o.by_comm);
    if (disk_wait(o))
      return add(disk_write_syscall(o.syscall) ? PathClass::DiskWrite : PathClass::DiskRead, via, pid, tid, stack, b - a);
    if (o.state != CW_STATE_SLEEPING) return add(PathClass::Sleeping, via, pid, tid, stack, b - a);
    if (timer_syscall(o.syscall)) return add(PathClass::Timer, via, pid, tid, stack, b - a);
    // Who it waited for: the GIL's holder (the thread that woke it, else
    // the one holding the lock when it slept), or the thread that woke it.
    uint32_t wpid = o.waker_pid, wtid = o.waker_tid;
    const bool gil = o.wait == CW_WAIT_GIL;
    if (gil && (!wpid || wpid != pid) && o.holder_tid) wpid = pid, wtid = o.holder_tid;
    const bool followable = wpid && wtid && wtid != tid && depth < kMaxDepth &&
                            std::find(on_path_.begin(), on_path_.end(), wtid) == on_path_.end();
    if (!followable) {
      if (wpid && wpid != pid) return add(PathClass::Input, PathVia::Input, pid, tid, stack, b - a);
      // CUDA's own event thread sleeps until the GPU signals work done: a
      // thread waiting on it waits for the GPU.
      if (!wpid && gpu_event_thread(pid, tid)) return add(PathClass::GpuBusy, via, pid, tid, stack, b - a);
      return add(PathClass::Sleeping, via, pid, tid, stack, b - a);
    }
    // How the path got here: another process is input; within the process
    // a GIL hop anywhere on the way is the GIL's (the loop waits for the
    // autograd thread, which waits for the interpreter lock a metrics thread
    // holds: the GIL is what the step waits on), else the first hop's kind.
    const PathVia next = wpid != pid || via == PathVia::Input ? PathVia::Input
                         : gil                                ? PathVia::Gil
                         : via != PathVia::Own                ? via
                                                              : PathVia::Lock;
    walk(wpid, wtid, a, b, next, depth + 1, via == PathVia::Own ? o.stack_id : origin_);
  }

  const RuleContext& ctx_;
  int64_t session_;
  uint32_t pid_;
  bool storm_;
  int64_t from_, span_;
  int64_t at_ = 0;  // where the piece being added starts
  int64_t origin_ = -1;
  std::vector<uint32_t> on_path_;
  std::map<uint32_t, bool> event_threads_;
  std::map<uint32_t, bool> cpu_only_;  // threads of the loop's process without a CUDA call
  struct HostPiece {
    uint32_t pid, tid;
    int64_t a, b, origin;
    PathVia via;
    int64_t seq = -1;         // the process's launches at the first sync or copy after it; -1: none yet
    int64_t free_from = 0;    // [free_from, b) lies after the last launch before that call
    int64_t copy_bytes = 0;   // copied after it, before the wait
    int64_t wait_stack = -1;  // hidden: the stack of the wait that outlasted it
    bool certain = false;     // hidden with nothing launched after it (settle)
  };
  uint32_t root_pid_ = 0, root_tid_ = 0;
  std::vector<HostPiece> pending_;
  std::vector<HostPiece> hidden_;  // host work a wait on a busy GPU outlasted, until finish
  int64_t stretch_from_ = 0;  // where the queue last drained
  int64_t stretch_seq_ = -1;  // the process's launches then; -1: unknown
};

// What a CPU sample's stack was doing, by its Python frames.
enum class StackKind { User, Framework, Compile, Checkpoint, Autotune };

// What each stack was doing, by its frames (store::each_stack_use lists the
// patterns): the framework's Python, a compiler, a serialiser, or an
// autotuner, whose launches, syncs, workspace allocations and compiles are
// the search's.
std::map<int64_t, StackKind> stack_kinds(const RuleContext& ctx) {
  std::map<int64_t, StackKind> out;
  store::each_stack_use(ctx.db, [&](int64_t stack, store::StackUse use) {
    switch (use) {
      case store::StackUse::Framework: out[stack] = StackKind::Framework; break;
      case store::StackUse::Checkpoint: out[stack] = StackKind::Checkpoint; break;
      case store::StackUse::Compile: out[stack] = StackKind::Compile; break;
      case store::StackUse::Autotune: out[stack] = StackKind::Autotune; break;
    }
  });
  return out;
}

bool compiler(const std::string& comm) {
  static const char* const names[] = {"ptxas", "nvcc", "cicc", "nvlink", "fatbinary", "cc1", "cc1plus", "gcc", "g++",
                                      "clang", "clang++", "as", "ld", "ld.lld", "x86_64-linux-gnu-gcc"};
  for (const char* n : names)
    if (comm == n) return true;
  return false;
}

// The loop thread of a process: its main thread where it has an account,
// else the thread that synchronises most.
const ThreadAccount* loop_thread(const std::vector<const ThreadAccount*>& threads) {
  for (const auto* a : threads)
    if (a->tid == a->pid) return a;
  const ThreadAccount* best = nullptr;
  for (const auto* a : threads)
    if (!best || a->syncs > best->syncs) best = a;
  return best;
}

// "step 48 ms: sleeping (timer) 62% at train.py:235 · launching 18% on
// pt_autograd_0 · ...": the parts by class and thread, largest first, each
// with its largest line.
std::string path_text(const ProcessPath& p) {
  struct Group {
    int64_t ns = 0, top = 0;
    const PathPart* line = nullptr;
    std::string thread;
    uint32_t pid = 0;
  };
  std::map<std::tuple<PathClass, uint32_t, uint32_t>, Group> groups;
  for (const auto& part : p.parts) {
    Group& g = groups[{part.cls, part.pid, part.tid}];
    g.ns += part.ns;
    g.thread = part.thread;
    g.pid = part.pid;
    if (part.frame && part.ns > g.top) g.top = part.ns, g.line = &part;
  }
  std::vector<std::pair<std::tuple<PathClass, uint32_t, uint32_t>, Group>> order(groups.begin(), groups.end());
  std::sort(order.begin(), order.end(), [](const auto& x, const auto& y) { return x.second.ns > y.second.ns; });
  const double total = double(std::max<int64_t>(1, p.covered_ns()));
  std::string text = p.steps >= 3 ? "step " + format_duration(p.step_ns) + ": " : format_duration(p.covered_ns()) + ": ";
  for (size_t i = 0; i < order.size() && i < 5; i++) {
    const auto& [key, g] = order[i];
    const auto& [cls, pid, tid] = key;
    if (double(g.ns) < 0.01 * total) break;
    text += (i ? " · " : "") + std::string(path_class_words(cls)) + " " + pct(double(g.ns) / total);
    if (tid != p.tid) text += " on " + (g.thread.empty() ? "thread " + std::to_string(tid) : g.thread) +
                              (pid != p.pid ? " (pid " + std::to_string(pid) + ")" : "");
    if (g.line) text += " at " + g.line->frame->where();
  }
  if (p.launches_unseen) text += " (over the whole trace: launches outside the launch windows count as host work)";
  return text;
}


using Ranges = std::vector<std::pair<int64_t, int64_t>>;

// What each stack was doing (stack_kinds), and the autotuners' stacks.
struct StackKinds {
  std::map<int64_t, StackKind> kinds;
  std::set<int64_t> tuning;

  explicit StackKinds(const RuleContext& ctx) : kinds(stack_kinds(ctx)) {
    for (const auto& [stack, kind] : kinds)
      if (kind == StackKind::Autotune) tuning.insert(stack);
  }
  StackKind of(int64_t stack) const {
    auto it = kinds.find(stack);
    return it == kinds.end() ? StackKind::User : it->second;
  }
};

// What one process's path is built from: its loop thread's account.
struct PathInputs {
  const RuleContext& ctx;
  const ThreadAccount& a;
  const StackKinds& stacks;
};

// The path's frame before it is walked (none: the loop has no time to judge).
std::optional<ProcessPath> base_path(const ThreadAccount& a) {
  ProcessPath base;
  base.session_id = a.session_id;
  base.pid = a.pid;
  base.tid = a.tid;
  base.thread = a.name;
  // Whole steps where the loop has them (warm-up, a first compile, stays
  // out), else its time after start-up.
  base.steps = a.steps;
  base.from_ns = a.steps >= 3 ? a.steps_from_ns : std::max(a.from_ns, a.startup_end_ns);
  // Without steps, to its last GPU work: what follows is the exit's teardown
  // (frees, a compile pool shutting down).
  base.to_ns = a.steps >= 3 ? a.steps_to_ns : a.gpu_work_end_ns > base.from_ns ? a.gpu_work_end_ns : a.to_ns;
  if (base.to_ns <= base.from_ns) return std::nullopt;
  base.step_ns = a.step_ns;
  base.step_marker = a.step_marker;
  base.host_context = a.host_context;
  return base;
}

// Walks the loop thread over `ranges`, again as a sync storm where the
// walk found one the account did not.
std::unique_ptr<Walker> walk_path(const PathInputs& in, ProcessPath& p, const Ranges& ranges) {
  auto walk = [&](bool storm) {
    auto w =
        std::make_unique<Walker>(in.ctx, in.a.session_id, in.a.pid, storm, p.from_ns, p.to_ns - p.from_ns);
    w->tuning = &in.stacks.tuning;
    w->hides = !p.launches_unseen;
    w->nvml_busy = p.gpu_busy;
    for (const auto& [lo, hi] : ranges) w->walk(in.a.pid, in.a.tid, lo, hi, PathVia::Own, 0);
    w->finish(p.probed_ns);
    return w;
  };
  p.sync_storm = sync_storm(in.a);
  auto w = walk(p.sync_storm);
  // Synchronisations on the path, where the loop thread has others do them
  // (JAX's worker threads read values back for it).
  const double per_s = double(w->syncs) * 1e9 / double(p.probed_ns);
  const double per_step = p.steps >= 3 ? per_s * double(p.step_ns) / 1e9 : 0;
  if (!p.sync_storm &&
      (per_step >= kMinSyncsPerStep || (per_s >= kMinSyncsPerSecond && !gpu_paced_syncs(in.a)))) {
    p.sync_storm = true;
    w = walk(true);
  }
  p.syncs = w->syncs;
  return w;
}

// The CPU samples outside calls of the threads on the path, and the lines
// at which each of them launches.
struct PathSamples {
  std::map<std::tuple<uint32_t, uint32_t, int64_t>, std::vector<std::pair<int64_t, int64_t>>>
      by_second;  // (pid, tid, sec) -> (stack, samples)
  std::map<std::pair<uint32_t, uint32_t>, std::set<std::string>> launch_lines;
};

PathSamples load_samples(const PathInputs& in, const Walker& w) {
  const RuleContext& ctx = in.ctx;
  PathSamples out;
  std::set<std::pair<uint32_t, uint32_t>> on_path;
  for (const auto& [k, b] : w.buckets) on_path.insert({std::get<0>(k), std::get<1>(k)});
  const store::Window window = ctx.store_window();
  for (const auto& [pid, tid] : on_path) {
    store::each_second_samples(ctx.db, window, in.a.session_id, pid, tid, [&](const store::SecondSamples& s) {
      out.by_second[{pid, tid, s.second}].emplace_back(s.stack_id, s.samples);
    });
    store::each_launch_stack(ctx.db, window, in.a.session_id, pid, tid, [&](int64_t stack) {
      if (auto f = ctx.frame_of(stack)) out.launch_lines[{pid, tid}].insert(f->where());
    });
  }
  return out;
}

// Adds a thread's on-CPU time in one second to the path's parts, each
// slice's share where the second's time lay.
struct SecondParts {
  std::map<PartKey, Acc>& parts;
  const Bucket& b;

  void add(PartKey k, int64_t ns) const {
    if (ns <= 0) return;
    auto& x = parts[std::move(k)];
    x.ns += ns;
    x.times++;
    for (int i = 0; i < kPathSlices; i++)
      x.slices[size_t(i)] +=
          b.on_cpu ? int64_t(double(ns) * double(b.slices[size_t(i)]) / double(b.on_cpu)) : 0;
  }
};

// One thread's on-CPU path time in one second: per-op dispatch (samples in
// the framework's Python or at lines that launch, and at least a launch's
// worth of host time for each launch of that second), compiling,
// serialising, and the rest at the lines its CPU samples name.
// launches_here: the thread launches on the path.
void split_second(const PathInputs& in, const ProcessPath& p,
                  const std::tuple<uint32_t, uint32_t, PathVia, int64_t>& k, const Bucket& b, bool launches_here,
                  PathSamples& samples, std::map<PartKey, Acc>& parts) {
  const auto& [pid, tid, via, sec] = k;
  const SecondParts second{parts, b};
  const int64_t allowance = std::min<int64_t>(b.on_cpu, int64_t(b.launches * double(kDispatchPerLaunchNs)));
  auto it = samples.by_second.find({pid, tid, sec});
  std::vector<std::pair<int64_t, int64_t>> user, framework;  // (stack, samples): its own work, dispatch
  int64_t total = 0;
  std::map<StackKind, std::map<int64_t, int64_t>> other;  // compile, checkpoint: by stack
  if (it != samples.by_second.end()) {
    const auto& lines = samples.launch_lines[{pid, tid}];
    for (const auto& [stack, n] : it->second) {
      total += n;
      StackKind kind = in.stacks.of(stack);
      // No Python frame on a thread that launches: the framework's C++
      // (the autograd engine's backward).
      if (stack < 0 && launches_here) kind = StackKind::Framework;
      if (kind == StackKind::User && stack >= 0) {
        auto f = in.ctx.frame_of(stack);
        if (f && lines.count(f->where())) kind = StackKind::Framework;
      }
      if (kind == StackKind::Framework) framework.emplace_back(stack, n);
      else if (kind == StackKind::User) user.emplace_back(stack, n);
      else other[kind][stack] += n;
    }
  }
  const int64_t origin = b.origin;
  if (!total) {
    // No samples (none there, or --cpu-sample-hz 0): host time of at
    // most kMaxDispatchNs a launch is per-op dispatch (eager PyTorch's
    // 10-30 us), more is the thread's own work beyond a launch's worth.
    const int64_t dispatch = double(b.on_cpu) <= b.launches * double(kMaxDispatchNs) ||
                                     (b.launches == 0 && launches_here && tid != p.tid)
                                 ? b.on_cpu
                                 : allowance;
    second.add({PathClass::Launching, via, pid, tid, origin, 0, {}}, dispatch);
    second.add({PathClass::OnCpu, via, pid, tid, origin, 0, {}}, b.on_cpu - dispatch);
    return;
  }
  if (b.on_cpu <= 0) return;  // all of its second hidden
  // The second's samples fell in its hidden host work too (Walker::finish):
  // the thread's own code after its last launch, off the path. Their share,
  // by time, comes out of the own-code samples before the rest is split, or
  // the hidden work's lines would take the dispatch's time.
  double user_samples = 0;
  for (const auto& [stack, n] : user) user_samples += double(n);
  const double hidden_samples =
      std::min(user_samples, double(total) * double(b.hidden) / double(b.on_cpu + b.hidden));
  const double user_keep = user_samples > 0 ? 1.0 - hidden_samples / user_samples : 0;
  const double kept = double(total) - hidden_samples;
  auto scaled = [&](double n) { return int64_t(double(b.on_cpu) * n / kept); };
  for (const auto& [kind, stacks] : other)
    for (const auto& [stack, n] : stacks)
      second.add({kind == StackKind::Compile    ? PathClass::Compile
                  : kind == StackKind::Autotune ? PathClass::Autotune
                                                : PathClass::Checkpoint,
                  via, pid, tid, stack, 0, {}},
                 scaled(n));
  int64_t user_ns = 0, dispatching = 0;
  for (const auto& [stack, n] : user) user_ns += scaled(double(n) * user_keep);
  for (const auto& [stack, n] : framework) {
    dispatching += scaled(n);
    // At the line that dispatched.
    second.add({PathClass::Launching, via, pid, tid, stack >= 0 ? stack : origin, 0, {}}, scaled(n));
  }
  // The launches of that second took at least their allowance of it:
  // what the samples did not give dispatch comes out of the thread's own work.
  const int64_t extra = std::clamp<int64_t>(allowance - dispatching, 0, user_ns);
  second.add({PathClass::Launching, via, pid, tid, origin, 0, {}}, extra);
  const int64_t left = user_ns - extra;
  for (const auto& [stack, n] : user)
    second.add({PathClass::OnCpu, via, pid, tid, stack >= 0 ? stack : origin, 0, {}},
               user_ns ? left * scaled(double(n) * user_keep) / user_ns : 0);
}

// Splits the on-CPU time of the walk's buckets into parts, second by second.
void split_on_cpu(const PathInputs& in, const ProcessPath& p, Walker& w) {
  PathSamples samples = load_samples(in, w);
  // Threads that launch on the path: their time with no Python frame is
  // the framework's C++ (the autograd engine's backward), whether or not
  // that second's launches were seen.
  std::set<std::pair<uint32_t, uint32_t>> launching_threads;
  for (const auto& [k, b] : w.buckets)
    if (b.launches > 0) launching_threads.insert({std::get<0>(k), std::get<1>(k)});
  for (const auto& [k, b] : w.buckets) {
    const bool launches_here = launching_threads.count({std::get<0>(k), std::get<1>(k)}) > 0;
    split_second(in, p, k, b, launches_here, samples, w.parts);
  }
}

// The tracer's own cost: each probed launch trapped twice (entry and
// return, ~2 us on the H100 VM: docs/performance.md; more where the
// launch function's first instruction is single-stepped: the windows say
// what the agent measured), on the path's threads, in the very windows
// the path covers. It is not the workload's: out of the launching and
// out of the step.
void remove_tracer_cost(const PathInputs& in, ProcessPath& p, Walker& w) {
  double probed_launches = 0;
  for (const auto& [k, b] : w.buckets) probed_launches += b.launches;
  p.launches = probed_launches;
  int64_t launching = 0;
  for (const auto& [k, v] : w.parts) launching += k.cls == PathClass::Launching ? v.ns : 0;
  const int64_t trap_ns = in.ctx.launch_trap_ns(in.a.session_id, p.from_ns, p.to_ns);
  const int64_t tracer = std::min<int64_t>(launching, int64_t(probed_launches * double(trap_ns)));
  if (tracer <= 0 || launching <= 0) return;
  const double keep = 1.0 - double(tracer) / double(launching);
  for (auto& [k, v] : w.parts)
    if (k.cls == PathClass::Launching) {
      v.ns = int64_t(double(v.ns) * keep);
      for (auto& x : v.slices) x = int64_t(double(x) * keep);
    }
  const double covered = 1.0 - double(tracer) / double(p.probed_ns);
  p.probed_ns -= tracer;
  for (auto& x : p.slice_ns) x = int64_t(double(x) * covered);
  p.tracer_ns = tracer;
}

// A thread of the process that itself waits for other processes on the
// path (a pin-memory thread fed by loader workers) is part of the input
// pipeline: the path through it is input, not a wait for a sibling.
void relabel_feeders(const ProcessPath& p, std::map<PartKey, Acc>& parts) {
  std::map<uint32_t, std::pair<int64_t, int64_t>> helper;  // tid: (input ns, all ns)
  for (const auto& [k, v] : parts)
    if (k.pid == p.pid && k.tid != p.tid) {
      auto& h = helper[k.tid];
      h.second += v.ns;
      if (k.via == PathVia::Input || k.cls == PathClass::Input) h.first += v.ns;
    }
  std::set<uint32_t> feeders;
  for (const auto& [tid, h] : helper)
    if (double(h.first) >= kFeederShare * double(h.second)) feeders.insert(tid);
  if (feeders.empty()) return;
  std::map<PartKey, Acc> relabelled;
  for (auto& [k, v] : parts) {
    PartKey key = k;
    if (key.pid == p.pid && feeders.count(key.tid) && key.via != PathVia::Own) key.via = PathVia::Input;
    Acc& x = relabelled[key];
    x.ns += v.ns;
    x.times += v.times;
    for (int i = 0; i < kPathSlices; i++) x.slices[size_t(i)] += v.slices[size_t(i)];
  }
  parts = std::move(relabelled);
}

// The parts as the path's, each classed by what its stack or process was
// doing, largest first, and the path's text.
void name_parts(const PathInputs& in, ProcessPath& p, const std::map<PartKey, Acc>& parts) {
  const RuleContext& ctx = in.ctx;
  for (const auto& [k, v] : parts) {
    PathPart part{k.cls, k.via, k.pid, k.tid, {}, k.stack, ctx.frame_of(k.stack), k.by_pid, k.by_comm, v.ns,
                  v.times, v.slices};
    // A wait inside a compiler (for its worker processes, their results)
    // is compiling too.
    if ((k.cls == PathClass::Timer || k.cls == PathClass::Sleeping || k.cls == PathClass::Input) && k.stack >= 0 &&
        in.stacks.of(k.stack) == StackKind::Compile)
      part.cls = PathClass::Compile;
    // A compiler's own process the loop waited for (ptxas for XLA and
    // Triton, nvcc, a C++ compiler for inductor's extensions).
    if (k.pid != p.pid && (k.cls == PathClass::OnCpu || k.cls == PathClass::Launching) && compiler(ctx.comm(k.pid)))
      part.cls = PathClass::Compile;
    // Whatever an autotuner's search does (its launches, syncs,
    // workspace allocations, compiles, waits) is the search's; a wait for
    // a CPU or the disk inside it stays what it is.
    if (k.stack >= 0 && in.stacks.of(k.stack) == StackKind::Autotune && k.cls != PathClass::Runnable &&
        k.cls != PathClass::Throttled && k.cls != PathClass::DiskRead && k.cls != PathClass::DiskWrite)
      part.cls = PathClass::Autotune;
    part.thread = ctx.thread_name(in.a.session_id, k.pid, k.tid, p.to_ns);
    p.parts.push_back(std::move(part));
  }
  std::sort(p.parts.begin(), p.parts.end(), [](const PathPart& x, const PathPart& y) { return x.ns > y.ns; });
  p.text = path_text(p);
}

// The path over `ranges` of the judged time (none: it covers nothing).
std::optional<ProcessPath> path_over(const PathInputs& in, ProcessPath p, const Ranges& ranges) {
  for (const auto& [lo, hi] : ranges) p.probed_ns += hi - lo;
  if (p.probed_ns <= 0) return std::nullopt;
  const std::unique_ptr<Walker> w = walk_path(in, p, ranges);
  for (const auto& [lo, hi] : ranges) spread(p.slice_ns, p.from_ns, p.to_ns - p.from_ns, lo, hi - lo);
  split_on_cpu(in, p, *w);
  remove_tracer_cost(in, p, *w);
  relabel_feeders(p, w->parts);
  name_parts(in, p, w->parts);
  return p;
}

// The path of the process whose loop thread's account is `in.a`.
std::optional<ProcessPath> process_path(const PathInputs& in) {
  const ThreadAccount& a = in.a;
  std::optional<ProcessPath> base = base_path(a);
  if (!base) return std::nullopt;
  // How busy the GPU was over the steps judged, not over the account's span:
  // a start-up with an idle GPU (a dataset read first, a model built) would
  // pass the loop's queue for one that drains.
  base->gpu_busy = in.ctx.gpu_busy(a.session_id, a.pid, base->from_ns, base->to_ns);
  // Launches probed in windows only: the path covers the windows, since
  // outside them launching would pass for host work.
  const auto windows = in.ctx.launch_windows(a.session_id, base->from_ns, base->to_ns);
  Ranges ranges = windows;
  if (ranges.empty()) ranges.emplace_back(base->from_ns, base->to_ns);
  auto path = path_over(in, *base, ranges);
  if (!path) return std::nullopt;
  // Windows that held too little of a short trace to judge (a 4-s attach
  // had 242 ms, 4 of its 91 steps): the whole trace, its steps counted by
  // their markers, for what is seen outside the windows too (syncs,
  // copies, waits off the CPU); launching there passes for host work, so
  // the rules that judge host time pass it over (launches_unseen).
  if (!windows.empty() && !path->judged_enough()) {
    ProcessPath whole = *base;
    whole.launches_unseen = true;
    if (a.marked_steps >= 3 && a.steps_to_ns > a.steps_from_ns) {
      whole.from_ns = a.steps_from_ns;
      whole.to_ns = a.steps_to_ns;
      whole.steps = a.marked_steps;
      whole.step_ns = (whole.to_ns - whole.from_ns) / whole.steps;
      whole.gpu_busy = in.ctx.gpu_busy(a.session_id, a.pid, whole.from_ns, whole.to_ns);
    }
    if (whole.to_ns - whole.from_ns >= kMinJudgedNs)
      if (auto w = path_over(in, whole, {{whole.from_ns, whole.to_ns}})) path = std::move(w);
  }
  return path;
}

}  // namespace

std::string_view path_class_key(PathClass c) {
  static constexpr std::string_view keys[kPathClasses] = {
      "gpu_busy", "launching", "sync_idle", "copies", "allocations", "pinning", "collectives", "other_calls", "on_cpu",
      "compile", "checkpoint", "runnable", "throttled", "disk_read", "disk_write", "timer", "sleeping", "input", "in_flight",
      "autotune"};
  return keys[int(c)];
}

std::string_view path_class_words(PathClass c) {
  static constexpr std::string_view words[kPathClasses] = {
      "sync wait, GPU busy", "launching", "syncs returning at once", "copies", "allocations", "pinning host memory",
      "collectives", "other CUDA calls", "on-CPU", "compiling", "serialising a checkpoint", "waiting for a CPU", "throttled by its CPU limit",
      "disk read", "disk write", "sleeping (timer)", "asleep, other", "waiting for another process",
      "a call in flight", "autotuning"};
  return words[int(c)];
}

bool path_class_on_host(PathClass c) {
  switch (c) {
    case PathClass::Launching:
    case PathClass::OnCpu:
    case PathClass::Compile:
    case PathClass::Autotune:
    case PathClass::Checkpoint:
    case PathClass::Alloc:
    case PathClass::Pin:
    case PathClass::OtherCall: return true;
    default: return false;
  }
}

std::string_view path_via_key(PathVia v) {
  switch (v) {
    case PathVia::Own: return "own";
    case PathVia::Lock: return "lock";
    case PathVia::Gil: return "gil";
    case PathVia::Input: return "input";
  }
  return "own";
}

int64_t ProcessPath::ns(PathClass c) const {
  int64_t n = 0;
  for (const auto& p : parts)
    if (p.cls == c) n += p.ns;
  return n;
}

double ProcessPath::share(PathClass c) const {
  return covered_ns() > 0 ? double(ns(c)) / double(covered_ns()) : 0;
}

double ProcessPath::saving(double s, bool on_host) const {
  if (!on_host || !gpu_busy) return s;
  return std::min(s, std::max(0.0, 1.0 - *gpu_busy));
}

std::vector<ProcessPath> build_paths(const RuleContext& ctx) {
  std::vector<ProcessPath> out;
  std::map<std::pair<int64_t, uint32_t>, std::vector<const ThreadAccount*>> by_process;
  for (const auto& a : ctx.accounts) by_process[{a.session_id, a.pid}].push_back(&a);
  const StackKinds stacks(ctx);
  for (const auto& [key, threads] : by_process) {
    const ThreadAccount* a = loop_thread(threads);
    if (!a) continue;
    if (auto path = process_path({ctx, *a, stacks})) out.push_back(std::move(*path));
  }
  return out;
}

bool ProcessPath::judged_enough() const {
  const int64_t covered = covered_ns();
  if (covered >= kMinJudgedNs) return true;
  const bool windowed = covered < to_ns - from_ns;
  if (!windowed || steps < 3 || step_ns <= 0) return false;
  return (covered >= kMinWindowedNs && covered >= kMinWindowedSteps * step_ns) ||
         (covered >= kMinManyStepsNs && covered >= kManyWindowedSteps * step_ns);
}

}  // namespace causeway::analyze
