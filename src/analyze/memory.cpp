// SPDX-License-Identifier: Apache-2.0
// GPU memory per process: one replay of the allocations and frees in time
// order, from the start of the trace to the end of the window (memory held
// when the window opens was allocated before it). A process that exits in the
// window frees everything as its interpreter shuts down: frees after its last
// GPU work (launch, sync, copy) are that teardown and are set aside, so what
// it held is what it held while it ran.
#include "causeway/analyze/memory.h"

#include <algorithm>
#include <map>

#include "causeway/common/cuda_errors.h"
#include "causeway/common/op_table.h"
#include "causeway/store/memory_reads.h"
#include "rule_context.h"

namespace causeway::analyze {
namespace {

constexpr size_t kTimelinePoints = 200;
constexpr size_t kMaxFailures = 20;
constexpr size_t kTopHolders = 5;

struct Live {
  int64_t bytes, stack_id;
};

std::string site_words(const RuleContext& ctx, int64_t stack_id, std::map<int64_t, std::string>& cache) {
  if (stack_id < 0) return {};
  auto it = cache.find(stack_id);
  if (it != cache.end()) return it->second;
  auto f = ctx.top_frame("SELECT " + std::to_string(stack_id) + " AS stack_id");
  std::string w = f ? f->where() + " (" + f->func + ")" : std::string();
  cache[stack_id] = w;
  return w;
}

store::OpIds op_ids(std::initializer_list<OpClass> classes) {
  store::OpIds ids;
  for (const auto& op : all_ops())
    if (std::find(classes.begin(), classes.end(), op.cls) != classes.end()) ids.push_back(op.id);
  return ids;
}

// Held bytes by site from the live allocations, largest first.
std::vector<HeldSite> by_site(const std::map<std::pair<bool, uint64_t>, Live>& live) {
  std::map<int64_t, HeldSite> sites;
  for (const auto& [k, l] : live) {
    auto& s = sites[l.stack_id];
    s.stack_id = l.stack_id;
    s.bytes += l.bytes;
    s.allocations++;
  }
  std::vector<HeldSite> out;
  for (auto& [id, s] : sites) out.push_back(std::move(s));
  std::sort(out.begin(), out.end(), [](const HeldSite& a, const HeldSite& b) { return a.bytes > b.bytes; });
  return out;
}

// (session, pid) -> a time.
using ByProcess = std::map<std::pair<int64_t, uint32_t>, int64_t>;

// (session, pid) -> when the teardown of a process that exited began: its
// last GPU work.
ByProcess teardown_starts(const RuleContext& ctx, std::optional<uint32_t> pid) {
  ByProcess teardown;
  static const store::OpIds work_ids = op_ids(
      {OpClass::Launch, OpClass::Sync, OpClass::Copy, OpClass::Set, OpClass::Graph, OpClass::Collective});
  for (const store::ProcessTime& t : store::exited_last_calls(ctx.db, work_ids, pid))
    teardown[{t.session, t.pid}] = t.ts_ns;
  return teardown;
}

// (session, pid) -> its first memory call in the window.
ByProcess first_memory_calls(const RuleContext& ctx, int64_t end, std::optional<uint32_t> pid) {
  ByProcess first_call;
  static const store::OpIds memory_ids =
      op_ids({OpClass::Alloc, OpClass::Free, OpClass::Pin, OpClass::Tensor});
  for (const store::ProcessTime& t : store::first_calls(ctx.db, memory_ids, {ctx.window.from_ns, end, pid}))
    first_call[{t.session, t.pid}] = t.ts_ns;
  return first_call;
}

// When a process's start-up ends (its main thread's, else its latest
// thread's); 0 when none of its threads has an account.
int64_t startup_end(const RuleContext& ctx, int64_t session, uint32_t pid) {
  int64_t main_start = 0, any_start = 0;
  for (const auto& a : ctx.accounts)
    if (a.session_id == session && a.pid == pid) {
      if (a.tid == pid) main_start = a.startup_end_ns;
      any_start = std::max(any_start, a.startup_end_ns);
    }
  return main_start ? main_start : any_start;
}

using Timeline = std::vector<std::pair<int64_t, int64_t>>;  // (ts, held)

// At most kTimelinePoints points of `changes`: the largest held value of
// each bucket of [from_ns, end).
Timeline thin_timeline(const Timeline& changes, int64_t from_ns, int64_t end) {
  if (changes.size() <= kTimelinePoints) return changes;
  const int64_t span = std::max<int64_t>(1, end - from_ns);
  std::map<int64_t, std::pair<int64_t, int64_t>> buckets;
  for (const auto& c : changes) {
    const int64_t b = (c.first - from_ns) * int64_t(kTimelinePoints) / span;
    auto [it, fresh] = buckets.try_emplace(b, c);
    if (!fresh && c.second >= it->second.second) it->second = c;
  }
  Timeline timeline;
  for (const auto& [b, c] : buckets) timeline.push_back(c);
  return timeline;
}

// One row of the replay: an allocation (or a pinning), or a free.
struct Call {
  int64_t ts;
  uint32_t tid;
  const OpSpec* op;
  int64_t ret, bytes;
  std::optional<uint64_t> addr;  // none when no address came back
  int64_t stack_id;              // -1: none
  MemoryKind kind;
  bool handle;                   // cuMemCreate / cuMemRelease: paired by handle, not address
  bool in_window;
};

// One replay: the processes replayed so far, and the state of the one being
// replayed (its rows come together, in time order).
struct Replay {
  const RuleContext& ctx;
  const int64_t end;
  const ByProcess teardown, first_call;  // from teardown_starts and first_memory_calls
  std::map<int64_t, std::string> where_cache;
  std::vector<ProcessMemory> out;

  // The state of one process while replaying.
  ProcessMemory* pm = nullptr;
  int64_t teardown_from = INT64_MAX;
  std::vector<int64_t> bounds;
  std::map<std::pair<bool, uint64_t>, Live> live;  // (is cuMemCreate handle, address) -> allocation
  int64_t held = 0;
  size_t next_bound = 0;
  std::vector<std::map<int64_t, int64_t>> site_slices;  // per boundary: stack_id -> held
  Timeline changes;                                     // in the window
  std::vector<std::pair<int64_t, int64_t>> recent_frees;  // (ts, bytes) of the last second

  void set_bounds(int64_t from, int64_t to) {
    bounds.clear();
    for (int i = 0; i <= kMemorySlices; i++) bounds.push_back(from + (to - from) * i / kMemorySlices);
  }

  void snapshot_until(int64_t ts) {
    while (next_bound < bounds.size() && bounds[next_bound] <= ts) {
      pm->held_over_time.push_back(held);
      std::map<int64_t, int64_t> m;
      for (const auto& [k, l] : live) m[l.stack_id] += l.bytes;
      site_slices.push_back(std::move(m));
      next_bound++;
    }
  }

  // Each process is judged over its own span: from its first memory call in
  // the window, or the end of its start-up if later, to the end, or to its
  // last GPU work when it exited.
  void begin(int64_t session, uint32_t pid) {
    finish();
    out.push_back({});
    pm = &out.back();
    pm->session_id = session;
    pm->pid = pid;
    live.clear();
    held = 0;
    next_bound = 0;
    site_slices.clear();
    changes.clear();
    recent_frees.clear();
    auto td = teardown.find({session, pid});
    teardown_from = td == teardown.end() ? INT64_MAX : td->second;
    auto fc = first_call.find({session, pid});
    int64_t from = fc == first_call.end() ? ctx.window.from_ns : fc->second;
    // Not before the process's start-up ends: weights and warm-up are no trend.
    from = std::max(from, startup_end(ctx, session, pid));
    const int64_t to = std::min(end, teardown_from == INT64_MAX ? end : teardown_from + 1);
    set_bounds(to > from ? from : ctx.window.from_ns, to > from ? to : end);
    pm->slice_calls.assign(kMemorySlices, false);
  }

  void finish() {
    if (!pm) return;
    snapshot_until(INT64_MAX);
    pm->boundaries_ns = bounds;
    pm->held_from = pm->held_over_time.front();
    pm->held_to = held;
    if (pm->held_from > pm->peak) {
      pm->peak = pm->held_from;
      pm->peak_ts_ns = ctx.window.from_ns;
    }
    pm->timeline = thin_timeline(changes, ctx.window.from_ns, end);
    pm->held_by_site = by_site(live);
    for (auto& s : pm->held_by_site) {
      for (const auto& slice : site_slices) {
        auto it = slice.find(s.stack_id);
        s.over_time.push_back(it == slice.end() ? 0 : it->second);
      }
    }
    if (pm->held_by_site.size() > 10) pm->held_by_site.resize(10);
    for (auto& s : pm->held_by_site) s.where = site_words(ctx, s.stack_id, where_cache);
  }

  void row(const store::MemoryCall& r) {
    const int64_t session = r.session;
    const uint32_t pid = uint32_t(r.pid);
    if (!pm || pm->session_id != session || pm->pid != pid) begin(session, pid);
    const int64_t ts = r.ts_ns;
    const OpSpec* op = find_op(uint16_t(r.op_id));
    if (!op) return;
    const Call c{ts, uint32_t(r.tid), op, r.ret, r.bytes, r.addr, r.stack_id,
                 memory_kind(*op), op->id == 91 || op->id == 92, ts >= ctx.window.from_ns};
    snapshot_until(ts);
    if (next_bound > 0 && next_bound < bounds.size()) pm->slice_calls[next_bound - 1] = true;
    if (op->shape != ArgShape::Free && op->shape != ArgShape::TensorFree)
      allocate(c);
    else
      release(c);
  }

  void allocate(const Call& c) {
    if (c.ret != 0) {
      if (c.in_window) fail(c);
      return;
    }
    if (c.kind == MemoryKind::Host) {
      if (c.in_window) pm->host_allocated += c.bytes;
      return;
    }
    if (!c.addr) return;  // cannot be paired with its free
    live[{c.handle, *c.addr}] = {c.bytes, c.stack_id};
    held += c.bytes;
    if (c.in_window) {
      pm->allocations++;
      pm->allocated += c.bytes;
      changes.emplace_back(c.ts, held);
      if (held > pm->peak) {
        pm->peak = held;
        pm->peak_ts_ns = c.ts;
      }
    }
  }

  // A failed allocation in the window; one of device memory running out is
  // kept with what was held and freed just before it.
  void fail(const Call& c) {
    pm->failed++;
    const ErrorInfo e = describe_error(c.op->layer, c.ret);
    if (e.kind != ErrorKind::OutOfMemory || c.kind == MemoryKind::Host) return;
    pm->failures_out_of_memory++;
    if (pm->failures.size() >= kMaxFailures) return;
    AllocFailure f;
    f.ts_ns = c.ts;
    f.tid = c.tid;
    f.op = std::string(c.op->name);
    f.ret = c.ret;
    f.asked = c.bytes;
    f.stack_id = c.stack_id;
    f.held = held;
    f.holders = by_site(live);
    if (f.holders.size() > kTopHolders) f.holders.resize(kTopHolders);
    for (const auto& [t, b] : recent_frees)
      if (t >= c.ts - 1'000'000'000) {
        f.frees_before++;
        f.freed_before += b;
      }
    pm->failures.push_back(std::move(f));
  }

  // A free: only a successful one gives memory back.
  void release(const Call& c) {
    if (c.ret != 0 || !c.addr || c.kind == MemoryKind::Host) return;
    auto it = live.find({c.handle, *c.addr});
    if (it == live.end()) {
      if (c.in_window) pm->unmatched_frees++;
      return;
    }
    if (c.ts > teardown_from) {
      if (c.in_window) {
        pm->exit_frees++;
        pm->exit_freed += it->second.bytes;
      }
      return;
    }
    held -= it->second.bytes;
    if (c.in_window) {
      pm->frees++;
      pm->freed += it->second.bytes;
      changes.emplace_back(c.ts, held);
      recent_frees.emplace_back(c.ts, it->second.bytes);
      if (recent_frees.size() > 4096) recent_frees.erase(recent_frees.begin(), recent_frees.begin() + 2048);
    }
    live.erase(it);
  }
};

// The reported processes' names, their failures' sites and NVML's view.
void annotate(const RuleContext& ctx, std::vector<ProcessMemory>& out,
              std::map<int64_t, std::string>& where_cache) {
  constexpr int64_t kNear = 1'000'000'000;  // NVML samples once a second: the nearest, a second either side
  for (auto& p : out) {
    p.comm = ctx.comm(p.pid);
    // The GPU the process was seen on (else the only GPU), and its size.
    if (auto total = store::process_gpu_memory_total(ctx.db, p.session_id, p.pid)) p.gpu_total = *total;
    if (auto most = store::process_gpu_memory_max(ctx.db, p.session_id, p.pid, ctx.store_window()))
      p.nvml_process_max = *most;
    for (auto& f : p.failures) {
      f.where = site_words(ctx, f.stack_id, where_cache);
      for (auto& h : f.holders) h.where = site_words(ctx, h.stack_id, where_cache);
      if (auto gpu = store::gpu_memory_near(ctx.db, p.session_id, f.ts_ns, kNear)) {
        f.gpu_used = gpu->used;
        if (gpu->total) f.gpu_total = *gpu->total;
      }
      if (auto used = store::process_gpu_memory_near(ctx.db, p.session_id, p.pid, f.ts_ns, kNear))
        f.process_used = *used;
    }
  }
}

// One replay over the calls `ids` (a level: the driver's and runtime's
// allocations, or a framework's tensors), up to the window's end or `at_ns`.
std::vector<ProcessMemory> replay(const RuleContext& ctx, std::optional<int64_t> at_ns,
                                  const store::OpIds& ids, std::optional<uint32_t> only_pid = {}) {
  const Window& w = ctx.window;
  const int64_t end = at_ns ? std::min(*at_ns + 1, w.to_ns) : w.to_ns;
  const std::optional<uint32_t> pid = only_pid ? only_pid : w.pid;
  Replay r{ctx, end, teardown_starts(ctx, pid), first_memory_calls(ctx, end, pid)};
  // From the start of the trace: memory held when the window opens was allocated before it.
  store::each_memory_call(ctx.db, ids, {std::nullopt, end, pid},
                          [&](const store::MemoryCall& c) { r.row(c); });
  r.finish();
  // Processes with nothing in the window are not reported.
  std::erase_if(r.out, [](const ProcessMemory& p) {
    return p.allocations == 0 && p.frees == 0 && p.failed == 0 && p.held_to == 0 && p.host_allocated == 0;
  });
  annotate(ctx, r.out, r.where_cache);
  return std::move(r.out);
}

}  // namespace

std::vector<ProcessMemory> account_memory(const RuleContext& ctx, std::optional<int64_t> at_ns) {
  std::vector<ProcessMemory> out = replay(ctx, at_ns, op_ids({OpClass::Alloc, OpClass::Free, OpClass::Pin}));
  // The framework's allocator, where traced: the same replay over its calls.
  const store::OpIds tensor_ops = op_ids({OpClass::Tensor});
  for (ProcessMemory& t : replay(ctx, at_ns, tensor_ops)) {
    auto it = std::find_if(out.begin(), out.end(), [&](const ProcessMemory& p) {
      return p.session_id == t.session_id && p.pid == t.pid;
    });
    if (it == out.end()) {
      out.push_back({});
      it = out.end() - 1;
      it->session_id = t.session_id;
      it->pid = t.pid;
      it->comm = t.comm;
      it->gpu_total = t.gpu_total;
      it->nvml_process_max = t.nvml_process_max;
    }
    auto& x = it->tensors;
    x.traced = true;
    // Windowed when the probes were off for part of the span its tensor calls
    // cover (not of the whole window: the trace's own start and end are not
    // the process's).
    const auto [first, last] = store::calls_span(ctx.db, t.session_id, t.pid, tensor_ops, ctx.store_window());
    x.windowed = last > first && !ctx.launch_windows(t.session_id, first, last).empty();
    x.slice_seen = x.windowed ? std::move(t.slice_calls) : std::vector<bool>(kMemorySlices, true);
    x.allocations = t.allocations;
    x.frees = t.frees;
    x.allocated = t.allocated;
    x.freed = t.freed;
    x.held_from = t.held_from;
    x.held_to = t.held_to;
    x.peak = t.peak;
    x.peak_ts_ns = t.peak_ts_ns;
    x.held_over_time = std::move(t.held_over_time);
    x.timeline = std::move(t.timeline);
    x.held_by_site = std::move(t.held_by_site);
    x.exit_frees = t.exit_frees;
    x.exit_freed = t.exit_freed;
    // What the tensors held when an allocation from the driver failed.
    for (auto& f : it->failures) {
      auto then = replay(ctx, f.ts_ns, tensor_ops, t.pid);
      for (auto& p : then)
        if (p.session_id == t.session_id) {
          f.tensor_held = p.held_to;
          f.tensor_holders = std::move(p.held_by_site);
          if (f.tensor_holders.size() > kTopHolders) f.tensor_holders.resize(kTopHolders);
        }
    }
  }
  std::sort(out.begin(), out.end(), [](const ProcessMemory& a, const ProcessMemory& b) {
    return std::max(a.peak, a.held_to) > std::max(b.peak, b.held_to);
  });
  return out;
}

}  // namespace causeway::analyze
