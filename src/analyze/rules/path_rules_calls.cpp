// SPDX-License-Identifier: Apache-2.0
// The critical path's time in GPU library calls and the loop's own host
// code: sync_bound, memcpy_bound, allocator_churn, pinning, host_bound,
// launch_bound, gpu_bound (path_rule.h).
#include <algorithm>

#include "causeway/common/op_table.h"
#include "causeway/common/time.h"
#include "path_rule.h"

namespace causeway::analyze::path_rules {

namespace {

constexpr double kLaunchesPerExposingSync = 10;
constexpr int64_t kRefillNs = 1'000'000;

bool storm_part(const View& v, const PathPart& part) {
  if (!v.p.sync_storm) return false;
  if (part.cls == PathClass::SyncIdle) return true;
  // A sync every few launches (.item() in an inner loop, float() after each
  // jitted op) drains the queue each time: every launch is exposed, and the
  // storm's, whichever share is larger (one rule: sync_bound).
  if (part.cls == PathClass::Launching && double(v.p.syncs) * kLaunchesPerExposingSync >= v.p.launches) return true;
  // The loop's own host work between syncs that come a millisecond apart or
  // closer is the loop around them (what removing them removes).
  if (part.cls == PathClass::OnCpu && part.via == PathVia::Own && v.own_on_cpu <= v.p.syncs * kRefillNs) return true;
  // The storm's refill: launching, copies and host work at the lines that
  // synchronise (.item() of each parameter, a read-back per token).
  if (part.cls != PathClass::Launching && part.cls != PathClass::Copy && part.cls != PathClass::OnCpu) return false;
  return part.frame && v.sync_lines.count(part.frame->where()) > 0;
}

// The pins of the judged time: how many, how many a step, how many bytes.
void pins(const RuleContext& ctx, const ProcessPath& p, const Taken&, CausalChain& c) {
  std::vector<int64_t> pinning;
  for (const auto& op : all_ops())
    if (op.cls == OpClass::Pin && op.shape != ArgShape::Free) pinning.push_back(op.id);
  if (pinning.empty()) return;
  const auto pinned = store::calls_and_bytes(ctx.db, p.session_id, p.pid, pinning, p.from_ns, p.to_ns);
  const double per_step = p.steps >= 3 ? double(pinned.calls) / double(p.steps) : 0;
  c.evidence.push_back({std::to_string(pinned.calls) + " pins" +
                            (per_step > 0 ? " (" + fixed1(per_step) + " a step)" : "") + ", " +
                            format_bytes(uint64_t(pinned.bytes)) + " pinned in all",
                        {{"calls", pinned.calls}, {"calls_per_step", per_step}, {"bytes", pinned.bytes}}});
}

void launches(const RuleContext& ctx, const ProcessPath& p, const Taken&, CausalChain& c) {
  const int64_t n = store::counted_launches(ctx.db, p.session_id, p.pid, p.from_ns, p.to_ns + 1'000'000'000);
  if (n > 0 && p.steps >= 3)
    c.evidence.push_back({"~" + std::to_string(n / std::max<int64_t>(1, p.steps)) + " kernel launches a step (counted in "
                              "the kernel), each with its host-side dispatch",
                          {{"launches", n}, {"launches_per_step", n / std::max<int64_t>(1, p.steps)}}});
  gpu_idle_note(ctx, p, {}, c);
}

void storm(const RuleContext&, const ProcessPath& p, const Taken&, CausalChain& c) {
  const double per_step = p.steps >= 3 ? double(p.syncs) / double(p.steps) : 0;
  const double per_s = double(p.syncs) * 1e9 / double(std::max<int64_t>(1, p.covered_ns()));
  c.evidence.push_back({std::to_string(p.syncs) + " synchronisations on the path (" +
                            (per_step >= 2 ? fixed1(per_step) + " a step, " : "") + fixed1(per_s) +
                            "/s): each drains the GPU's queue, and the host refills it after",
                        {{"syncs", p.syncs}, {"syncs_per_step", per_step}, {"syncs_per_s", per_s}}});
}

}  // namespace

std::span<const PathRule> call_path_rules() {
  static const PathRule rules[] = {
    {"sync_bound", storm_part, false, true,
     "synchronises with the GPU and refills it (a storm of .item(), .cpu(), float() read-backs)",
     "Keep values on the GPU inside the loop: replace per-iteration .item()/.cpu()/float()/print(tensor) "
     "with tensor ops, accumulate metrics on the device and read them once per step (or every N "
     "steps), and use non_blocking copies into pinned memory with an event when a value must come back.",
     storm, Severity::High, int(PathClass::SyncIdle)},
    {"memcpy_bound",
     [](const View& v, const PathPart& x) {
       return x.cls == PathClass::Copy && !storm_part(v, x);
     },
     false, false, "copies between host and GPU",
     "Use pinned host buffers (DataLoader pin_memory=True, tensor.pin_memory()) and non_blocking copies on a side "
     "stream so they overlap compute; keep tensors on the GPU across steps instead of copying them back and forth.",
     nullptr},
    {"allocator_churn",
     [](const View&, const PathPart& x) { return x.cls == PathClass::Alloc; }, false, true,
     "allocates and frees device memory",
     "Stop returning device memory inside the loop: drop periodic torch.cuda.empty_cache() and per-step "
     "cudaMalloc/cudaFree, pre-allocate buffers once, let the caching allocator keep blocks.",
     nullptr},
    {"pinning",
     [](const View&, const PathPart& x) { return x.cls == PathClass::Pin; }, false, true,
     "page-locks host memory and gives it back",
     "Pin once and reuse: allocate the pinned staging buffer before the loop and copy into it "
     "(tensor.pin_memory() once, or DataLoader(pin_memory=True)), let PyTorch's caching host allocator "
     "keep pinned blocks, and avoid cudaHostRegister/cudaHostAlloc inside the step.",
     pins},
    {"host_bound",
     [](const View& v, const PathPart& x) {
       return x.cls == PathClass::OnCpu && x.via == PathVia::Own && !storm_part(v, x);
     },
     true, true, "runs the loop thread's own host code (Python, data preparation) while the GPU waits",
     "Move host work off the dispatcher thread's critical path: do data preparation in DataLoader "
     "workers, replace Python loops over tensors with batched tensor ops on the GPU, avoid "
     "per-step host-side bookkeeping (logging, metrics) or do it every N steps; the line above is "
     "where its CPU time goes.",
     nullptr},
    {"launch_bound",
     [](const View& v, const PathPart& x) {
       return x.cls == PathClass::Launching && !storm_part(v, x);
     },
     true, true, "launches kernels one by one, with the framework's per-op dispatch around each",
     "Launch fewer, larger kernels: fuse elementwise work (torch.compile, or a fused op), batch "
     "small tensors, and replay the step as a CUDA graph (torch.cuda.graphs, torch.compile "
     "mode=\"reduce-overhead\") so one launch issues the step's kernels.",
     launches, Severity::High, -1, true, true},
    {"gpu_bound",
     [](const View&, const PathPart& x) { return x.cls == PathClass::GpuBusy; }, false,
     false, "waits for the GPU to finish the queued kernels: the GPU is the bottleneck, not the host",
     "Nothing on the host to fix: the GPU's own work sets the step. Make the kernels cheaper (mixed precision, "
     "fused attention, larger matrix tiles), or use a larger GPU.",
     nullptr, Severity::Low},
  };
  return rules;
}

}  // namespace causeway::analyze::path_rules
