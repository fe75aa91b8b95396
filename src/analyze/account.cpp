// SPDX-License-Identifier: Apache-2.0
// The time account of each dispatcher thread (include/causeway/analyze/account.h):
// one pass over the thread's recorded calls and off-CPU intervals, sorted by
// time. Calls are outermost (a nested call is not recorded), so they do not
// overlap; off-CPU time inside a call is the call's (a sync that sleeps
// waits for the GPU); off-CPU time outside calls is the thread's own, split
// by what it waited for.
#include "causeway/analyze/account.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "causeway/events.h"
#include "causeway/model/offcpu.h"
#include "causeway/store/path_reads.h"
#include "causeway/store/path_rule_reads.h"
#include "rule_context.h"
#include "timeline.h"

namespace causeway::analyze {

namespace {

constexpr int64_t kAfterSyncCapNs = 1'000'000;  // a gap after a sync longer than this is another phase
constexpr int64_t kMinThreadCalls = 20;       // fewer calls: no account
constexpr size_t kMaxThreads = 8;
constexpr int64_t kMinMarkers = 5;
constexpr double kMinMarkerCover = 0.5;       // a step marker recurs across half the activity
constexpr double kMinLateCover = 0.3;         // ... or a third of it, up to its end
constexpr double kLateEnd = 0.1;
// A line marks steps when it recurs steadily: its slowest tenth of intervals
// at most this many times its median one (a jittery input wait passes, a
// burst of calls then a long pause does not).
constexpr double kMaxStepSpread = 4.0;
constexpr double kBurstJump = 4.0;  // gaps this many times longer than the rest separate bursts
// A wait for a sibling thread that itself slept this share of the wait until
// another process woke it (a pin-memory thread waiting for loader workers)
// is a wait for input.
constexpr double kFollowedInput = 0.5;
// Start-up ends at the last start-up call before a quiet stretch this long
// (or this share of the thread's span, if longer).
constexpr int64_t kStartupQuietNs = 2'000'000'000;
constexpr double kStartupQuietShare = 0.25;

using Kind = CallKind;
using Call = TimelineCall;
using Off = TimelineOff;

// Another thread of the process, as it spent a stretch of time: runnable
// (waiting for a CPU), asleep until another process woke it (its input),
// or else running or in its own calls.
struct SiblingTime {
  int64_t runnable = 0, input = 0, other_off = 0;
};
// Who ran while a thread waited for a CPU, by task (pid and name).
using Preemptors = std::map<std::pair<uint32_t, std::string>, OtherTask>;
void add_preemption(Preemptors& ran, const Off& o, int64_t ns) {
  OtherTask& p = ran[{o.by_pid, o.by_comm}];
  p.pid = o.by_pid;
  p.name = o.by_comm;
  p.ns += ns;
  p.times++;
}

class Siblings {
 public:
  Siblings(const RuleContext& ctx, int64_t session, uint32_t pid) : ctx_(ctx), session_(session), pid_(pid) {}

  // Also adds who ran while it was runnable to `ran`, scaled by `scale`.
  SiblingTime during(uint32_t tid, int64_t a, int64_t b, Preemptors* ran = nullptr, double scale = 1) {
    SiblingTime t;
    const Timeline& tl = ctx_.timelines().get(session_, pid_, tid);
    for (auto o = tl.offs_from(a); o != tl.offs.end() && o->ts < b; ++o) {
      const int64_t ns = overlap_ns(o->ts, o->end, a, b);
      if (o->state == CW_STATE_RUNNING) {
        t.runnable += ns;
        if (ran) add_preemption(*ran, *o, int64_t(double(ns) * scale));
      } else if (o->state == CW_STATE_SLEEPING && o->waker_pid && o->waker_pid != pid_) t.input += ns;
      else t.other_off += ns;
    }
    return t;
  }

 private:
  const RuleContext& ctx_;
  int64_t session_;
  uint32_t pid_;
};

// Splits each sleep outside calls by what it waited for, and sums, per
// thread of the process it waited for, what that thread did meanwhile.
void classify_sleeps(Timeline& tl, uint32_t pid, uint32_t tid, Siblings& siblings,
                     std::map<std::pair<uint32_t, bool>, WaitedFor>& waited, std::map<uint32_t, OtherTask>& via,
                     std::map<std::pair<uint32_t, bool>, Preemptors>& waited_ran) {
  for (Off& o : tl.offs) {
    if (o.state != CW_STATE_SLEEPING) continue;
    const bool sibling_woke = o.waker_pid == pid && o.waker_tid && o.waker_tid != tid;
    if (o.wait == CW_WAIT_GIL) {
      o.part = &TimeSplit::gil;
      o.waited_for = o.holder_tid && o.holder_tid != tid ? o.holder_tid : sibling_woke ? o.waker_tid : 0;
    } else if (timer_syscall(o.syscall)) {
      o.part = &TimeSplit::timer;
    } else if (o.waker_pid && o.waker_pid != pid) {
      o.part = &TimeSplit::input;
    } else if (sibling_woke) {
      // Follow the thread that woke it: waiting for a thread that waits for
      // its input is waiting for input; else it waited on that thread.
      const SiblingTime s = siblings.during(o.waker_tid, o.ts, o.end);
      o.waited_for = o.waker_tid;
      if (double(s.input) >= kFollowedInput * double(o.end - o.ts)) {
        o.part = &TimeSplit::input;
        OtherTask& v = via[o.waker_tid];
        v.pid = pid;
        v.tid = o.waker_tid;
        v.same_process = true;
        v.ns += tl.outside_calls(o, o.ts, o.end);
        v.times++;
      } else {
        o.part = &TimeSplit::lock;
      }
    } else {
      o.part = &TimeSplit::sleeping;
    }
    if (!o.waited_for || (o.part != &TimeSplit::gil && o.part != &TimeSplit::lock)) continue;
    const int64_t ns = tl.outside_calls(o, o.ts, o.end);
    if (ns <= 0) continue;
    const bool gil = o.part == &TimeSplit::gil;
    WaitedFor& w = waited[{o.waited_for, gil}];
    w.tid = o.waited_for;
    w.gil = gil;
    w.ns += ns;
    w.times++;
    const double scale = double(ns) / double(std::max<int64_t>(1, o.end - o.ts));
    const SiblingTime s = siblings.during(o.waited_for, o.ts, o.end, &waited_ran[{o.waited_for, gil}], scale);
    w.runnable_ns += int64_t(double(s.runnable) * scale);
    w.input_ns += int64_t(double(s.input) * scale);
    w.on_cpu_ns += std::max<int64_t>(0, ns - int64_t(double(s.runnable + s.input + s.other_off) * scale));
  }
}

// The end of start-up: the last start-up call before a quiet stretch (a
// trace that began mid-run has none near its start: then no start-up), and
// never before the thread's first GPU work (a launch, copy, synchronisation
// or collective): imports, context creation and model building before it are
// start-up however long they take, as the torch profiler's warm-up is.
int64_t startup_end(const Timeline& tl, int64_t from, int64_t to) {
  const int64_t quiet = std::max(kStartupQuietNs, int64_t(kStartupQuietShare * double(to - from)));
  int64_t end = 0;
  for (const Call& c : tl.calls) {
    if (!c.startup) continue;
    if (!end) {
      if (c.ts - from > quiet) break;
      end = c.end;
      continue;
    }
    if (c.ts - end > quiet) break;
    end = std::max(end, c.end);
  }
  for (const Call& c : tl.calls) {
    if (c.startup) continue;
    if (c.kind == Kind::Launch || c.kind == Kind::SampledLaunch || c.kind == Kind::SyncBusy ||
        c.kind == Kind::SyncIdle || c.kind == Kind::Copy || c.kind == Kind::Collective)
      return std::max(end, c.ts);
  }
  return end;
}

// Steady repetitions of one site: bursts (a site called several times a
// step, e.g. a list comprehension's allocations on one line, is one
// occurrence: its gaps fall in two groups, and the short ones are inside a
// burst) and whether they recur steadily.
std::vector<int64_t> steady_occurrences(std::vector<int64_t> ts) {
  if (int64_t(ts.size()) < kMinMarkers) return {};
  std::sort(ts.begin(), ts.end());
  std::vector<int64_t> gaps;
  for (size_t i = 1; i < ts.size(); i++) gaps.push_back(ts[i] - ts[i - 1]);
  std::vector<int64_t> sorted = gaps;
  std::sort(sorted.begin(), sorted.end());
  // The widest jump between consecutive gap lengths, if it is a clear one
  // (4x), splits gaps inside a burst from gaps between bursts.
  int64_t split = 0;
  double widest = kBurstJump;
  for (size_t i = 1; i < sorted.size(); i++) {
    const double jump = double(sorted[i]) / double(std::max<int64_t>(1, sorted[i - 1]));
    if (jump >= widest) widest = jump, split = sorted[i - 1] + 1;
  }
  std::vector<int64_t> starts = {ts[0]};
  for (size_t i = 1; i < ts.size(); i++)
    if (gaps[i - 1] >= split) starts.push_back(ts[i]);
  if (int64_t(starts.size()) < kMinMarkers) return {};
  std::vector<int64_t> periods;
  for (size_t i = 1; i < starts.size(); i++) periods.push_back(starts[i] - starts[i - 1]);
  std::sort(periods.begin(), periods.end());
  const double median = double(periods[periods.size() / 2]);
  const double p90 = double(periods[std::min(periods.size() - 1, periods.size() * 9 / 10)]);
  if (median <= 0 || p90 > kMaxStepSpread * median) return {};
  return starts;
}


using ThreadKey = store::ThreadId;

// The threads with at least kMinThreadCalls calls, the busiest kMaxThreads of
// them. A framework's tensor allocations are not in the account: the driver
// calls they make are rows of their own, and the rest is host work.
std::vector<ThreadKey> busiest_threads(const RuleContext& ctx) {
  return store::busiest_call_threads(ctx.db, ctx.store_window(), kMinThreadCalls, int64_t(kMaxThreads));
}

// What a thread's sleeps outside calls waited for, as classify_sleeps sums it.
struct Waits {
  std::map<std::pair<uint32_t, bool>, WaitedFor> waited;
  std::map<uint32_t, OtherTask> via;
  std::map<std::pair<uint32_t, bool>, Preemptors> waited_ran;
};

// Imports are start-up too where they carry on into the first steps (an
// optimizer's first step imports torch._dynamo, seconds of Python):
// seconds in which most of the thread's samples outside calls are inside
// an import extend it, each within a quiet stretch of the last.
void extend_startup_by_imports(const RuleContext& ctx, const ThreadKey& k, ThreadAccount& a) {
  constexpr int64_t kSecond = 1'000'000'000;
  for (const store::ImportSecond& s :
       store::import_seconds(ctx.db, k.session, k.tid, a.startup_end_ns - kSecond, a.to_ns)) {
    const int64_t sec = s.second * kSecond;
    // A second that began before the current end is partly start-up
    // already: only later ones extend it (no more than a second of steps
    // counted as start-up).
    if (sec < a.startup_end_ns || 2 * s.importing < s.samples || sec > a.startup_end_ns + kStartupQuietNs)
      continue;
    a.startup_end_ns = std::max(a.startup_end_ns, std::min(a.to_ns, sec + kSecond));
  }
}

// The end of the thread's start-up; cap: the latest it may be.
void find_startup(const RuleContext& ctx, const ThreadKey& k, const Timeline& tl, std::optional<int64_t> cap,
                  ThreadAccount& a) {
  // A job already running when the trace began has no start-up in it.
  a.startup_end_ns = ctx.attached(k.pid) ? a.from_ns : startup_end(tl, a.from_ns, a.to_ns);
  if (a.startup_end_ns && !ctx.attached(k.pid)) extend_startup_by_imports(ctx, k, a);
  if (cap && a.startup_end_ns > *cap) a.startup_end_ns = std::max(a.from_ns, *cap);
}

// The times that mark a thread's steps, and what marks them: a marker site
// (op, stack), or else a Python line.
struct StepMarks {
  std::vector<int64_t> marks;
  std::pair<int64_t, int64_t> best_site{-1, -1};
  std::string line_marker;
};

// Whether occurrences from `first` to `last` recur across enough of the
// thread's activity after start-up (find_steps).
struct Coverage {
  int64_t activity, gpu_work_end;
  bool operator()(int64_t first, int64_t last) const {
    const double span = double(last - first);
    return span >= kMinMarkerCover * double(activity) ||
           (span >= kMinLateCover * double(activity) &&
            double(gpu_work_end - last) <= kLateEnd * double(activity));
  }
};

// The least frequent marker site that covers; counts the steps the most
// frequent one took, covering or not.
void marker_steps(const Timeline& tl, const Coverage& covers, ThreadAccount& a, StepMarks& m) {
  std::map<std::pair<int64_t, int64_t>, std::vector<int64_t>> sites;  // (op, stack) -> ends
  for (const Call& c : tl.calls)
    if (c.marker) sites[{c.op_id, c.stack_id}].push_back(c.end);
  for (auto& [site, ends] : sites) {
    a.markers = std::max(a.markers, int64_t(ends.size()));
    if (int64_t(ends.size()) < kMinMarkers || !covers(ends.front(), ends.back())) continue;
    if (m.marks.empty() || ends.size() < m.marks.size()) m.marks = ends, m.best_site = site;
  }
}

// The least frequent Python line after start-up that recurs steadily and
// covers.
void line_steps(const RuleContext& ctx, const Timeline& tl, const Coverage& covers, int64_t startup_end_ns,
                StepMarks& m) {
  std::map<std::string, std::vector<int64_t>> lines;  // where -> call starts
  for (const Call& c : tl.calls) {
    if (c.stack_id < 0 || c.startup || c.ts < startup_end_ns) continue;
    auto f = ctx.frame_of(c.stack_id);
    if (!f) continue;
    lines[f->where()].push_back(c.ts);
  }
  for (auto& [where, ts] : lines) {
    auto starts = steady_occurrences(ts);
    if (starts.empty()) continue;
    if (!covers(starts.front(), starts.back())) continue;
    // The least frequent line; lines that recur as often (within 2%:
    // one loop's lines) give way to the one that comes first in it.
    const bool fewer = double(starts.size()) < 0.98 * double(m.marks.size());
    const bool as_often = double(starts.size()) <= 1.02 * double(m.marks.size());
    if (m.marks.empty() || fewer || (as_often && starts.front() < m.marks.front()))
      m.marks = std::move(starts), m.line_marker = where;
  }
}

// Steps. First, among marker sites (op, stack) recurring at least
// kMinMarkers times across most of the thread's activity, the least
// frequent: the outermost loop (an inner loop's .item() recurs more
// often). Steps need not be regular: a loop that waits for its input is
// jittery. Else a Python line that recurs steadily, whatever its calls
// (sizes, counts and shapes may change from step to step).
// Markers and lines alike must recur across half the activity after
// start-up (a start-up as long as the loop hid its every step), or
// across a third of it up to its end: a loop that began after seconds of
// warm-up (JAX compiling its step on the first call) runs to the end.
StepMarks find_steps(const RuleContext& ctx, const Timeline& tl, ThreadAccount& a) {
  const int64_t activity = a.to_ns - std::max(a.from_ns, a.startup_end_ns);
  int64_t gpu_work_end = 0;  // its last GPU work: what follows is the exit's teardown
  for (const Call& c : tl.calls)
    if (c.kind != Kind::Alloc && c.kind != Kind::Other && c.kind != Kind::Pin)
      gpu_work_end = std::max(gpu_work_end, c.end);
  a.gpu_work_end_ns = gpu_work_end;
  const Coverage covers{activity, gpu_work_end};
  StepMarks m;
  marker_steps(tl, covers, a, m);
  if (m.marks.empty()) line_steps(ctx, tl, covers, a.startup_end_ns, m);
  return m;
}

// A thread's time where launches were probed: in the launch windows where
// there are any (launches probed in windows only), else all of it.
struct ProbedTime {
  const Timeline& tl;
  std::vector<std::pair<int64_t, int64_t>> windows;

  TimeSplit split(int64_t lo_ns, int64_t hi_ns) const {
    if (windows.empty()) return tl.split(lo_ns, hi_ns);
    TimeSplit sum;
    for (const auto& [ws, we] : windows) {
      const int64_t lo = std::max(lo_ns, ws), hi = std::min(hi_ns, we);
      if (lo >= hi) continue;
      const TimeSplit t = tl.split(lo, hi);
      for (const auto& p : split_parts()) sum.*p.field += t.*p.field;
    }
    return sum;
  }
  bool probed(int64_t lo, int64_t hi) const {
    if (windows.empty()) return true;
    for (const auto& [ws, we] : windows)
      if (lo >= ws && hi <= we) return true;
    return false;
  }
};

// Counts, and the gap after each sync until the thread's next call.
void count_calls(const Timeline& tl, int64_t sampled_rows, ThreadAccount& a) {
  for (size_t i = 0; i < tl.calls.size(); i++) {
    const Call& c = tl.calls[i];
    switch (c.kind) {
      case Kind::Launch: a.launches++; break;
      case Kind::SampledLaunch: break;
      case Kind::SyncBusy: a.syncs++; break;
      case Kind::SyncIdle: a.syncs++, a.syncs_idle++; break;
      case Kind::Copy: a.copies++; break;
      case Kind::Alloc: a.allocations++; break;
      default: break;
    }
    if ((c.kind == Kind::SyncBusy || c.kind == Kind::SyncIdle) && i + 1 < tl.calls.size())
      a.after_sync_ns += std::min(kAfterSyncCapNs, std::max<int64_t>(0, tl.calls[i + 1].ts - c.end));
  }
  a.launches += int64_t(double(sampled_rows) * tl.launches_per_sampled);
}

// The mean step, its split and its marker, over the steps whose launches
// were probed.
void measure_steps(const RuleContext& ctx, const ProbedTime& probed, const StepMarks& m, ThreadAccount& a) {
  const std::vector<int64_t>& marks = m.marks;
  a.markers = std::max(a.markers, int64_t(marks.size()));
  if (marks.size() < size_t(kMinMarkers)) return;
  int64_t steps = 0, total_ns = 0;
  TimeSplit sum;
  // Split runs of consecutive probed steps, not each step: a sampled
  // launch row stands for many launches, and a step shorter than their
  // estimate (an inner loop's) would clip it to the step.
  int64_t run_from = -1, run_to = -1;
  auto flush = [&] {
    if (run_from < 0) return;
    const TimeSplit t = probed.tl.split(run_from, run_to);
    for (const auto& p : split_parts()) sum.*p.field += t.*p.field;
    run_from = -1;
  };
  for (size_t i = 1; i < marks.size(); i++) {
    const int64_t s = marks[i - 1], e = marks[i];
    if (!probed.probed(s, e)) {  // launches unseen in part of it
      flush();
      continue;
    }
    steps++;
    total_ns += e - s;
    if (run_from < 0) run_from = s;
    run_to = e;
  }
  flush();
  a.steps = steps;
  a.step_ns = steps ? total_ns / steps : 0;  // the mean step, as per_step is
  a.steps_from_ns = marks.front();
  a.steps_to_ns = marks.back();
  a.marked_steps = int64_t(marks.size()) - 1;
  for (const auto& p : split_parts()) a.per_step.*p.field = steps ? sum.*p.field / steps : 0;
  if (!steps) return;
  if (!m.line_marker.empty()) {
    a.step_marker = m.line_marker;
  } else {
    a.step_marker = ctx.op_name(m.best_site.first);
    if (auto f = ctx.frame_of(m.best_site.second)) a.step_marker += " at " + f->where();
  }
}

// The other tasks in its time from `from` on: who woke it from sleeps outside
// calls, who ran while it was runnable, the threads it waited for and those
// its input came through; named, largest first.
void account_others(const RuleContext& ctx, const ThreadKey& k, const Timeline& tl, int64_t from,
                    Waits& waits, ThreadAccount& a) {
  std::map<std::pair<uint32_t, uint32_t>, OtherTask> wakers;
  Preemptors preemptors;
  for (const Off& o : tl.offs) {
    const int64_t ns = tl.outside_calls(o, from, a.to_ns);
    if (ns <= 0) continue;
    if (o.state == CW_STATE_SLEEPING && o.waker_pid) {
      auto& w = wakers[{o.waker_pid, o.waker_tid}];
      w.pid = o.waker_pid;
      w.tid = o.waker_tid;
      w.ns += ns;
      w.times++;
    } else if (o.state == CW_STATE_RUNNING) {
      add_preemption(preemptors, o, ns);
    }
  }
  // Its own workers; the others, its neighbours.
  const std::set<uint32_t> workers = store::own_workers(ctx.db, a.pid, k.session);
  auto mark = [&](OtherTask& t) {
    t.same_process = t.pid == a.pid;
    t.child = !t.same_process && workers.count(t.pid);
  };
  for (auto& [key, w] : wakers) {
    mark(w);
    w.name = ctx.thread_name(k.session, w.pid, w.tid, a.to_ns);
    a.wakers.push_back(w);
  }
  for (auto& [key, p] : preemptors) {
    mark(p);
    a.ran_instead.push_back(p);
  }
  auto by_ns = [](const auto& x, const auto& y) { return x.ns > y.ns; };
  for (auto& [key, w] : waits.waited) {
    w.name = ctx.thread_name(k.session, a.pid, w.tid, a.to_ns);
    for (auto& [by, p] : waits.waited_ran[key]) {
      mark(p);
      w.ran_instead.push_back(p);
    }
    std::sort(w.ran_instead.begin(), w.ran_instead.end(), by_ns);
    const auto lines = ctx.sampled_lines(k.session, w.tid, from, a.to_ns, false);
    double total = 0;
    for (const auto& l : lines) total += l.samples;
    if (!lines.empty() && total > 0) {
      w.where = lines.front().frame.where();
      w.func = lines.front().frame.func;
      w.line_share = lines.front().samples / total;
    }
    a.waited_for.push_back(w);
  }
  for (auto& [t, v] : waits.via) {
    v.name = ctx.thread_name(k.session, a.pid, t, a.to_ns);
    a.input_via.push_back(v);
  }
  std::sort(a.wakers.begin(), a.wakers.end(), by_ns);
  std::sort(a.ran_instead.begin(), a.ran_instead.end(), by_ns);
  std::sort(a.waited_for.begin(), a.waited_for.end(), by_ns);
  std::sort(a.input_via.begin(), a.input_via.end(), by_ns);
}

// One thread's account; cap: the latest its start-up may end.
std::optional<ThreadAccount> account_one(const RuleContext& ctx, const ThreadKey& k,
                                         std::optional<int64_t> cap) {
  ThreadAccount a;
  a.session_id = k.session;
  a.pid = k.pid;
  a.tid = k.tid;
  // A copy: classify_sleeps marks what each of its sleeps waited for.
  Timeline tl = ctx.timelines().get(k.session, k.pid, k.tid);
  if (tl.calls.empty()) return std::nullopt;
  int64_t sampled_rows = 0;
  for (const Call& c : tl.calls) sampled_rows += c.kind == Kind::SampledLaunch;
  a.launches_estimated = sampled_rows > 0 && tl.launches_per_sampled > 0;
  Siblings siblings(ctx, k.session, k.pid);
  Waits waits;
  classify_sleeps(tl, k.pid, k.tid, siblings, waits.waited, waits.via, waits.waited_ran);

  a.from_ns = tl.calls.front().ts;
  a.to_ns = std::max_element(tl.calls.begin(), tl.calls.end(), [](const Call& x, const Call& y) {
              return x.end < y.end;
            })->end;
  find_startup(ctx, k, tl, cap, a);
  const StepMarks marks = find_steps(ctx, tl, a);
  // Start-up to its last call: nothing left to judge (a process that only
  // starts, or loads modules to its end).
  a.startup_end_ns = std::min(a.startup_end_ns, a.to_ns);
  const int64_t from = std::max(a.from_ns, a.startup_end_ns);

  // Launches probed in windows only: the split covers the windows.
  const ProbedTime probed{tl, ctx.launch_windows(k.session, from, a.to_ns)};
  a.launch_windows = !probed.windows.empty();
  for (const auto& [ws, we] : probed.windows) a.probed_ns += we - ws;
  a.time = probed.split(from, a.to_ns);
  for (int i = 0; i < ThreadAccount::kTimeSlices; i++)
    a.over_time.push_back(tl.split(a.from_ns + a.span_ns() * i / ThreadAccount::kTimeSlices,
                                   a.from_ns + a.span_ns() * (i + 1) / ThreadAccount::kTimeSlices));
  count_calls(tl, sampled_rows, a);
  measure_steps(ctx, probed, marks, a);
  account_others(ctx, k, tl, from, waits, a);
  a.name = ctx.thread_name(k.session, a.pid, a.tid, a.to_ns);
  a.gpu_busy = ctx.gpu_busy(k.session, a.pid, from, a.to_ns);
  a.host_context = !tl.offs.empty() || store::session_has_offcpu(ctx.db, k.session);
  return a;
}

}  // namespace

const std::vector<SplitPart>& split_parts() {
  static const std::vector<SplitPart> parts = {
      {"launching", "launching", &TimeSplit::launching},
      {"sync_busy", "sync wait, GPU busy", &TimeSplit::sync_busy},
      {"sync_idle", "syncs returning at once", &TimeSplit::sync_idle},
      {"copies", "copies", &TimeSplit::copies},
      {"allocations", "allocations", &TimeSplit::allocations},
      {"pinning", "pinning host memory", &TimeSplit::pinning},
      {"collectives", "collectives", &TimeSplit::collectives},
      {"other_calls", "other CUDA calls", &TimeSplit::other_calls},
      {"runnable", "runnable, not running", &TimeSplit::runnable},
      {"gil", "waiting for the GIL", &TimeSplit::gil},
      {"lock", "waiting for another thread", &TimeSplit::lock},
      {"input", "waiting for input", &TimeSplit::input},
      {"timer", "sleeping (timer)", &TimeSplit::timer},
      {"sleeping", "asleep, other", &TimeSplit::sleeping},
      {"disk", "disk wait", &TimeSplit::disk},
      {"on_cpu", "on-CPU outside CUDA", &TimeSplit::on_cpu},
  };
  return parts;
}

double ThreadAccount::share(int64_t TimeSplit::*part) const {
  const TimeSplit& t = judged();
  const int64_t total = t.total();
  return total > 0 ? double(t.*part) / double(total) : 0;
}

std::vector<ThreadAccount> account_threads(const RuleContext& ctx) {
  std::vector<ThreadAccount> out;
  for (const ThreadKey& k : busiest_threads(ctx))
    if (auto a = account_one(ctx, k, std::nullopt)) out.push_back(std::move(*a));
  // A thread whose start-up goes on long after another thread of its
  // process began its steps (JAX's main thread compiling a new shape each
  // step while XLA's threads run them): its loads from then on are the
  // loop's recompiles, not start-up.
  std::map<std::pair<int64_t, uint32_t>, int64_t> loop_from;
  for (const auto& a : out)
    if (a.steps >= kMinMarkers && a.steps_from_ns > 0) {
      auto [it, fresh] = loop_from.emplace(std::pair{a.session_id, a.pid}, a.steps_from_ns);
      if (!fresh) it->second = std::min(it->second, a.steps_from_ns);
    }
  for (auto& a : out) {
    auto it = loop_from.find({a.session_id, a.pid});
    if (it == loop_from.end() || a.startup_end_ns <= it->second + kStartupQuietNs) continue;
    if (auto again = account_one(ctx, {a.session_id, a.pid, a.tid}, it->second)) a = std::move(*again);
  }
  return out;
}

bool sync_storm(const ThreadAccount& a) {
  const double secs = double(std::max<int64_t>(1, a.span_ns())) / 1e9;
  // Syncs are traced throughout; steps may be counted in launch windows only.
  const double per_step = a.steps >= 3 ? double(a.syncs) / secs * double(a.step_ns) / 1e9 : 0;
  // Without an outer step the marker is the sync itself (one per "step"):
  // the rate alone tells a storm, unless the syncs wait on the GPU's work.
  return per_step >= kMinSyncsPerStep || (double(a.syncs) / secs >= kMinSyncsPerSecond && !gpu_paced_syncs(a));
}

bool gpu_paced_syncs(const ThreadAccount& a) {
  // The mean step where there is one: the whole time holds the exit's teardown too.
  const TimeSplit& t = a.steps >= 3 ? a.per_step : a.time;
  const int64_t total = t.total();
  return total > 0 && double(t.sync_busy) >= kGpuPacedSyncShare * double(total);
}

}  // namespace causeway::analyze
