// SPDX-License-Identifier: Apache-2.0
// launch_bound: the dispatcher thread spends its step launching many short
// kernels one by one, while the GPU does not keep it waiting: the GPU idles
// between tiny kernels and the launch rate is the ceiling. The host time
// between launches counts with them where it is per-op dispatch (a few tens
// of microseconds a launch): judged on launching alone, a loop of tiny ops
// sat at the cut (30-32% launching, 68% dispatch) and read as host_bound in
// some runs.
#include "dispatch.h"

#include "causeway/common/op_table.h"
#include "causeway/common/time.h"

namespace causeway::analyze {

namespace {
constexpr double kHighShare = 0.50;
constexpr double kMaxSyncBusy = 0.30;  // ... unless the GPU keeps the thread waiting this much
}

LaunchCost launch_cost(const ThreadAccount& a) {
  LaunchCost c;
  c.launching = a.share(&TimeSplit::launching);
  if (a.launches <= 0) return c;
  // Launches are counted over the covered time (their windows); so is the share.
  const double on_cpu = a.share(&TimeSplit::on_cpu);
  c.host_per_launch_ns = std::max<int64_t>(1, int64_t(on_cpu * double(a.covered_ns()) / double(a.launches)));
  if (c.host_per_launch_ns <= kMaxDispatchNs) c.dispatch = on_cpu;
  return c;
}

std::vector<CausalChain> rule_launch_bound(const RuleContext& ctx) {
  std::vector<CausalChain> out;
  for (const auto& a : ctx.accounts) {
    if (!judgeable(a)) continue;
    const LaunchCost cost = launch_cost(a);
    const double launching = cost.share();
    if (launching < kMinLaunchShare || a.share(&TimeSplit::sync_busy) >= kMaxSyncBusy) continue;
    if (a.gpu_busy && *a.gpu_busy >= 0.9) continue;  // the GPU is the bottleneck, not the launches
    // A storm of syncs exposes every launch: sync_bound tells it, with the
    // fix that removes the cause (one rule, whichever share is larger).
    if (sync_storm(a)) continue;
    const std::string rows = thread_rows(a);
    const std::string launch_ops = op_ids_sql_list(OpClass::Launch);
    CausalChain c;
    c.severity = launching >= kHighShare ? Severity::High : Severity::Medium;
    c.impact_ns = a.time.launching + (cost.dispatch > 0 ? a.time.on_cpu : 0);
    c.share = launching;
    c.threshold = kMinLaunchShare;
    int64_t top_op = ctx.scalar("SELECT op_id FROM cuda_call_events WHERE " + ctx.in_window() + rows +
                                " AND op_id IN (" + launch_ops + ") GROUP BY op_id ORDER BY count(*) DESC LIMIT 1");
    c.symptom = thread_symptom(ctx, a, top_op);
    const double secs = double(std::max<int64_t>(1, a.covered_ns())) / 1e9;  // launches: seen in windows only
    const double per_s = double(a.launches) / secs;
    const double mean_ns = a.launches ? double(a.time.launching) / double(a.launches) : 0;
    const int64_t per_step = a.steps >= 3 ? int64_t(per_s * double(a.step_ns) / 1e9) : 0;
    const std::string dispatch =
        cost.dispatch > 0 ? " and " + pct(cost.dispatch) + " on the CPU between them, " +
                                format_duration(cost.host_per_launch_ns) + " a launch (per-op dispatch)"
                          : "";
    c.evidence.push_back({pct(launching) + " of " + period_words(a) + " is spent launching kernels: " +
                              pct(cost.launching) + " in " + std::to_string(a.launches) + " launches" +
                              (a.launches_estimated ? " (counted in the kernel)" : "") +
                              (a.launch_windows ? " in " + format_duration(a.covered_ns()) + " of launch windows" : "") +
                              ", " + fixed1(per_s / 1000) + "k/s" +
                              (per_step ? ", ~" + std::to_string(per_step) + " per step" : "") + ", " +
                              format_duration(int64_t(mean_ns)) + " each" + dispatch,
                          {{"launch_cost_share", launching}, {"launching_share", cost.launching},
                           {"dispatch_share", cost.dispatch}, {"host_per_launch_ns", cost.host_per_launch_ns},
                           {"launches", a.launches}, {"per_s", per_s}, {"per_step", per_step},
                           {"mean_launch_ns", int64_t(mean_ns)}, {"estimated", a.launches_estimated}}});
    c.evidence.push_back(split_evidence(a));
    // The kernels launched most, and how small they are.
    std::string kernels;
    nlohmann::json top = nlohmann::json::array();
    ctx.each("SELECT coalesce(k.name, '?'), sum(s.calls) FROM launch_stats s LEFT JOIN kernels k ON k.id = s.kernel_id"
             " WHERE " + ctx.in_window("s.") + " AND s.session_id = " + std::to_string(a.session_id) +
                 " AND s.pid = " + std::to_string(a.pid) +
                 " GROUP BY 1 UNION ALL SELECT coalesce(k.name, '?'), count(*) FROM cuda_call_events c LEFT JOIN"
                 " kernels k ON k.id = c.kernel_id WHERE " + ctx.in_window("c.") + " AND c.session_id = " +
                 std::to_string(a.session_id) + " AND c.tid = " + std::to_string(a.tid) + " AND c.op_id IN (" +
                 launch_ops + ") AND c.flags & " + std::to_string(CW_CALL_AGGREGATED) +
                 " = 0 GROUP BY 1 ORDER BY 2 DESC LIMIT 3",
             [&](store::Statement& s) {
               kernels += (kernels.empty() ? "" : ", ") + s.col_text(0) + " (" + std::to_string(s.col_int(1)) + ")";
               top.push_back({{"kernel", s.col_text(0)}, {"launches", s.col_int(1)}});
             });
    int64_t threads = ctx.scalar("SELECT grid_x * grid_y * grid_z * block_x * block_y * block_z FROM cuda_call_events"
                                 " WHERE " + ctx.in_window() + rows + " AND op_id IN (" + launch_ops +
                                 ") AND grid_x IS NOT NULL ORDER BY 1 LIMIT 1 OFFSET (SELECT count(*) / 2 FROM "
                                 "cuda_call_events WHERE " + ctx.in_window() + rows + " AND op_id IN (" + launch_ops +
                                 ") AND grid_x IS NOT NULL)");
    if (!kernels.empty())
      c.evidence.push_back({"most launched: " + kernels +
                                (threads ? "; the median launch runs " + std::to_string(threads) + " threads" : ""),
                            {{"top_kernels", top}, {"median_threads", threads}}});
    add_gpu_evidence(c, a);
    attach_frame(ctx, c,
                 "SELECT stack_id FROM cuda_call_events WHERE " + ctx.in_window() + rows + " AND op_id IN (" +
                     launch_ops + ")",
                 "no launch carried a Python stack (stacks are taken for sampled and slow launches)");
    c.recommendation =
        "Launch fewer, larger kernels: fuse elementwise work (torch.compile, or a fused op), batch "
        "small tensors, and replay the step as a CUDA graph (torch.cuda.graphs, torch.compile "
        "mode=\"reduce-overhead\") so one launch issues the step's kernels.";
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace causeway::analyze
