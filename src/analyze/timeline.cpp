// SPDX-License-Identifier: Apache-2.0
#include "timeline.h"

#include <algorithm>

#include "causeway/common/op_table.h"
#include "causeway/events.h"
#include "causeway/model/offcpu.h"
#include "causeway/store/path_reads.h"

namespace causeway::analyze {

namespace {

CallKind kind_of(const OpSpec* op, int64_t dur, uint32_t flags) {
  if (!op) return CallKind::Other;
  switch (op->cls) {
    case OpClass::Launch: return flags & CW_CALL_AGGREGATED ? CallKind::SampledLaunch : CallKind::Launch;
    case OpClass::Sync: return dur >= kBusySyncNs ? CallKind::SyncBusy : CallKind::SyncIdle;
    case OpClass::Copy:
    case OpClass::Set: return CallKind::Copy;
    case OpClass::Alloc:
    case OpClass::Free: return CallKind::Alloc;
    case OpClass::Pin: return CallKind::Pin;
    case OpClass::Collective:
    case OpClass::P2P:
    case OpClass::Group: return CallKind::Collective;
    default: return CallKind::Other;
  }
}

// The registration, module loads and first kernel lookups of start-up (and
// of lazy loading); cuKernelGetFunction runs for every cuBLAS GEMM: not one.
bool startup_op(const OpSpec* op) {
  if (!op) return false;
  if (op->cls == OpClass::Module) return true;
  return op->shape == ArgShape::RegisterFunction || op->shape == ArgShape::ModuleGetFunction;
}

}  // namespace

bool timer_syscall(int64_t nr) { return nr == kSysNanosleep || nr == kSysClockNanosleep; }

bool disk_write_syscall(int64_t nr) {
  // write, pwrite64, writev, pwritev, fsync, fdatasync, sync, syncfs,
  // sync_file_range, msync, close (a file's last close may flush it)
  switch (nr) {
    case 1: case 18: case 20: case 296: case 74: case 75: case 162: case 306: case 277: case 26: case 3:
      return true;
    default:
      return false;
  }
}

bool disk_wait(const TimelineOff& o) { return o.state == CW_STATE_DISK && o.syscall != kSysIoctl; }

std::string disk_wait_sql(const std::string& alias) { return store::disk_wait_sql(alias, kSysIoctl); }

int64_t TimeSplit::*split_field(CallKind k) {
  switch (k) {
    case CallKind::Launch:
    case CallKind::SampledLaunch: return &TimeSplit::launching;
    case CallKind::SyncBusy: return &TimeSplit::sync_busy;
    case CallKind::SyncIdle: return &TimeSplit::sync_idle;
    case CallKind::Copy: return &TimeSplit::copies;
    case CallKind::Alloc: return &TimeSplit::allocations;
    case CallKind::Pin: return &TimeSplit::pinning;
    case CallKind::Collective: return &TimeSplit::collectives;
    case CallKind::Other: return &TimeSplit::other_calls;
  }
  return &TimeSplit::other_calls;
}

int64_t overlap_ns(int64_t a0, int64_t a1, int64_t b0, int64_t b1) {
  return std::max<int64_t>(0, std::min(a1, b1) - std::max(a0, b0));
}

void add_off(std::vector<TimelineOff>& offs, TimelineOff o, int64_t runq) {
  if (o.state == CW_STATE_RUNNING || runq <= 0 || runq > o.end - o.ts) {
    offs.push_back(std::move(o));
    return;
  }
  TimelineOff queued = o;
  queued.ts = o.end - runq;
  queued.state = CW_STATE_RUNNING;
  queued.syscall = -1;
  queued.wait = 0;
  queued.holder_tid = 0;
  queued.stack_id = -1;
  queued.queued = true;
  o.end = queued.ts;
  o.by_pid = 0;
  o.by_comm.clear();
  if (o.end > o.ts) offs.push_back(std::move(o));
  offs.push_back(std::move(queued));
}

std::pair<size_t, size_t> Timeline::calls_in(int64_t a, int64_t b) const {
  auto lo = std::lower_bound(calls.begin(), calls.end(), a, [](const TimelineCall& c, int64_t t) { return c.end <= t; });
  auto hi = std::lower_bound(lo, calls.end(), b, [](const TimelineCall& c, int64_t t) { return c.ts < t; });
  return {size_t(lo - calls.begin()), size_t(hi - calls.begin())};
}

int64_t Timeline::outside_calls(const TimelineOff& o, int64_t a, int64_t b) const {
  const int64_t s = std::max(o.ts, a), e = std::min(o.end, b);
  if (e <= s) return 0;
  int64_t t = e - s;
  auto [lo, hi] = calls_in(s, e);
  for (size_t i = lo; i < hi; i++) t -= overlap_ns(calls[i].ts, calls[i].end, s, e);
  return std::max<int64_t>(0, t);
}

std::vector<TimelineOff>::const_iterator Timeline::offs_from(int64_t t) const {
  return std::lower_bound(offs.begin(), offs.end(), t, [](const TimelineOff& x, int64_t v) { return x.end <= v; });
}

TimeSplit Timeline::split(int64_t a, int64_t b) const {
  TimeSplit t;
  auto [lo, hi] = calls_in(a, b);
  double sampled = 0;
  for (size_t i = lo; i < hi; i++) {
    const TimelineCall& c = calls[i];
    if (c.kind == CallKind::SampledLaunch) {
      if (c.ts >= a && c.ts < b) sampled += ns_per_sampled_launch;
      continue;
    }
    t.*split_field(c.kind) += overlap_ns(c.ts, c.end, a, b);
  }
  t.launching += int64_t(sampled);
  for (auto o = offs_from(a); o != offs.end() && o->ts < b; ++o) {
    const int64_t ns = outside_calls(*o, a, b);
    (o->state == CW_STATE_RUNNING    ? t.runnable
     : o->state == CW_STATE_SLEEPING ? t.*(o->part)
     : disk_wait(*o)                 ? t.disk
                                     : t.sleeping) += ns;
  }
  int64_t rest = (b - a) - t.total();
  if (rest < 0) {
    // The launching estimate overshot this interval: it is what gives.
    t.launching = std::max<int64_t>(0, t.launching + rest);
    rest = std::max<int64_t>(0, (b - a) - t.total());
  }
  t.on_cpu = rest;
  return t;
}

const Timeline& ThreadTimelines::get(int64_t session, uint32_t pid, uint32_t tid) {
  auto [it, fresh] = cache_.try_emplace({session, pid, tid});
  Timeline& tl = it->second;
  if (!fresh) return tl;
  const store::Window w = ctx_.store_window();
  int64_t sampled_rows = 0;
  auto [calls, unread] = calls_.try_emplace({session, pid});
  if (unread)
    store::each_process_call(ctx_.db, w, session, pid, [&](uint32_t t, const store::ThreadCallRow& r) {
      calls->second[t].push_back(r);
    });
  std::vector<store::ThreadCallRow> mine_calls;
  if (auto mine = calls->second.find(tid); mine != calls->second.end()) {
    mine_calls = std::move(mine->second);
    calls->second.erase(mine);
  }
  for (const store::ThreadCallRow& r : mine_calls) {
    const int64_t ts = r.ts_ns, dur = r.dur_ns;
    const OpSpec* op = find_op(uint16_t(r.op_id));
    CallKind kind = kind_of(op, dur, r.flags);
    // A read-back (.item(), a scalar cudaMemcpy) is a synchronisation.
    if (op && is_readback(*op, int(r.kind), r.bytes))
      kind = dur >= kBusySyncNs ? CallKind::SyncBusy : CallKind::SyncIdle;
    const bool marker = kind == CallKind::SyncBusy || kind == CallKind::SyncIdle ||
                        (op && op->cls == OpClass::Collective) ||
                        (kind == CallKind::Copy && r.kind == int(CopyKind::DtoH));
    const bool readback = op && op->cls == OpClass::Copy && r.kind == int(CopyKind::DtoH) && r.bytes >= 0 &&
                          r.bytes <= kReadbackMaxBytes;
    tl.calls.push_back({ts, ts + dur, kind, r.op_id, r.stack_id, marker, startup_op(op), readback,
                        r.since_launch_ns ? std::optional<int64_t>(ts - *r.since_launch_ns) : std::nullopt,
                        r.launch_seq.value_or(-1), r.bytes});
    if (kind == CallKind::SampledLaunch) sampled_rows++;
  }
  if (sampled_rows) {
    // Launches counted in the kernel: the process's exact launching time and
    // count, shared among its threads by their sampled rows.
    const store::SampledLaunches p = store::sampled_launches(ctx_.db, w, session, pid);
    if (p.rows > 0 && p.launches > 0) {
      tl.ns_per_sampled_launch = double(p.launch_ns) / double(p.rows);
      tl.launches_per_sampled = double(p.launches) / double(p.rows);
    }
  }
  auto [proc, first] = offs_.try_emplace({session, pid});
  if (first)
    store::each_process_offcpu(ctx_.db, w, session, pid, ctx_.offcpu_stacks(),
                               [&](uint32_t t, const store::OffCpuRow& r) {
                                 proc->second[t].push_back(
                                     {{r.ts_ns, r.ts_ns + r.dur_ns, r.state, r.waker_pid, r.waker_tid, r.by_pid,
                                       r.by_comm, r.syscall, r.wait, r.holder_tid, r.stack_id},
                                      r.runq_ns});
                               });
  if (auto mine = proc->second.find(tid); mine != proc->second.end()) {
    for (auto& o : mine->second) add_off(tl.offs, std::move(o.off), o.runq_ns);
    proc->second.erase(mine);
  }
  return tl;
}

}  // namespace causeway::analyze
