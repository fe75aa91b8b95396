// SPDX-License-Identifier: Apache-2.0
#include "causeway/store/failure_reads.h"

#include "causeway/common/op_table.h"
#include "causeway/events.h"
#include "read_util.h"

namespace causeway::store {

namespace {

int64_t count(Connection& db, const std::string& sql) { return db.query_int(sql).value_or(0); }

}  // namespace

void each_call_failure(Connection& db, const Window& w, const std::function<void(const CallFailure&)>& f) {
  const std::string in = w.sql_where();
  auto st = db.prepare(
      sql<"SELECT ts_ns, session_id, pid, tid, op_id, ret, coalesce(stack_id, -1), flags FROM cuda_call_events"
          " WHERE {} AND ret != 0 AND op_id NOT IN ({}) UNION ALL"
          " SELECT ts_ns, session_id, pid, tid, op_id, ret, coalesce(stack_id, -1), 0 FROM nccl_call_events"
          " WHERE {} AND ret != 0 ORDER BY 1">(in, op_ids_sql_list(OpClass::Naming), in));
  CallFailure c;
  while (st.step()) {
    c = {st.col_int(0), st.col_int(1), st.col_int(2), st.col_int(3), st.col_int(4), st.col_int(5),
         st.col_int(6), st.col_int(7)};
    f(c);
  }
}

ProcessCallCounts process_call_counts(Connection& db, const Window& w, uint32_t pid) {
  const std::string in = w.sql_where() + sql<" AND pid = {}">(pid);
  const std::string naming = op_ids_sql_list(OpClass::Naming);
  ProcessCallCounts n;
  // Launch rows may be sampled: launch_stats has them all when the whole
  // process is in the window.
  n.calls = count(db, sql<"SELECT count(*) FROM cuda_call_events WHERE {} AND op_id NOT IN ({}) AND flags & {} = 0">(
                          in, naming, CW_CALL_AGGREGATED));
  n.calls += count(db, sql<"SELECT coalesce(sum(calls), 0) FROM launch_stats WHERE {}">(in));
  n.calls += count(db, sql<"SELECT count(*) FROM nccl_call_events WHERE {}">(in));
  n.failed_launches = count(db, sql<"SELECT coalesce(sum(errors), 0) FROM launch_stats WHERE {}">(in));
  n.succeeded = count(db, sql<"SELECT count(*) FROM cuda_call_events WHERE {} AND ret = 0 AND op_id NOT IN ({})">(
                              in, naming));
  n.succeeded += count(db, sql<"SELECT count(*) FROM nccl_call_events WHERE {} AND ret = 0">(in));
  n.succeeded += count(db, sql<"SELECT coalesce(sum(calls - errors), 0) FROM launch_stats WHERE {}">(in));
  return n;
}

std::vector<OpReturn> last_cuda_calls(Connection& db, int64_t session, uint32_t pid, int64_t from_ns,
                                      int64_t to_ns, int limit) {
  auto st = db.prepare(sql<"SELECT op_id, ret FROM cuda_call_events WHERE {} AND ts_ns <= {} AND ts_ns >= {}"
                           " AND op_id NOT IN ({}) ORDER BY ts_ns DESC LIMIT {}">(
      of_process(session, pid), to_ns, from_ns, op_ids_sql_list(OpClass::Naming), limit));
  std::vector<OpReturn> out;
  while (st.step()) out.push_back({st.col_int(0), st.col_int(1)});
  return out;
}

std::string call_kernel(Connection& db, int64_t session, uint32_t pid, uint32_t tid, int64_t ts_ns) {
  auto st = db.prepare(sql<"SELECT coalesce(k.name, '') FROM cuda_call_events c LEFT JOIN kernels k ON k.id = "
                           "c.kernel_id WHERE c.session_id = {} AND c.pid = {} AND c.tid = {} AND c.ts_ns = {}"
                           " LIMIT 1">(session, pid, tid, ts_ns));
  return st.step() ? st.col_text(0) : std::string();
}

int64_t last_good_sync_end(Connection& db, int64_t session, uint32_t pid, int64_t before_ns) {
  return count(db, sql<"SELECT coalesce(max(ts_ns + dur_ns), 0) FROM cuda_call_events WHERE {}"
                       " AND ret = 0 AND op_id IN ({},{}) AND ts_ns < {}">(
                       of_process(session, pid), op_ids_sql_list(OpClass::Sync), blocking_copy_ids_sql_list(),
                       before_ns));
}

std::vector<LaunchedKernel> kernels_launched(Connection& db, int64_t session, uint32_t pid, int64_t from_ns,
                                             int64_t to_ns) {
  const std::string launches = op_ids_sql_list(OpClass::Launch);
  auto st = db.prepare(sql<
      "SELECT coalesce(k.name, ''), max(1, sum(c.op_id IN ({}))), max(c.ts_ns),"
      " max(coalesce(c.stack_id, -1)),"
      " (SELECT count(*) FROM cuda_call_events b WHERE b.session_id = c.session_id AND b.pid = c.pid AND"
      " b.kernel_id IS c.kernel_id AND b.ts_ns < {}) AS before_n"
      " FROM cuda_call_events c LEFT JOIN kernels k ON k.id = c.kernel_id WHERE c.session_id = {} AND c.pid = {}"
      " AND (c.op_id IN ({}) OR (c.op_id IN ({}) AND c.kernel_id IS NOT NULL))"
      " AND c.ts_ns >= {} AND c.ts_ns <= {} AND c.ret = 0 GROUP BY"
      " c.kernel_id ORDER BY before_n, CASE WHEN before_n = 0 THEN min(c.ts_ns) ELSE -max(c.ts_ns) END">(
      launches, from_ns, session, pid, launches, op_ids_sql_list(OpClass::Naming), from_ns, to_ns));
  std::vector<LaunchedKernel> out;
  while (st.step())
    out.push_back({st.col_text(0), st.col_int(1), st.col_int(2), st.col_int(3), st.col_int(4)});
  return out;
}

std::optional<int64_t> last_module_load_stack(Connection& db, int64_t session, uint32_t pid, int64_t from_ns,
                                              int64_t to_ns) {
  auto st = db.prepare(sql<"SELECT stack_id FROM cuda_call_events WHERE {} AND op_id IN ({}) AND ret = 0"
                           " AND stack_id IS NOT NULL AND ts_ns >= {} AND ts_ns <= {} ORDER BY ts_ns DESC LIMIT 1">(
      of_process(session, pid), op_ids_sql_list(OpClass::Module), from_ns, to_ns));
  if (!st.step()) return std::nullopt;
  return st.col_int(0);
}

}  // namespace causeway::store
