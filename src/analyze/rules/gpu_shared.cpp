// SPDX-License-Identifier: Apache-2.0
// gpu_shared: several processes give the GPU work in the same 100 ms
// intervals and a process's syncs are slower then than when it runs alone.
// CUDA calls carry no device id: ranks of one NCCL communicator are on
// different GPUs and are left out; NVML's per-process samples, where present,
// say which GPU each process used, and processes NVML saw on different GPUs
// are left out too; without them, the others are assumed to share one.
#include <algorithm>
#include <map>
#include <set>

#include "../rule_context.h"

#include "causeway/common/op_table.h"
#include "causeway/store/gpu_reads.h"

namespace causeway::analyze {

namespace {
constexpr int64_t kBucketNs = store::kGpuSlotNs;
constexpr int64_t kMinSharedBuckets = 10;  // >= 1 s launching together
}

std::vector<CausalChain> rule_gpu_shared(const RuleContext& ctx) {
  std::vector<CausalChain> out;
  auto& db = ctx.db;
  const store::Window w = ctx.store_window();
  // temp.gpu_slots (the engine's pass): calls that give the GPU work per
  // process per 100 ms; ranks of one job launch together by design and are
  // left out.
  int64_t shared = store::create_shared_buckets(db);
  if (shared < kMinSharedBuckets) return out;

  // NVML's view: the GPUs each process was seen on. A process seen only on
  // GPUs no other candidate used shares nothing.
  std::map<uint32_t, std::set<int64_t>> gpus_of;
  for (const auto& [pid, gpu] : store::gpus_of_candidates(db, w)) gpus_of[pid].insert(gpu);
  auto shares_a_gpu = [&](uint32_t pid) {
    auto mine = gpus_of.find(pid);
    if (mine == gpus_of.end()) return true;  // NVML did not see it: unknown, assume shared
    for (const auto& [other, gpus] : gpus_of)
      if (other != pid)
        for (int64_t g : gpus)
          if (mine->second.count(g)) return true;
    return false;
  };
  if (!gpus_of.empty()) {
    std::vector<uint32_t> apart;
    for (const auto& [pid, gpus] : gpus_of)
      if (!shares_a_gpu(pid)) apart.push_back(pid);
    shared = store::drop_buckets_of_apart(db, apart);
    if (shared < kMinSharedBuckets) return out;
  }

  // Each sharing process: its sync mean alone vs shared.
  struct P { uint32_t pid; int64_t launches; double solo, together; int64_t n_together; };
  std::vector<P> ps;
  for (const auto& [pid, calls] : store::work_in_shared_buckets(db))
    if (shares_a_gpu(pid)) ps.push_back({pid, calls, 0, 0, 0});
  if (ps.size() < 2) return out;
  for (auto& p : ps) {
    const auto syncs = store::sync_sharing(db, w, p.pid);
    p.solo = syncs.alone_ns.value_or(0);
    p.together = syncs.shared_ns.value_or(0);
    p.n_together = syncs.shared_calls;
  }
  // The victim: the process whose syncs inflated the most.
  auto ratio = [](const P& p) { return p.solo > 0 ? p.together / p.solo : 0.0; };
  auto victim = std::max_element(ps.begin(), ps.end(),
                                 [&](const P& a, const P& b) { return ratio(a) < ratio(b); });
  double x = ratio(*victim);
  CausalChain c;
  c.severity = x >= 1.5 ? Severity::High : (x >= 1.2 || x == 0) ? Severity::Medium : Severity::Low;
  c.impact_ns = x > 1 ? int64_t((victim->together - victim->solo) * victim->n_together) : 0;
  const int64_t sync_op = store::busiest_sync_op(db, victim->pid);
  c.symptom = ctx.symptom(victim->pid, sync_op ? sync_op : 1);
  // Where the victim waits for the GPU it shares.
  c.frame = ctx.top_frame(store::op_stack_ids_sql(w, victim->pid, sync_op));
  std::string names;
  nlohmann::json procs = nlohmann::json::array();
  for (const auto& p : ps) {
    auto comm = ctx.comm(p.pid);
    names += (names.empty() ? "" : ", ") + std::string("pid ") + std::to_string(p.pid) + " " + comm;
    procs.push_back({{"pid", p.pid}, {"comm", comm}, {"calls_shared", p.launches}});
  }
  c.evidence.push_back({std::to_string(ps.size()) + " processes gave the GPU work in the same " +
                            "100 ms intervals for " + fixed1(shared * kBucketNs / 1e9) + " s: " +
                            names,
                        {{"processes", procs}, {"shared_ns", shared * kBucketNs}}});
  for (const auto& p : ps) {
    if (p.solo <= 0 || p.together <= 0) continue;
    c.evidence.push_back({"pid " + std::to_string(p.pid) + " sync mean " + ms(int64_t(p.solo)) +
                              " alone, " + ms(int64_t(p.together)) + " sharing (" +
                              fixed1(ratio(p)) + "x)",
                          {{"pid", p.pid}, {"sync_mean_alone_ns", int64_t(p.solo)},
                           {"sync_mean_shared_ns", int64_t(p.together)}, {"inflation", ratio(p)}}});
  }
  // NVML: each process's share of the GPU's SMs while they ran together.
  std::map<int64_t, std::vector<std::pair<uint32_t, double>>> on_gpu;
  for (const auto& p : ps)
    for (const auto& [gpu, sm] : store::sm_util_when_shared(db, w, p.pid)) on_gpu[gpu].emplace_back(p.pid, sm);
  for (const auto& [gpu, shares] : on_gpu) {
    if (shares.size() < 2) continue;
    std::string words;
    nlohmann::json data = nlohmann::json::array();
    for (const auto& [pid, sm] : shares) {
      words += (words.empty() ? "" : ", ") + std::string("pid ") + std::to_string(pid) + " " + fixed1(sm) + "%";
      data.push_back({{"pid", pid}, {"sm_util", sm}});
    }
    c.evidence.push_back({"NVML saw them on GPU " + std::to_string(gpu) + " together, SM time " + words,
                          {{"gpu", gpu}, {"sm_util", data}}});
  }
  if (x == 0) c.evidence.push_back({"no interval with one process alone to compare against", {}});
  c.recommendation = "These processes time-slice one GPU (" + names +
                     "): give each its own GPU (CUDA_VISIBLE_DEVICES), or when they must "
                     "share, run them under MPS or on MIG partitions.";
  out.push_back(std::move(c));
  return out;
}

}  // namespace causeway::analyze
