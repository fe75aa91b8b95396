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

std::string op_ids(std::initializer_list<OpClass> classes) {
  std::string ids;
  for (const auto& op : all_ops())
    if (std::find(classes.begin(), classes.end(), op.cls) != classes.end())
      ids += (ids.empty() ? "" : ",") + std::to_string(op.id);
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

// One replay over the calls `ids` (a level: the driver's and runtime's
// allocations, or a framework's tensors), up to the window's end or `at_ns`.
std::vector<ProcessMemory> replay(const RuleContext& ctx, std::optional<int64_t> at_ns, const std::string& ids,
                                  std::optional<uint32_t> only_pid = {}) {
  const Window& w = ctx.window;
  const int64_t end = at_ns ? std::min(*at_ns + 1, w.to_ns) : w.to_ns;
  const std::optional<uint32_t> pid = only_pid ? only_pid : w.pid;
  const std::string pid_filter = pid ? " AND pid = " + std::to_string(*pid) : "";

  // (session, pid) -> when the teardown of a process that exited began.
  std::map<std::pair<int64_t, uint32_t>, int64_t> teardown;
  static const std::string work_ids =
      op_ids({OpClass::Launch, OpClass::Sync, OpClass::Copy, OpClass::Set, OpClass::Graph, OpClass::Collective});
  ctx.each("SELECT p.session_id, p.pid, (SELECT max(c.ts_ns) FROM cuda_call_events c WHERE c.session_id = "
           "p.session_id AND c.pid = p.pid AND c.op_id IN (" + work_ids + ")) FROM processes p"
           " WHERE p.end_ts_ns IS NOT NULL" + (pid ? " AND p.pid = " + std::to_string(*pid) : ""),
           [&](store::Statement& s) {
             if (!s.col_null(2)) teardown[{s.col_int(0), uint32_t(s.col_int(1))}] = s.col_int(2);
           });
  int64_t teardown_from = INT64_MAX;

  std::vector<ProcessMemory> out;
  std::map<int64_t, std::string> where_cache;
  // Each process is judged over its own span: from its first memory call in
  // the window, or the end of its start-up if later, to the end, or to its
  // last GPU work when it exited (below).
  std::map<std::pair<int64_t, uint32_t>, int64_t> first_call;
  static const std::string memory_ids = op_ids({OpClass::Alloc, OpClass::Free, OpClass::Pin, OpClass::Tensor});
  ctx.each("SELECT session_id, pid, min(ts_ns) FROM cuda_call_events WHERE op_id IN (" + memory_ids +
               ") AND ts_ns >= " + std::to_string(w.from_ns) + " AND ts_ns < " + std::to_string(end) + pid_filter +
               " GROUP BY session_id, pid",
           [&](store::Statement& s) { first_call[{s.col_int(0), uint32_t(s.col_int(1))}] = s.col_int(2); });
  std::vector<int64_t> bounds;
  auto slice = [&](int64_t from, int64_t to) {
    bounds.clear();
    for (int i = 0; i <= kMemorySlices; i++) bounds.push_back(from + (to - from) * i / kMemorySlices);
  };

  // The state of one process while replaying.
  ProcessMemory* pm = nullptr;
  std::map<std::pair<bool, uint64_t>, Live> live;  // (is cuMemCreate handle, address) -> allocation
  int64_t held = 0;
  size_t next_bound = 0;
  std::vector<std::map<int64_t, int64_t>> site_slices;  // per boundary: stack_id -> held
  std::vector<std::pair<int64_t, int64_t>> changes;     // (ts, held) in the window
  std::vector<std::pair<int64_t, int64_t>> recent_frees;  // (ts, bytes) of the last second

  auto snapshot_until = [&](int64_t ts) {
    while (next_bound < bounds.size() && bounds[next_bound] <= ts) {
      pm->held_over_time.push_back(held);
      std::map<int64_t, int64_t> m;
      for (const auto& [k, l] : live) m[l.stack_id] += l.bytes;
      site_slices.push_back(std::move(m));
      next_bound++;
    }
  };
  auto finish = [&] {
    if (!pm) return;
    snapshot_until(INT64_MAX);
    pm->boundaries_ns = bounds;
    pm->held_from = pm->held_over_time.front();
    pm->held_to = held;
    if (pm->held_from > pm->peak) {
      pm->peak = pm->held_from;
      pm->peak_ts_ns = w.from_ns;
    }
    // At most kTimelinePoints points: the largest held value of each bucket.
    if (changes.size() <= kTimelinePoints) {
      pm->timeline = changes;
    } else {
      const int64_t span = std::max<int64_t>(1, end - w.from_ns);
      std::map<int64_t, std::pair<int64_t, int64_t>> buckets;
      for (const auto& c : changes) {
        const int64_t b = (c.first - w.from_ns) * int64_t(kTimelinePoints) / span;
        auto [it, fresh] = buckets.try_emplace(b, c);
        if (!fresh && c.second >= it->second.second) it->second = c;
      }
      for (const auto& [b, c] : buckets) pm->timeline.push_back(c);
    }
    pm->held_by_site = by_site(live);
    for (auto& s : pm->held_by_site) {
      for (const auto& slice : site_slices) {
        auto it = slice.find(s.stack_id);
        s.over_time.push_back(it == slice.end() ? 0 : it->second);
      }
    }
    if (pm->held_by_site.size() > 10) pm->held_by_site.resize(10);
    for (auto& s : pm->held_by_site) s.where = site_words(ctx, s.stack_id, where_cache);
  };

  ctx.each("SELECT session_id, pid, tid, ts_ns, op_id, ret, coalesce(bytes, 0), addr, coalesce(stack_id, -1)"
           " FROM cuda_call_events WHERE op_id IN (" + ids + ") AND ts_ns < " + std::to_string(end) + pid_filter +
               " ORDER BY session_id, pid, ts_ns",
           [&](store::Statement& s) {
             const int64_t session = s.col_int(0);
             const uint32_t pid = uint32_t(s.col_int(1));
             if (!pm || pm->session_id != session || pm->pid != pid) {
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
               int64_t from = fc == first_call.end() ? w.from_ns : fc->second;
               // Not before the process's start-up ends (its main thread's,
               // else its latest): weights and warm-up are no trend.
               int64_t main_start = 0, any_start = 0;
               for (const auto& a : ctx.accounts)
                 if (a.session_id == session && a.pid == pid) {
                   if (a.tid == pid) main_start = a.startup_end_ns;
                   any_start = std::max(any_start, a.startup_end_ns);
                 }
               from = std::max(from, main_start ? main_start : any_start);
               const int64_t to = std::min(end, teardown_from == INT64_MAX ? end : teardown_from + 1);
               slice(to > from ? from : w.from_ns, to > from ? to : end);
               pm->slice_calls.assign(kMemorySlices, false);
             }
             const int64_t ts = s.col_int(3);
             const OpSpec* op = find_op(uint16_t(s.col_int(4)));
             if (!op) return;
             const int64_t ret = s.col_int(5), bytes = s.col_int(6);
             const bool in_window = ts >= w.from_ns;
             snapshot_until(ts);
             if (next_bound > 0 && next_bound < bounds.size()) pm->slice_calls[next_bound - 1] = true;
             const MemoryKind kind = memory_kind(*op);
             const bool handle = op->id == 91 || op->id == 92;  // cuMemCreate / cuMemRelease
             if (op->shape != ArgShape::Free && op->shape != ArgShape::TensorFree) {  // an allocation (or a pinning)
               if (ret != 0) {
                 if (!in_window) return;
                 pm->failed++;
                 const ErrorInfo e = describe_error(op->layer, ret);
                 if (e.kind != ErrorKind::OutOfMemory || kind == MemoryKind::Host) return;
                 pm->failures_out_of_memory++;
                 if (pm->failures.size() >= kMaxFailures) return;
                 AllocFailure f;
                 f.ts_ns = ts;
                 f.tid = uint32_t(s.col_int(2));
                 f.op = std::string(op->name);
                 f.ret = ret;
                 f.asked = bytes;
                 f.stack_id = s.col_int(8);
                 f.held = held;
                 f.holders = by_site(live);
                 if (f.holders.size() > kTopHolders) f.holders.resize(kTopHolders);
                 for (const auto& [t, b] : recent_frees)
                   if (t >= ts - 1'000'000'000) {
                     f.frees_before++;
                     f.freed_before += b;
                   }
                 pm->failures.push_back(std::move(f));
                 return;
               }
               if (kind == MemoryKind::Host) {
                 if (in_window) pm->host_allocated += bytes;
                 return;
               }
               if (s.col_null(7)) return;  // no address came back: cannot be paired
               live[{handle, uint64_t(s.col_int(7))}] = {bytes, s.col_int(8)};
               held += bytes;
               if (in_window) {
                 pm->allocations++;
                 pm->allocated += bytes;
                 changes.emplace_back(ts, held);
                 if (held > pm->peak) {
                   pm->peak = held;
                   pm->peak_ts_ns = ts;
                 }
               }
               return;
             }
             // A free: only a successful one gives memory back.
             if (ret != 0 || s.col_null(7) || kind == MemoryKind::Host) return;
             auto it = live.find({handle, uint64_t(s.col_int(7))});
             if (it == live.end()) {
               if (in_window) pm->unmatched_frees++;
               return;
             }
             if (ts > teardown_from) {
               if (in_window) {
                 pm->exit_frees++;
                 pm->exit_freed += it->second.bytes;
               }
               return;
             }
             held -= it->second.bytes;
             if (in_window) {
               pm->frees++;
               pm->freed += it->second.bytes;
               changes.emplace_back(ts, held);
               recent_frees.emplace_back(ts, it->second.bytes);
               if (recent_frees.size() > 4096) recent_frees.erase(recent_frees.begin(), recent_frees.begin() + 2048);
             }
             live.erase(it);
           });
  finish();
  // Processes with nothing in the window are not reported; the rest get
  // their names, their failures' sites and NVML's view.
  std::erase_if(out, [](const ProcessMemory& p) {
    return p.allocations == 0 && p.frees == 0 && p.failed == 0 && p.held_to == 0 && p.host_allocated == 0;
  });
  for (auto& p : out) {
    p.comm = ctx.comm(p.pid);
    const std::string sess = std::to_string(p.session_id), pid = std::to_string(p.pid);
    // The GPU the process was seen on (else the only GPU), and its size.
    ctx.each("SELECT d.mem_total FROM gpu_devices d WHERE d.session_id = " + sess +
                 " AND d.mem_total IS NOT NULL AND (d.gpu IN (SELECT gpu FROM gpu_process_samples WHERE session_id = " +
                 sess + " AND pid = " + pid + ") OR (SELECT count(*) FROM gpu_devices WHERE session_id = " + sess +
                 ") = 1) ORDER BY d.gpu LIMIT 1",
             [&](store::Statement& st) { p.gpu_total = st.col_int(0); });
    ctx.each("SELECT max(mem_used) FROM gpu_process_samples WHERE session_id = " + sess + " AND pid = " + pid +
                 " AND " + ctx.in_window(),
             [&](store::Statement& st) {
               if (!st.col_null(0)) p.nvml_process_max = st.col_int(0);
             });
    for (auto& f : p.failures) {
      f.where = site_words(ctx, f.stack_id, where_cache);
      for (auto& h : f.holders) h.where = site_words(ctx, h.stack_id, where_cache);
      const std::string lo = std::to_string(f.ts_ns - 1'000'000'000), hi = std::to_string(f.ts_ns + 1'000'000'000);
      ctx.each("SELECT s.mem_used, d.mem_total FROM gpu_samples s LEFT JOIN gpu_devices d ON d.session_id = s.session_id"
               " AND d.gpu = s.gpu WHERE s.session_id = " + sess + " AND s.ts_ns BETWEEN " + lo + " AND " + hi +
                   " AND s.mem_used IS NOT NULL ORDER BY abs(s.ts_ns - " + std::to_string(f.ts_ns) + "), s.mem_used DESC LIMIT 1",
               [&](store::Statement& st) {
                 f.gpu_used = st.col_int(0);
                 if (!st.col_null(1)) f.gpu_total = st.col_int(1);
               });
      ctx.each("SELECT mem_used FROM gpu_process_samples WHERE session_id = " + sess + " AND pid = " + pid +
                   " AND ts_ns BETWEEN " + lo + " AND " + hi + " AND mem_used IS NOT NULL ORDER BY abs(ts_ns - " +
                   std::to_string(f.ts_ns) + ") LIMIT 1",
               [&](store::Statement& st) { f.process_used = st.col_int(0); });
    }
  }
  return out;
}

}  // namespace

std::vector<ProcessMemory> account_memory(const RuleContext& ctx, std::optional<int64_t> at_ns) {
  std::vector<ProcessMemory> out = replay(ctx, at_ns, op_ids({OpClass::Alloc, OpClass::Free, OpClass::Pin}));
  // The framework's allocator, where traced: the same replay over its calls.
  const std::string tensor_ops = op_ids({OpClass::Tensor});
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
    int64_t first = 0, last = 0;
    ctx.each("SELECT min(ts_ns), max(ts_ns) FROM cuda_call_events WHERE session_id = " +
                 std::to_string(t.session_id) + " AND pid = " + std::to_string(t.pid) + " AND op_id IN (" +
                 tensor_ops + ") AND " + ctx.in_window(""),
             [&](store::Statement& s) { first = s.col_int(0), last = s.col_int(1); });
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
