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
      "SELECT ts_ns, session_id, pid, tid, op_id, ret, coalesce(stack_id, -1), flags FROM cuda_call_events"
      " WHERE " + in + " AND ret != 0 AND op_id NOT IN (" + op_ids_sql_list(OpClass::Naming) + ") UNION ALL"
      " SELECT ts_ns, session_id, pid, tid, op_id, ret, coalesce(stack_id, -1), 0 FROM nccl_call_events"
      " WHERE " + in + " AND ret != 0 ORDER BY 1");
  CallFailure c;
  while (st.step()) {
    c = {st.col_int(0), st.col_int(1), st.col_int(2), st.col_int(3), st.col_int(4), st.col_int(5),
         st.col_int(6), st.col_int(7)};
    f(c);
  }
}

ProcessCallCounts process_call_counts(Connection& db, const Window& w, uint32_t pid) {
  const std::string in = w.sql_where() + " AND pid = " + std::to_string(pid);
  const std::string naming = op_ids_sql_list(OpClass::Naming);
  ProcessCallCounts n;
  // Launch rows may be sampled: launch_stats has them all when the whole
  // process is in the window.
  n.calls = count(db, "SELECT count(*) FROM cuda_call_events WHERE " + in + " AND op_id NOT IN (" + naming +
                          ") AND flags & " + std::to_string(CW_CALL_AGGREGATED) + " = 0");
  n.calls += count(db, "SELECT coalesce(sum(calls), 0) FROM launch_stats WHERE " + in);
  n.calls += count(db, "SELECT count(*) FROM nccl_call_events WHERE " + in);
  n.failed_launches = count(db, "SELECT coalesce(sum(errors), 0) FROM launch_stats WHERE " + in);
  n.succeeded = count(db, "SELECT count(*) FROM cuda_call_events WHERE " + in +
                              " AND ret = 0 AND op_id NOT IN (" + naming + ")");
  n.succeeded += count(db, "SELECT count(*) FROM nccl_call_events WHERE " + in + " AND ret = 0");
  n.succeeded += count(db, "SELECT coalesce(sum(calls - errors), 0) FROM launch_stats WHERE " + in);
  return n;
}

std::vector<OpReturn> last_cuda_calls(Connection& db, int64_t session, uint32_t pid, int64_t from_ns,
                                      int64_t to_ns, int limit) {
  auto st = db.prepare("SELECT op_id, ret FROM cuda_call_events WHERE " + of_process(session, pid) +
                       " AND ts_ns <= " + std::to_string(to_ns) + " AND ts_ns >= " + std::to_string(from_ns) +
                       " AND op_id NOT IN (" + op_ids_sql_list(OpClass::Naming) +
                       ") ORDER BY ts_ns DESC LIMIT " + std::to_string(limit));
  std::vector<OpReturn> out;
  while (st.step()) out.push_back({st.col_int(0), st.col_int(1)});
  return out;
}

std::string call_kernel(Connection& db, int64_t session, uint32_t pid, uint32_t tid, int64_t ts_ns) {
  auto st = db.prepare("SELECT coalesce(k.name, '') FROM cuda_call_events c LEFT JOIN kernels k ON k.id = "
                       "c.kernel_id WHERE c.session_id = " + std::to_string(session) + " AND c.pid = " +
                       std::to_string(pid) + " AND c.tid = " + std::to_string(tid) + " AND c.ts_ns = " +
                       std::to_string(ts_ns) + " LIMIT 1");
  return st.step() ? st.col_text(0) : std::string();
}

int64_t last_good_sync_end(Connection& db, int64_t session, uint32_t pid, int64_t before_ns) {
  return count(db, "SELECT coalesce(max(ts_ns + dur_ns), 0) FROM cuda_call_events WHERE " +
                       of_process(session, pid) + " AND ret = 0 AND op_id IN (" +
                       op_ids_sql_list(OpClass::Sync) + "," + blocking_copy_ids_sql_list() + ") AND ts_ns < " +
                       std::to_string(before_ns));
}

std::vector<LaunchedKernel> kernels_launched(Connection& db, int64_t session, uint32_t pid, int64_t from_ns,
                                             int64_t to_ns) {
  const std::string launches = op_ids_sql_list(OpClass::Launch), from = std::to_string(from_ns);
  auto st = db.prepare(
      "SELECT coalesce(k.name, ''), max(1, sum(c.op_id IN (" + launches + "))), max(c.ts_ns),"
      " max(coalesce(c.stack_id, -1)),"
      " (SELECT count(*) FROM cuda_call_events b WHERE b.session_id = c.session_id AND b.pid = c.pid AND"
      " b.kernel_id IS c.kernel_id AND b.ts_ns < " + from + ") AS before_n"
      " FROM cuda_call_events c LEFT JOIN kernels k ON k.id = c.kernel_id WHERE c.session_id = " +
      std::to_string(session) + " AND c.pid = " + std::to_string(pid) + " AND (c.op_id IN (" + launches +
      ") OR (c.op_id IN (" + op_ids_sql_list(OpClass::Naming) + ") AND c.kernel_id IS NOT NULL))" +
      " AND c.ts_ns >= " + from + " AND c.ts_ns <= " + std::to_string(to_ns) + " AND c.ret = 0 GROUP BY"
      " c.kernel_id ORDER BY before_n, CASE WHEN before_n = 0 THEN min(c.ts_ns) ELSE -max(c.ts_ns) END");
  std::vector<LaunchedKernel> out;
  while (st.step())
    out.push_back({st.col_text(0), st.col_int(1), st.col_int(2), st.col_int(3), st.col_int(4)});
  return out;
}

std::optional<int64_t> last_module_load_stack(Connection& db, int64_t session, uint32_t pid, int64_t from_ns,
                                              int64_t to_ns) {
  auto st = db.prepare("SELECT stack_id FROM cuda_call_events WHERE " + of_process(session, pid) +
                       " AND op_id IN (" + op_ids_sql_list(OpClass::Module) +
                       ") AND ret = 0 AND stack_id IS NOT NULL AND ts_ns >= " + std::to_string(from_ns) +
                       " AND ts_ns <= " + std::to_string(to_ns) + " ORDER BY ts_ns DESC LIMIT 1");
  if (!st.step()) return std::nullopt;
  return st.col_int(0);
}

}  // namespace causeway::store
