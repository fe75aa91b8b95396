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

namespace causeway::analyze {

namespace {
constexpr int64_t kBucketNs = 100'000'000;
constexpr int64_t kMinSharedBuckets = 10;  // >= 1 s launching together
}

std::vector<CausalChain> rule_gpu_shared(const RuleContext& ctx) {
  std::vector<CausalChain> out;
  auto& db = ctx.db;
  // temp.gpu_slots (the engine's pass): calls that give the GPU work per
  // process per 100 ms; ranks of one job launch together by design and are
  // left out.
  const std::string solo_pids = "pid NOT IN (SELECT pid FROM nccl_call_events WHERE nranks > 1)";
  db.exec("DROP TABLE IF EXISTS temp.shared_buckets");
  db.exec("CREATE TEMP TABLE shared_buckets AS SELECT b FROM gpu_slots WHERE " + solo_pids + " GROUP BY b "
          "HAVING count(*) >= 2");
  int64_t shared = ctx.scalar("SELECT count(*) FROM shared_buckets");
  if (shared < kMinSharedBuckets) return out;

  // NVML's view: the GPUs each process was seen on. A process seen only on
  // GPUs no other candidate used shares nothing.
  std::map<uint32_t, std::set<int64_t>> gpus_of;
  ctx.each("SELECT DISTINCT pid, gpu FROM gpu_process_samples WHERE " + ctx.in_window() +
               " AND pid IN (SELECT pid FROM gpu_slots WHERE " + solo_pids + ")",
           [&](store::Statement& s) { gpus_of[uint32_t(s.col_int(0))].insert(s.col_int(1)); });
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
    db.exec("DROP TABLE IF EXISTS temp.apart_pids");
    db.exec("CREATE TEMP TABLE apart_pids (pid INTEGER PRIMARY KEY)");
    for (const auto& [pid, gpus] : gpus_of)
      if (!shares_a_gpu(pid)) db.exec("INSERT INTO apart_pids VALUES (" + std::to_string(pid) + ")");
    db.exec("DELETE FROM shared_buckets WHERE b NOT IN (SELECT b FROM gpu_slots WHERE " + solo_pids +
            " AND pid NOT IN (SELECT pid FROM apart_pids) GROUP BY b HAVING count(*) >= 2)");
    shared = ctx.scalar("SELECT count(*) FROM shared_buckets");
    if (shared < kMinSharedBuckets) return out;
  }

  // Each sharing process: its sync mean alone vs shared.
  struct P { uint32_t pid; int64_t launches; double solo, together; int64_t n_together; };
  std::vector<P> ps;
  ctx.each("SELECT pid, sum(n) FROM gpu_slots WHERE " + solo_pids + " AND b IN (SELECT b FROM shared_buckets) "
           "GROUP BY pid ORDER BY 2 DESC",
           [&](store::Statement& s) {
             if (shares_a_gpu(uint32_t(s.col_int(0)))) ps.push_back({uint32_t(s.col_int(0)), s.col_int(1), 0, 0, 0});
           });
  if (ps.size() < 2) return out;
  for (auto& p : ps)
    ctx.each("SELECT avg(CASE WHEN sb.b IS NULL THEN c.dur_ns END), avg(CASE WHEN sb.b IS NOT "
             "NULL THEN c.dur_ns END), count(sb.b) FROM cuda_call_events c LEFT JOIN "
             "shared_buckets sb ON sb.b = c.ts_ns / " + std::to_string(kBucketNs) + " WHERE " +
                 ctx.in_window("c.") + " AND c.pid = " + std::to_string(p.pid) +
                 " AND c.op_id IN (" + op_ids_sql_list(OpClass::Sync) + ")",
             [&](store::Statement& s) {
               p.solo = s.col_null(0) ? 0 : s.col_double(0);
               p.together = s.col_null(1) ? 0 : s.col_double(1);
               p.n_together = s.col_int(2);
             });
  // The victim: the process whose syncs inflated the most.
  auto ratio = [](const P& p) { return p.solo > 0 ? p.together / p.solo : 0.0; };
  auto victim = std::max_element(ps.begin(), ps.end(),
                                 [&](const P& a, const P& b) { return ratio(a) < ratio(b); });
  double x = ratio(*victim);
  CausalChain c;
  c.severity = x >= 1.5 ? Severity::High : (x >= 1.2 || x == 0) ? Severity::Medium : Severity::Low;
  c.impact_ns = x > 1 ? int64_t((victim->together - victim->solo) * victim->n_together) : 0;
  int64_t sync_op = ctx.scalar("SELECT op_id FROM baseline WHERE pid = " +
                               std::to_string(victim->pid) + " AND op_id IN (" +
                               op_ids_sql_list(OpClass::Sync) + ") ORDER BY total_ns DESC LIMIT 1");
  c.symptom = ctx.symptom(victim->pid, sync_op ? sync_op : 1);
  // Where the victim waits for the GPU it shares.
  c.frame = ctx.top_frame("SELECT stack_id FROM cuda_call_events WHERE " + ctx.in_window() + " AND pid = " +
                          std::to_string(victim->pid) + " AND op_id = " + std::to_string(sync_op));
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
    ctx.each("SELECT gpu, avg(sm_util) FROM gpu_process_samples s WHERE " + ctx.in_window() + " AND pid = " +
                 std::to_string(p.pid) + " AND sm_util IS NOT NULL AND EXISTS (SELECT 1 FROM shared_buckets sb WHERE "
                 "sb.b = s.ts_ns / " + std::to_string(kBucketNs) + ") GROUP BY gpu",
             [&](store::Statement& s) { on_gpu[s.col_int(0)].emplace_back(p.pid, s.col_double(1)); });
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
