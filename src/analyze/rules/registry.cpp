// SPDX-License-Identifier: Apache-2.0
// Every explain rule, in one list. Adding a rule: one file here, one line below.
#include "../rule_context.h"

#include <string_view>

namespace causeway::analyze {

std::vector<CausalChain> rule_data_loss(const RuleContext&);
std::vector<CausalChain> rule_call_failures(const RuleContext&);
std::vector<CausalChain> rule_out_of_memory(const RuleContext&);
std::vector<CausalChain> rule_memory_leak(const RuleContext&);
std::vector<CausalChain> rule_gpu_health(const RuleContext&);
std::vector<CausalChain> rule_gpu_fault(const RuleContext&);
std::vector<CausalChain> rule_hung_collective(const RuleContext&);
std::vector<CausalChain> rule_hung_call(const RuleContext&);
std::vector<CausalChain> rule_gpu_throttled(const RuleContext&);
std::vector<CausalChain> rule_cpu_contention(const RuleContext&);
std::vector<CausalChain> rule_io_stall(const RuleContext&);
std::vector<CausalChain> rule_memory_pressure(const RuleContext&);
std::vector<CausalChain> rule_tcp_retransmit(const RuleContext&);
std::vector<CausalChain> rule_cross_rank_straggler(const RuleContext&);
std::vector<CausalChain> rule_cross_rank_network(const RuleContext&);
std::vector<CausalChain> rule_gpu_shared(const RuleContext&);
std::vector<CausalChain> rule_memcpy_bound(const RuleContext&);
std::vector<CausalChain> rule_allocator_churn(const RuleContext&);
std::vector<CausalChain> rule_graph_recapture(const RuleContext&);
std::vector<CausalChain> rule_cold_start(const RuleContext&);
std::vector<CausalChain> rule_on_path(const RuleContext&, std::string_view root_cause);
std::vector<CausalChain> weigh_on_path(const RuleContext&, std::string_view root_cause, std::vector<CausalChain> old,
                                       bool path_line);

namespace {
// A classifier of the critical path (path_rule.h), under its root cause.
template <const char* Name>
std::vector<CausalChain> on_path(const RuleContext& ctx) {
  return rule_on_path(ctx, Name);
}
// A rule of its own (slow calls, per-process shares) whose chains the path
// re-weighs where the process has one: severity and impact from the time on
// the path, and (PathLine) the line where that time was lost.
template <const char* Name, auto Rule, bool PathLine>
std::vector<CausalChain> weighed(const RuleContext& ctx) {
  return weigh_on_path(ctx, Name, Rule(ctx), PathLine);
}
constexpr char kTimer[] = "timer_sleep", kDiskWrite[] = "disk_write", kIo[] = "io_stall",
               kThrottled[] = "cpu_throttled", kContention[] = "cpu_contention", kCompile[] = "compilation",
               kGil[] = "gil_contention", kLock[] = "lock_contention", kInput[] = "input_bound", kSync[] = "sync_bound",
               kMemcpy[] = "memcpy_bound", kChurn[] = "allocator_churn", kPin[] = "pinning", kHost[] = "host_bound",
               kLaunch[] = "launch_bound", kGpu[] = "gpu_bound", kMemoryLimit[] = "memory_limit",
               kOversubscribed[] = "thread_oversubscription", kAutotune[] = "autotuning";
}  // namespace

const std::vector<RuleEntry>& all_rules() {
  static const std::vector<RuleEntry> rules = {
      {"data_loss", rule_data_loss},
      // Failing, or about to (CRITICAL: ranked above every performance chain).
      {"call_failures", rule_call_failures},
      {"out_of_memory", rule_out_of_memory},
      {"memory_leak", rule_memory_leak},
      {"gpu_health", rule_gpu_health},
      {"gpu_fault", rule_gpu_fault},
      {"hung_collective", rule_hung_collective},
      {"hung_call", rule_hung_call},
      {"gpu_throttled", rule_gpu_throttled},
      // On each process's critical path (critical_path.cpp, path_rules*.cpp):
      // the time a cause takes on it is its impact.
      {kOversubscribed, on_path<kOversubscribed>},
      {kContention, weighed<kContention, rule_cpu_contention, true>},
      {kThrottled, on_path<kThrottled>},
      {kMemoryLimit, on_path<kMemoryLimit>},
      {kIo, weighed<kIo, rule_io_stall, true>},
      {kDiskWrite, on_path<kDiskWrite>},
      {kTimer, on_path<kTimer>},
      {kAutotune, on_path<kAutotune>},
      {kCompile, on_path<kCompile>},
      {"memory_pressure", rule_memory_pressure},
      {"tcp_retransmit", rule_tcp_retransmit},
      {"straggler_rank", rule_cross_rank_straggler},
      {"network_degraded", rule_cross_rank_network},
      {"gpu_shared", rule_gpu_shared},
      {kMemcpy, weighed<kMemcpy, rule_memcpy_bound, false>},
      {kChurn, weighed<kChurn, rule_allocator_churn, false>},
      {"graph_recapture", rule_graph_recapture},
      {"cold_start", rule_cold_start},
      {kSync, on_path<kSync>},
      {kInput, on_path<kInput>},
      {kGil, on_path<kGil>},
      {kLock, on_path<kLock>},
      {kPin, on_path<kPin>},
      {kHost, on_path<kHost>},
      {kLaunch, on_path<kLaunch>},
      {kGpu, on_path<kGpu>},
  };
  return rules;
}

}  // namespace causeway::analyze
