// SPDX-License-Identifier: Apache-2.0
#include "causeway/store/memory_reads.h"

#include "causeway/common/op_table.h"
#include "read_util.h"

namespace causeway::store {

namespace {

std::optional<int64_t> first_int(Connection& db, const std::string& sql) {
  auto st = db.prepare(sql);
  if (st.step() && !st.col_null(0)) return st.col_int(0);
  return std::nullopt;
}

std::vector<ProcessTime> process_times(Connection& db, const std::string& sql) {
  std::vector<ProcessTime> out;
  auto st = db.prepare(sql);
  while (st.step())
    if (!st.col_null(2)) out.push_back({st.col_int(0), uint32_t(st.col_int(1)), st.col_int(2)});
  return out;
}

}  // namespace

std::vector<ProcessTime> exited_last_calls(Connection& db, const OpIds& ops, std::optional<uint32_t> pid) {
  // One grouped pass over the calls, not one walk of the ts index per exited
  // process: a process with no such call (a fork storm's shells) walked the
  // whole table back to its start, so 3,000 of them took minutes.
  if (pid)
    return process_times(db, sql<"SELECT session_id, pid, max(ts_ns) FROM cuda_call_events WHERE op_id IN ({})"
                                 " AND pid = {} AND session_id IN (SELECT p.session_id FROM processes p WHERE"
                                 " p.pid = {} AND p.end_ts_ns IS NOT NULL) GROUP BY session_id, pid">(
        comma_list(ops), *pid, *pid));
  return process_times(db, sql<"SELECT session_id, pid, max(ts_ns) FROM cuda_call_events WHERE op_id IN ({})"
                               " AND (session_id, pid) IN (SELECT p.session_id, p.pid FROM processes p WHERE"
                               " p.end_ts_ns IS NOT NULL) GROUP BY session_id, pid">(comma_list(ops)));
}

std::vector<ProcessTime> first_calls(Connection& db, const OpIds& ops, const Window& w) {
  return process_times(db, sql<"SELECT session_id, pid, min(ts_ns) FROM cuda_call_events WHERE op_id IN ({}){}"
                               " GROUP BY session_id, pid">(comma_list(ops), w.sql_and()));
}

void each_memory_call(Connection& db, const OpIds& ops, const Window& w,
                      const std::function<void(const MemoryCall&)>& f) {
  auto st = db.prepare(sql<"SELECT session_id, pid, tid, ts_ns, op_id, ret, coalesce(bytes, 0), addr, "
                           "coalesce(stack_id, -1) FROM cuda_call_events WHERE op_id IN ({}){}"
                           " ORDER BY session_id, pid, ts_ns">(comma_list(ops), w.sql_and()));
  MemoryCall c;
  while (st.step()) {
    c = {st.col_int(0), st.col_int(1), st.col_int(2), st.col_int(3), st.col_int(4), st.col_int(5),
         st.col_int(6), st.col_null(7) ? std::nullopt : std::optional<uint64_t>(uint64_t(st.col_int(7))),
         st.col_int(8)};
    f(c);
  }
}

std::pair<int64_t, int64_t> calls_span(Connection& db, int64_t session, uint32_t pid, const OpIds& ops,
                                       const Window& w) {
  auto st = db.prepare(sql<"SELECT min(ts_ns), max(ts_ns) FROM cuda_call_events WHERE {} AND op_id IN ({}) AND {}">(
      of_process(session, pid), comma_list(ops), w.sql_where()));
  if (!st.step()) return {0, 0};
  return {st.col_int(0), st.col_int(1)};
}

std::optional<int64_t> process_gpu_memory_total(Connection& db, int64_t session, uint32_t pid) {
  return first_int(db, sql<"SELECT d.mem_total FROM gpu_devices d WHERE d.session_id = {}"
                           " AND d.mem_total IS NOT NULL AND (d.gpu IN (SELECT gpu FROM gpu_process_samples"
                           " WHERE {}) OR (SELECT count(*) FROM gpu_devices"
                           " WHERE session_id = {}) = 1) ORDER BY d.gpu LIMIT 1">(session, of_process(session, pid),
                                                                                 session));
}

std::optional<int64_t> process_gpu_memory_max(Connection& db, int64_t session, uint32_t pid,
                                              const Window& w) {
  return first_int(db, sql<"SELECT max(mem_used) FROM gpu_process_samples WHERE {} AND {}">(
                           of_process(session, pid), w.sql_where()));
}

std::optional<GpuMemoryUse> gpu_memory_near(Connection& db, int64_t session, int64_t at_ns,
                                            int64_t within_ns) {
  auto st = db.prepare(sql<"SELECT s.mem_used, d.mem_total FROM gpu_samples s LEFT JOIN gpu_devices d ON "
                           "d.session_id = s.session_id AND d.gpu = s.gpu WHERE s.session_id = {}"
                           " AND s.ts_ns BETWEEN {} AND {} AND s.mem_used IS NOT NULL ORDER BY "
                           "abs(s.ts_ns - {}), s.mem_used DESC LIMIT 1">(session, at_ns - within_ns,
                                                                         at_ns + within_ns, at_ns));
  if (!st.step()) return std::nullopt;
  GpuMemoryUse u{st.col_int(0), std::nullopt};
  if (!st.col_null(1)) u.total = st.col_int(1);
  return u;
}

std::optional<int64_t> process_gpu_memory_near(Connection& db, int64_t session, uint32_t pid, int64_t at_ns,
                                               int64_t within_ns) {
  return first_int(db, sql<"SELECT mem_used FROM gpu_process_samples WHERE {} AND ts_ns BETWEEN {} AND {}"
                           " AND mem_used IS NOT NULL ORDER BY abs(ts_ns - {}) LIMIT 1">(
                           of_process(session, pid), at_ns - within_ns, at_ns + within_ns, at_ns));
}

int64_t most_baseline_calls(Connection& db, const OpIds& ops) {
  return db.query_int(sql<"SELECT coalesce(max(count), 0) FROM baseline WHERE op_id IN ({})">(comma_list(ops)))
      .value_or(0);
}

std::vector<uint32_t> baseline_pids(Connection& db, const OpIds& ops, int64_t min_calls) {
  auto st = db.prepare(sql<"SELECT pid FROM baseline WHERE op_id IN ({}) AND count >= {} GROUP BY pid">(
      comma_list(ops), min_calls));
  std::vector<uint32_t> out;
  while (st.step()) out.push_back(uint32_t(st.col_int(0)));
  return out;
}

int64_t most_called_op(Connection& db, uint32_t pid, const OpIds& ops) {
  return db.query_int(sql<"SELECT op_id FROM baseline WHERE pid = {} AND op_id IN ({}) ORDER BY count DESC LIMIT 1">(
                          pid, comma_list(ops)))
      .value_or(0);
}

int64_t graph_launches(Connection& db, uint32_t pid) {
  return db.query_int(sql<"SELECT coalesce(sum(count), 0) FROM baseline WHERE pid = {} AND op_id IN ({})">(
                          pid, op_ids_sql_list(OpClass::Graph)))
      .value_or(0);
}

void each_capture_call(Connection& db, const Window& w, uint32_t pid, const CaptureOps& ops,
                       const std::function<void(const CaptureCall&)>& f) {
  const std::string begins = comma_list(ops.begins), ends = comma_list(ops.ends);
  auto st = db.prepare(sql<"SELECT session_id, tid, coalesce(stream, 0), op_id IN ({}), op_id IN ({}), ts_ns,"
                           " dur_ns FROM cuda_call_events WHERE {} AND pid = {} AND op_id IN ({},{},{})"
                           " ORDER BY ts_ns">(begins, ends, w.sql_where(), pid, begins, ends,
                                              comma_list(ops.instantiates)));
  CaptureCall c;
  while (st.step()) {
    c = {st.col_int(0), st.col_int(1), st.col_int(2), st.col_int(3) != 0, st.col_int(4) != 0, st.col_int(5),
         st.col_int(6)};
    f(c);
  }
}

std::string capture_stack_ids_sql(const Window& w, uint32_t pid, const CaptureOps& ops) {
  return sql<"SELECT stack_id FROM cuda_call_events WHERE {} AND pid = {} AND op_id IN ({})">(
      w.sql_where(), pid, comma_list(ops.begins));
}

std::vector<AllocFreeCall> alloc_free_calls(Connection& db, const Window& w, uint32_t pid) {
  const std::string allocs = op_ids_sql_list(OpClass::Alloc);
  auto st = db.prepare(sql<"SELECT ts_ns, dur_ns, op_id IN ({}), addr, tid FROM cuda_call_events"
                           " WHERE {} AND pid = {} AND ret = 0 AND op_id IN ({},{}) ORDER BY ts_ns">(
      allocs, w.sql_where(), pid, allocs, op_ids_sql_list(OpClass::Free)));
  std::vector<AllocFreeCall> out;
  while (st.step())
    out.push_back({st.col_int(0), st.col_int(1), st.col_int(2) != 0,
                   st.col_null(3) ? std::nullopt : std::optional(st.col_int(3)), uint32_t(st.col_int(4))});
  return out;
}

}  // namespace causeway::store
