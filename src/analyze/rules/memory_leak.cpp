// SPDX-License-Identifier: Apache-2.0
// memory_leak: device memory that one call site keeps allocating and never
// frees, growing slice after slice of the window, over at least as many
// steps of the process's loop as slices; the rate, and when the GPU would be
// full at that rate.
#include "../rule_context.h"

#include <algorithm>
#include <cmath>

#include "causeway/common/time.h"

namespace causeway::analyze {

namespace {
constexpr int64_t kMinGrowth = 64LL << 20;       // the site's held bytes grew this much
constexpr int kMinGrowingSlices = 5;             // in this many of the kMemorySlices slices
constexpr int kMinLateGrowing = 3;               // ... three of them among the last four
constexpr int kMinSeenSlices = 3;                // slices seen (an allocator traced in launch windows)
constexpr int64_t kMinSpanNs = 2'000'000'000;    // a window this long
constexpr double kHighFillHours = 1.0;           // HIGH when the GPU fills within this
}  // namespace

namespace {
struct Leak {
  const HeldSite* site;
  int64_t growth;
  int growing, seen;
};

struct Growth {
  int seen = 0;          // slices it could be seen growing in
  int growing = 0;       // ... in which it grew
  int late_growing = 0;  // ... of the last four: a leak goes on growing, a warm-up stops
  bool last_grew = false;  // ... in the last one seen
  bool shrank = false;
  int64_t growth = 0;
};
// Over the slices `seen` (every one when empty): an allocator traced in
// launch windows only shows no growth between them, which says nothing.
Growth growth_of(const std::vector<int64_t>& over_time, const std::vector<bool>& seen = {}) {
  Growth g;
  std::vector<size_t> slices;  // slice i ends at boundary i
  for (size_t i = 1; i < over_time.size(); i++)
    if (seen.empty() || (i - 1 < seen.size() && seen[i - 1])) slices.push_back(i);
  g.seen = int(slices.size());
  for (size_t k = 0; k < slices.size(); k++) {
    const size_t i = slices[k];
    if (over_time[i] > over_time[i - 1])
      g.growing++, g.late_growing += k + 4 >= slices.size(), g.last_grew = k + 1 == slices.size();
    if (over_time[i] < over_time[i - 1]) g.shrank = true;
  }
  if (!over_time.empty()) g.growth = over_time.back() - over_time.front();
  return g;
}
// Growing in kMinGrowingSlices of the kMemorySlices and in kMinLateGrowing of
// the last four; where fewer slices were seen, in as large a share of them,
// in all but one of the last ones and in the last (a model's weights moved
// to the GPU grow the first slices seen, then stop), over kMinSeenSlices.
bool leaking(const Growth& g) {
  const int need = (kMinGrowingSlices * g.seen + kMemorySlices - 1) / kMemorySlices;
  const int late = std::min(kMinLateGrowing, g.seen - 1);
  return g.seen >= kMinSeenSlices && !g.shrank && g.growing >= need && g.late_growing >= late &&
         (g.seen == kMemorySlices || g.last_grew) && g.growth >= kMinGrowth;
}

// Sites whose held bytes never shrink and grow in most slices seen (or, with
// `any_growth`, that grew at all without shrinking), most first.
std::vector<Leak> growing_sites(const std::vector<HeldSite>& sites, size_t boundaries, bool any_growth = false,
                                const std::vector<bool>& seen = {}) {
  std::vector<Leak> leaks;
  for (const HeldSite& s : sites) {
    if (s.over_time.size() != boundaries) continue;
    const Growth g = growth_of(s.over_time, seen);
    if (any_growth ? !g.shrank && g.growth > 0 && g.late_growing > 0 : leaking(g)) leaks.push_back({&s, g.growth, g.growing, g.seen});
  }
  std::sort(leaks.begin(), leaks.end(), [](const Leak& a, const Leak& b) { return a.growth > b.growth; });
  return leaks;
}
}  // namespace

std::vector<CausalChain> rule_memory_leak(const RuleContext& ctx) {
  std::vector<CausalChain> out;
  for (const ProcessMemory& p : ctx.memory) {
    if (p.boundaries_ns.size() < 2) continue;
    const int64_t span = p.boundaries_ns.back() - p.boundaries_ns.front();
    if (span < kMinSpanNs) continue;
    // Growth must recur over steps: a loop that took one or two steps in the
    // window grew by its warm-up (the first step's activations, optimizer
    // state, the allocator's pool), not by a leak.
    int64_t steps = -1, loop_steps = -1;
    for (const auto& a : ctx.accounts)
      if (a.pid == p.pid) steps = std::max(steps, a.markers), loop_steps = std::max(loop_steps, a.steps);
    if (steps >= 0 && steps < kMinGrowingSlices) continue;
    std::vector<Leak> device = growing_sites(p.held_by_site, p.boundaries_ns.size());
    // A caching allocator's pool grows on whichever call found it empty, on
    // whichever thread: the process's total can grow slice after slice while
    // no one site does.
    const bool pool_grows = leaking(growth_of(p.held_over_time));
    // With the framework's allocator traced, the tensors tell which line
    // keeps memory. In launch windows only, a tensor freed outside one looks
    // kept: then only where the pool itself grew.
    const auto& t = p.tensors;
    std::vector<Leak> tensor;
    if (t.traced) {
      tensor = growing_sites(t.held_by_site, p.boundaries_ns.size(), false, t.slice_seen);
      // Traced in windows only, a tensor freed outside one looks kept: the
      // pool must have grown too, by half of what the sites kept at least
      // (a caching allocator reuses freed blocks for part of it).
      int64_t kept = 0;
      for (const auto& l : tensor) kept += l.growth;
      if (t.windowed && device.empty() && !pool_grows && 2 * (p.held_to - p.held_from) < kept) tensor.clear();
      // ... and a leak goes on taking memory from the driver (traced all the
      // time): the pool grew in the second half of the span too. Tensors
      // that a step frees outside the windows look kept in every slice seen,
      // while the pool stays as the warm-up left it.
      if (t.windowed && !tensor.empty()) {
        const auto& pool = p.held_over_time;
        bool late = false;
        for (size_t i = pool.size() / 2 + 1; i < pool.size(); i++) late = late || pool[i] > pool[i - 1];
        if (!late) tensor.clear();
      }
    }
    const bool by_tensor = !tensor.empty();
    // The pool's growth alone, with no one site growing, is a leak only in a
    // loop whose steps were found: a slow warm-up also grows it slice after slice.
    if (!by_tensor && device.empty() && pool_grows && (loop_steps < 0 || loop_steps >= 3))
      device = growing_sites(p.held_by_site, p.boundaries_ns.size(), true);
    // The framework's tensors traced and holding no more at the end than at
    // the start (windowed, a tensor freed between windows looks kept: that
    // overstates their growth, never hides it): what grew is the allocator's
    // cache, blocks cut for larger shapes (an input size that grows, cuDNN's
    // workspaces for each new shape), which it frees and retries with before
    // it would fail, not memory the program keeps.
    if (!by_tensor && t.traced && t.held_to - t.held_from < kMinGrowth) continue;
    const std::vector<Leak>& leaks = by_tensor ? tensor : device;
    if (leaks.empty()) continue;
    int64_t leaked = 0;
    for (const auto& l : leaks) leaked += l.growth;
    const double secs = double(span) / 1e9;
    const double rate = double(leaked) / secs;  // bytes/s
    CausalChain c;
    c.impact_ns = leaked;  // ranks leaks among themselves
    c.symptom.pid = p.pid;
    c.symptom.comm = p.comm;
    c.symptom.op = "device memory";
    c.symptom.first_ts_ns = p.boundaries_ns.front();
    c.symptom.last_ts_ns = p.boundaries_ns.back();
    c.symptom.summary = "held " + format_bytes(uint64_t(p.held_from)) + " -> " + format_bytes(uint64_t(p.held_to)) +
                        ", +" + format_bytes(uint64_t(rate)) + "/s";
    if (by_tensor)
      c.evidence.push_back({"tensors held grew from " + format_bytes(uint64_t(t.held_from)) + " to " +
                                format_bytes(uint64_t(t.held_to)) + " in " + format_duration(span) + "; " +
                                format_bytes(uint64_t(leaked)) + " of it (" + format_bytes(uint64_t(rate)) +
                                "/s) allocated and never freed; the allocator's pool (reserved) " +
                                format_bytes(uint64_t(p.held_from)) + " -> " + format_bytes(uint64_t(p.held_to)) +
                                (t.windowed ? " (its calls traced in launch windows)" : ""),
                            {{"level", "tensor"}, {"allocated_from", t.held_from}, {"allocated_to", t.held_to},
                             {"held_from", p.held_from}, {"held_to", p.held_to}, {"leaked", leaked},
                             {"bytes_per_s", rate}, {"span_ns", span}, {"windowed", t.windowed}}});
    else
      c.evidence.push_back({"device memory held grew from " + format_bytes(uint64_t(p.held_from)) + " to " +
                                format_bytes(uint64_t(p.held_to)) + " in " + format_duration(span) + "; " +
                                format_bytes(uint64_t(leaked)) + " of it (" + format_bytes(uint64_t(rate)) +
                                "/s) allocated and never freed",
                            {{"level", "device"}, {"held_from", p.held_from}, {"held_to", p.held_to},
                             {"leaked", leaked}, {"bytes_per_s", rate}, {"span_ns", span}}});
    nlohmann::json sites = nlohmann::json::array();
    std::string words;
    for (size_t i = 0; i < leaks.size(); i++) {
      const HeldSite& s = *leaks[i].site;
      sites.push_back({{"stack_id", s.stack_id}, {"where", s.where}, {"growth", leaks[i].growth},
                       {"growing_slices", leaks[i].growing}, {"seen_slices", leaks[i].seen},
                       {"held", s.bytes}, {"allocations", s.allocations}, {"over_time", s.over_time}});
      if (i < 3)
        words += (i ? "; " : "") + (s.where.empty() ? std::string("a call with no Python stack") : s.where) + ": +" +
                 format_bytes(uint64_t(leaks[i].growth)) + ", grew in " + std::to_string(leaks[i].growing) + " of " +
                 (leaks[i].seen < kMemorySlices ? std::to_string(leaks[i].seen) + " slices seen (of " +
                                                      std::to_string(kMemorySlices) + ")"
                                                : std::to_string(kMemorySlices) + " slices") +
                 ", " + std::to_string(s.allocations) + " allocations held";
    }
    c.evidence.push_back({std::string(by_tensor ? "by the line whose tensors stay allocated: "
                                                : "by the line that allocated it: ") + words,
                          {{"sites", sites}}});
    // When the GPU is full at this rate: NVML's size, less what is used now.
    std::optional<double> fill_s;
    if (p.gpu_total) {
      const int64_t used = p.nvml_process_max ? std::max(*p.nvml_process_max, p.held_to) : p.held_to;
      const int64_t left = std::max<int64_t>(0, *p.gpu_total - used);
      fill_s = double(left) / rate;
      c.evidence.push_back({"at this rate the GPU's " + format_bytes(uint64_t(*p.gpu_total)) + " (NVML) is full in " +
                                format_duration(int64_t(*fill_s * 1e9)),
                            {{"gpu_total", *p.gpu_total}, {"seconds_to_full", *fill_s}}});
    }
    c.severity = fill_s ? (*fill_s / 3600 <= kHighFillHours ? Severity::High : Severity::Medium)
                        : (leaked >= (4LL << 30) ? Severity::High : Severity::Medium);
    const HeldSite& top = *leaks.front().site;
    c.frame = ctx.top_frame("SELECT " + std::to_string(top.stack_id) + " AS stack_id");
    // The driver's view has no line (the pool grew under a call without a
    // stack): the tensors' view names the line that holds the most.
    if (!c.frame && t.traced && !t.held_by_site.empty()) {
      const auto most = std::max_element(t.held_by_site.begin(), t.held_by_site.end(),
                                         [](const HeldSite& x, const HeldSite& y) { return x.bytes < y.bytes; });
      c.frame = ctx.top_frame("SELECT " + std::to_string(most->stack_id) + " AS stack_id");
      if (c.frame)
        c.evidence.push_back({"the tensors held the most at " + most->where + " (" +
                                  format_bytes(uint64_t(most->bytes)) + ")",
                              {{"tensor_site", most->where}, {"tensor_bytes", most->bytes}}});
    }
    if (!c.frame) c.no_frame_reason = "the growing allocations have no Python stack";
    // A caching allocator (PyTorch's) reuses freed blocks: the driver sees
    // the request that found the cache empty, which can be a temporary a
    // line after the tensor that is kept; its tensors name the line itself.
    c.recommendation = "Something keeps a reference to a tensor each step" +
                       (top.where.empty() ? std::string()
                        : by_tensor      ? " allocated at " + top.where
                                         : " allocated at " + top.where +
                                               " or earlier in the same step (a caching allocator asks the "
                                               "driver only when its cache is empty)") +
                       ": a list of outputs or losses that still hold their graph (append loss.item() or "
                       "loss.detach()), a cache keyed by step, or hooks that store activations. Free it, or "
                       "bound the collection.";
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace causeway::analyze
