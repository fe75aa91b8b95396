// SPDX-License-Identifier: Apache-2.0
// Every explain rule, in one list. Adding a rule: one file here, one line below.
#include "../rule_context.h"

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
std::vector<CausalChain> rule_sync_bound(const RuleContext&);
std::vector<CausalChain> rule_launch_bound(const RuleContext&);
std::vector<CausalChain> rule_input_bound(const RuleContext&);
std::vector<CausalChain> rule_host_bound(const RuleContext&);
std::vector<CausalChain> rule_gil_contention(const RuleContext&);
std::vector<CausalChain> rule_lock_contention(const RuleContext&);
std::vector<CausalChain> rule_pinning(const RuleContext&);

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
      {"cpu_contention", rule_cpu_contention},
      {"io_stall", rule_io_stall},
      {"memory_pressure", rule_memory_pressure},
      {"tcp_retransmit", rule_tcp_retransmit},
      {"straggler_rank", rule_cross_rank_straggler},
      {"network_degraded", rule_cross_rank_network},
      {"gpu_shared", rule_gpu_shared},
      {"memcpy_bound", rule_memcpy_bound},
      {"allocator_churn", rule_allocator_churn},
      {"graph_recapture", rule_graph_recapture},
      {"cold_start", rule_cold_start},
      // On each dispatcher thread's time account (account.cpp).
      {"sync_bound", rule_sync_bound},
      {"launch_bound", rule_launch_bound},
      {"input_bound", rule_input_bound},
      {"gil_contention", rule_gil_contention},
      {"lock_contention", rule_lock_contention},
      {"pinning", rule_pinning},
      {"host_bound", rule_host_bound},
  };
  return rules;
}

}  // namespace causeway::analyze
