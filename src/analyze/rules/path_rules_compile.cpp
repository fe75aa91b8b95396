// SPDX-License-Identifier: Apache-2.0
// The critical path's tuning and compiling: autotuning, compilation
// (path_rule.h).
#include <algorithm>

#include "causeway/common/op_table.h"
#include "causeway/common/time.h"
#include "path_rule.h"

namespace causeway::analyze::path_rules {

namespace {

// Which autotuner searched (by its stacks' frames), how many searches (a
// burst of its calls, apart from the next by 50 ms or more: one new shape or
// key each), and the fix for that tuner.
void tuning(const RuleContext& ctx, const ProcessPath& p, const Taken& t, CausalChain& c) {
  std::set<int64_t> stacks;
  for (const auto* part : t.parts)
    if (part->stack_id >= 0) stacks.insert(part->stack_id);
  if (stacks.empty()) return;
  const auto [cudnn, timed, triton, inductor] = store::tuner_frames(ctx.db, stacks);
  constexpr int64_t kSearchGapNs = 50'000'000;
  int64_t searches = 0, calls = 0, syncs = 0, launches = 0, last = -1;
  for (const auto& [ts, op_id] : store::calls_with_stacks(ctx.db, p.session_id, p.pid, stacks, p.from_ns, p.to_ns)) {
    if (last < 0 || ts - last >= kSearchGapNs) searches++;
    last = ts;
    calls++;
    const OpSpec* op = find_op(uint16_t(op_id));
    syncs += op && op->cls == OpClass::Sync;
    launches += op && op->cls == OpClass::Launch;
  }
  const std::string who = cudnn && timed ? "cuDNN's algorithm search (torch.backends.cudnn.benchmark = True): plans "
                                           "built for each candidate and timed"
                          : cudnn    ? "cuDNN's plan building for each new shape (its engines compiled and loaded)"
                          : triton   ? "Triton's autotuner (@triton.autotune)"
                          : inductor ? "torch.compile's max-autotune"
                                     : "an autotuner";
  std::string text = who + " timed candidate kernels on the path";
  if (calls > 0) {
    text += ": " + std::to_string(searches) + (searches == 1 ? " search" : " searches");
    if (p.steps >= 3) text += " in " + std::to_string(p.steps) + " steps";
    text += " (" + std::to_string(syncs) + " syncs, " + std::to_string(launches) + " launches of candidates)";
    if (p.steps >= 3 && 2 * searches >= p.steps)
      text += ": a new shape or key to tune most steps (input sizes that vary)";
  }
  c.evidence.push_back({text, {{"tuner", cudnn ? "cudnn" : triton ? "triton" : inductor ? "inductor" : "other"},
                               {"benchmarked", timed},
                               {"searches", searches}, {"calls", calls}, {"syncs", syncs}, {"launches", launches}}});
  if (cudnn)
    c.recommendation =
        std::string("Give cuDNN shapes it has seen: pad or bucket variable input sizes to a few fixed shapes (each new "
                    "shape is planned again, forward and backward") +
        (timed ? ", and with benchmark on every candidate is built and timed), or set torch.backends.cudnn.benchmark = "
                 "False while shapes keep changing"
               : ")") +
        "; warm up every bucket before the timed loop.";
  else if (triton)
    c.recommendation =
        "Tune once per shape class, not per size: key @triton.autotune on bucketed sizes (round the key up to a "
        "power of two), prune the configs (prune_configs_by), and keep the tuned results across runs "
        "(TRITON_CACHE_DIR; triton's autotuner cache_results=True).";
  else if (inductor)
    c.recommendation =
        "Tune once: keep shapes static or bucketed so max-autotune does not search per new shape, warm up each "
        "shape before the timed loop, and keep inductor's autotune cache (TORCHINDUCTOR_CACHE_DIR) across runs.";
}

void compiles(const RuleContext&, const ProcessPath& p, const Taken& t, CausalChain& c) {
  std::set<uint32_t> threads;
  for (const auto* part : t.parts) threads.insert(part->tid);
  c.evidence.push_back({"compiling on " + std::to_string(threads.size()) + " thread" + (threads.size() == 1 ? "" : "s") +
                            " after warm-up: " +
                            (p.steps >= 3 ? "in the steps themselves (shapes or guards that change recompile)"
                                          : "the loop never settles into steps"),
                        {{"threads", threads.size()}}});
}

}  // namespace

std::span<const PathRule> compile_path_rules() {
  static const PathRule rules[] = {
    {"autotuning",
     [](const View&, const PathPart& x) { return x.cls == PathClass::Autotune; }, false, false,
     "autotunes: benchmarks candidate kernels (for each new shape or key) instead of running the step",
     "Tune once: keep the shapes the tuner sees fixed or bucketed, warm each up before the timed loop, and keep "
     "the tuned results across runs.",
     tuning, Severity::High, -1, false, false, true},
    {"compilation",
     [](const View&, const PathPart& x) { return x.cls == PathClass::Compile; }, false,
     true, "compiles (torch.compile / Triton / XLA / nvrtc) instead of running the step",
     "Compile once: keep shapes static (pad or bucket them), mark the dimensions that vary as dynamic "
     "(torch.compile(dynamic=True), torch._dynamo.mark_dynamic; jax.jit with padded shapes), and warm up every "
     "shape before the timed loop; a persistent compile cache keeps it across runs.",
     compiles, Severity::High, -1, false, false, true},
  };
  return rules;
}

}  // namespace causeway::analyze::path_rules
