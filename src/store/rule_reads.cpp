// SPDX-License-Identifier: Apache-2.0
#include "causeway/store/rule_reads.h"

#include "causeway/common/op_table.h"
#include "causeway/store/checked_sql.h"
#include "causeway/store/lookups.h"
#include "causeway/store/overlap.h"
#include "causeway/store/path_reads.h"
#include "causeway/store/path_rule_reads.h"

namespace causeway::store {

namespace {

// The end of a call of the TEMP table slow (aliased s), for overlap().
const std::string kSlowEnd = sql_in<"s slow", "s.end_ns">();

// The process's slow calls and their threads' off-CPU intervals inside them
// in which another workload ran (cpu_contention's reads share it): never the
// tracer's own threads (tracer_pids_sql).
std::string preempted_inside(Connection& db, uint32_t pid, int64_t longest_offcpu_ns) {
  const std::string p = std::to_string(pid);
  const auto ov = overlap(sql<"offcpu_events">(), "o", "s", kSlowEnd, true, longest_offcpu_ns);
  return sql_in<"o offcpu_events",
                " FROM slow s{} LEFT JOIN comms cm ON cm.id = o.by_comm_id WHERE o.state = 0"
                " AND s.pid = {} AND coalesce(o.by_pid, 0) NOT IN (SELECT 0 UNION SELECT {} UNION {})"
                " AND coalesce(o.by_pid, 0) NOT IN ({})">(ov.join, p, p, own_workers_sql(pid, -1),
                                                          tracer_pids_sql(db));
}

}  // namespace

// allocator_churn

std::vector<AllocFreeCounts> alloc_free_counts(Connection& db, const Window& w) {
  const std::string allocs = op_ids_sql_list(OpClass::Alloc), frees = op_ids_sql_list(OpClass::Free);
  // A failed allocation allocated nothing: counted apart.
  auto st = db.prepare(sql<"SELECT pid, sum(op_id IN ({}) AND ret = 0), sum(op_id IN ({}) AND ret = 0),"
                           " sum(CASE WHEN ret = 0 THEN dur_ns ELSE 0 END), sum(ret != 0) FROM cuda_call_events"
                           " WHERE {} AND op_id IN ({},{}) GROUP BY pid">(allocs, frees, w.sql_where(), allocs,
                                                                          frees));
  std::vector<AllocFreeCounts> out;
  while (st.step())
    out.push_back({uint32_t(st.col_int(0)), st.col_int(1), st.col_int(2), st.col_int(3), st.col_int(4)});
  return out;
}

std::optional<int64_t> costliest_alloc_free_op(Connection& db, const Window& w, uint32_t pid) {
  const std::string allocs = op_ids_sql_list(OpClass::Alloc), frees = op_ids_sql_list(OpClass::Free);
  return db.query_int(sql<"SELECT op_id FROM cuda_call_events WHERE {} AND pid = {} AND ret = 0 AND op_id IN"
                          " ({},{}) GROUP BY op_id ORDER BY sum(dur_ns) DESC LIMIT 1">(w.sql_where(), pid, allocs,
                                                                                       frees));
}

int64_t allocated_bytes(Connection& db, const Window& w, uint32_t pid) {
  return db.query_int(sql<"SELECT coalesce(sum(bytes), 0) FROM cuda_call_events WHERE {} AND pid = {}"
                          " AND op_id IN ({}) AND ret = 0">(w.sql_where(), pid, op_ids_sql_list(OpClass::Alloc)))
      .value_or(0);
}

int64_t sync_calls_between(Connection& db, uint32_t pid, int64_t from_ns, int64_t to_ns) {
  return db.query_int(sql<"SELECT count(*) FROM cuda_call_events WHERE pid = {} AND op_id IN ({})"
                          " AND ts_ns >= {} AND ts_ns < {}">(pid, op_ids_sql_list(OpClass::Sync), from_ns, to_ns))
      .value_or(0);
}

std::vector<CallTime> slow_alloc_free_calls(Connection& db, uint32_t pid) {
  auto st = db.prepare(sql<"SELECT ts_ns, dur_ns FROM slow WHERE pid = {} AND op_id IN ({},{}) ORDER BY ts_ns">(
      pid, op_ids_sql_list(OpClass::Alloc), op_ids_sql_list(OpClass::Free)));
  std::vector<CallTime> out;
  while (st.step()) out.push_back({st.col_int(0), st.col_int(1)});
  return out;
}

std::string alloc_free_stack_sql(const Window& w, uint32_t pid, OpClass cls) {
  const std::string ops = op_ids_sql_list(cls);
  return sql<"SELECT stack_id FROM slow WHERE pid = {} AND op_id IN ({}) UNION ALL SELECT stack_id FROM"
             " cuda_call_events WHERE 0 = (SELECT count(*) FROM slow WHERE pid = {} AND op_id IN ({})) AND {}"
             " AND pid = {} AND op_id IN ({})">(pid, ops, pid, ops, w.sql_where(), pid, ops);
}

// memcpy_bound

std::vector<ProcessCopyTotal> baseline_copy_totals(Connection& db) {
  auto st = db.prepare(
      sql<"SELECT pid, sum(total_ns) FROM baseline WHERE op_id IN ({}) GROUP BY pid">(op_ids_sql_list(OpClass::Copy)));
  std::vector<ProcessCopyTotal> out;
  while (st.step()) out.push_back({uint32_t(st.col_int(0)), st.col_int(1)});
  return out;
}

std::optional<int64_t> costliest_copy_op(Connection& db, uint32_t pid) {
  return db.query_int(sql<"SELECT op_id FROM baseline WHERE pid = {} AND op_id IN ({}) ORDER BY total_ns DESC"
                          " LIMIT 1">(pid, op_ids_sql_list(OpClass::Copy)));
}

std::vector<ProcessCopyTime> copy_time_on_cpu(Connection& db, const Window& w,
                                              const std::vector<WorkStart>& starts,
                                              int64_t longest_offcpu_ns) {
  std::vector<ProcessCopyTime> out;
  if (starts.empty()) return out;
  const std::string copies = op_ids_sql_list(OpClass::Copy);
  // Copies from each process's work start on (a model's upload at start-up
  // is start-up): "(CASE c.pid WHEN P THEN c.ts_ns >= T ... END)".
  std::string pids, whens_c, whens_c2;
  for (const auto& s : starts) {
    pids += (pids.empty() ? "" : ",") + std::to_string(s.pid);
    whens_c += sql_in<"c cuda_call_events", " WHEN {} THEN c.ts_ns >= {}">(s.pid, s.from_ns);
    whens_c2 += sql_in<"c2 cuda_call_events", " WHEN {} THEN c2.ts_ns >= {}">(s.pid, s.from_ns);
  }
  // Off-CPU intervals of the copy's thread that overlap it, each clipped to
  // the copy: a copy blocked on disk or preempted is other rules' business.
  const auto off =
      overlap(sql<"offcpu_events">(), "o", "c2", sql_in<"c2 cuda_call_events", "c2.ts_ns + c2.dur_ns">(), true,
              longest_offcpu_ns);
  // Read-backs (.item(), scalar copies) are synchronisations, not transfers.
  auto st = db.prepare(sql<
      "SELECT c.pid, sum(c.dur_ns) - coalesce((SELECT sum({}) FROM cuda_call_events c2{} WHERE {}"
      " AND c2.pid = c.pid AND c2.op_id IN ({}) AND NOT {} AND (CASE c2.pid{} END)), 0) FROM cuda_call_events c"
      " WHERE {} AND c.op_id IN ({}) AND NOT {} AND c.pid IN ({}) AND (CASE c.pid{} END) GROUP BY c.pid"
      " ORDER BY 2 DESC">(off.clipped, off.join, w.sql_where("c2."), copies, readback_sql("c2."), whens_c2,
                          w.sql_where("c."), copies, readback_sql("c."), pids, whens_c));
  while (st.step()) out.push_back({uint32_t(st.col_int(0)), st.col_int(1)});
  return out;
}

std::vector<CopyKindTotal> process_copies_by_kind(Connection& db, const Window& w, uint32_t pid) {
  // 12, 71-73, 77: the synchronous copy calls (cudaMemcpy, cuMemcpyHtoD/DtoH/DtoD, cuMemcpy).
  auto st = db.prepare(sql<"SELECT coalesce(kind, 4), count(*), coalesce(sum(bytes), 0), sum(dur_ns),"
                           " sum(op_id IN (12, 71, 72, 73, 77)) FROM cuda_call_events WHERE {} AND pid = {}"
                           " AND op_id IN ({}) GROUP BY 1 ORDER BY 4 DESC">(w.sql_where(), pid,
                                                                           op_ids_sql_list(OpClass::Copy)));
  std::vector<CopyKindTotal> out;
  while (st.step())
    out.push_back({st.col_int(0), st.col_int(1), st.col_int(2), st.col_int(3), st.col_int(4)});
  return out;
}

std::string costliest_stack_sql(const Window& w, uint32_t pid, int64_t op_id) {
  return sql<"SELECT stack_id FROM (SELECT stack_id FROM cuda_call_events WHERE {} AND pid = {} AND op_id = {}"
             " AND stack_id IS NOT NULL GROUP BY stack_id ORDER BY sum(dur_ns) DESC LIMIT 1)">(w.sql_where(), pid,
                                                                                                op_id);
}

// tcp_retransmit

int64_t stage_retransmits(Connection& db, const Window& w) {
  db.exec(sql<"DROP TABLE IF EXISTS temp.rtx">());
  db.exec(sql<"CREATE TEMP TABLE rtx AS SELECT ts_ns, daddr, dport, saddr, session_id FROM tcp_retransmits"
              " WHERE {}">(w.sql_where()));
  const int64_t n = db.query_int(sql<"SELECT count(*) FROM rtx">()).value_or(0);
  if (n > 0) db.exec(sql<"CREATE INDEX temp.rtx_ts ON rtx(ts_ns)">());
  return n;
}

// The process's slow calls with a retransmit of their session inside them:
// " FROM slow s WHERE s.pid = P AND EXISTS (...)", in each of tcp_retransmit's
// reads below (one statement each, so that the alias s is checked with it).

SlowWithRetransmit slow_calls_with_retransmit(Connection& db, uint32_t pid) {
  auto st = db.prepare(sql<"SELECT count(*), coalesce(sum(s.dur_ns - s.p50), 0) FROM slow s WHERE s.pid = {}"
                           " AND EXISTS (SELECT 1 FROM rtx r WHERE r.session_id = s.session_id AND r.ts_ns >= s.ts_ns"
                           " AND r.ts_ns < s.end_ns)">(pid));
  SlowWithRetransmit out;
  if (st.step()) out = {st.col_int(0), st.col_int(1)};
  return out;
}

std::optional<int64_t> retransmit_slowest_op(Connection& db, uint32_t pid) {
  return db.query_int(sql<"SELECT s.op_id FROM slow s WHERE s.pid = {} AND EXISTS (SELECT 1 FROM rtx r WHERE"
                          " r.session_id = s.session_id AND r.ts_ns >= s.ts_ns AND r.ts_ns < s.end_ns)"
                          " GROUP BY 1 ORDER BY sum(s.dur_ns - s.p50) DESC LIMIT 1">(pid));
}

std::string retransmit_stack_sql(uint32_t pid) {
  return sql<"SELECT s.stack_id FROM slow s WHERE s.pid = {} AND EXISTS (SELECT 1 FROM rtx r WHERE"
             " r.session_id = s.session_id AND r.ts_ns >= s.ts_ns AND r.ts_ns < s.end_ns)">(pid);
}

std::vector<RetransmitDestination> retransmit_destinations(Connection& db, uint32_t pid, int limit) {
  auto st = db.prepare(sql<"SELECT daddr, dport, count(*) FROM rtx WHERE session_id IN (SELECT session_id"
                           " FROM slow WHERE pid = {}) GROUP BY 1, 2 ORDER BY 3 DESC LIMIT {}">(pid, limit));
  std::vector<RetransmitDestination> out;
  while (st.step()) out.push_back({st.col_text(0), st.col_int(1), st.col_int(2)});
  return out;
}

// data_loss

std::vector<LostRecords> lost_records_by_source(Connection& db) {
  auto st = db.prepare(sql<"SELECT source, sum(count) FROM drops WHERE source NOT IN ('shed', 'retsite')"
                           " GROUP BY 1 HAVING sum(count) > 0">());
  std::vector<LostRecords> out;
  while (st.step()) out.push_back({st.col_text(0), st.col_int(1)});
  return out;
}

int64_t kept_call_and_offcpu_rows(Connection& db) {
  return db.query_int(sql<"SELECT (SELECT count(*) FROM cuda_call_events) + (SELECT count(*) "
                          "FROM nccl_call_events) + (SELECT count(*) FROM offcpu_events)">())
      .value_or(0);
}

// memory_pressure

int64_t reclaims_in(Connection& db, const Window& w) {
  return db.query_int(sql<"SELECT count(*) FROM reclaims WHERE {}">(w.sql_where())).value_or(0);
}

SlowReclaims slow_call_reclaims(Connection& db, uint32_t pid, int64_t longest_reclaim_ns) {
  const auto rc = overlap(sql<"reclaims">(), "r", "s", kSlowEnd, true, longest_reclaim_ns);
  auto st = db.prepare(sql_in<"r reclaims", "SELECT coalesce(sum({}), 0), count(*),"
                                            " coalesce(sum(r.nr_reclaimed), 0) FROM slow s{} WHERE s.pid = {}">(
      rc.clipped, rc.join, pid));
  SlowReclaims out;
  if (st.step()) out = {st.col_int(0), st.col_int(1), st.col_int(2)};
  return out;
}

// cold_start

std::string first_call_stack_sql(const Window& w, uint32_t pid, int64_t op_id) {
  return sql<"SELECT stack_id FROM cuda_call_events WHERE {} AND pid = {} AND op_id = {} ORDER BY ts_ns"
             " LIMIT 1">(w.sql_where(), pid, op_id);
}

std::vector<ColdCall> cold_first_calls(Connection& db, int factor, int64_t min_excess_ns) {
  auto st = db.prepare(
      sql<"SELECT f.pid, f.op_id, f.kernel_id, f.dur_ns, b.p50, f.stack_id FROM firsts f JOIN baseline b "
          "ON b.pid = f.pid AND b.op_id = f.op_id AND b.kernel_id = f.kernel_id WHERE b.count >= 2 AND "
          "f.dur_ns >= {} * b.p50 AND f.dur_ns - b.p50 >= {}">(factor, min_excess_ns));
  std::vector<ColdCall> out;
  while (st.step()) {
    out.push_back({uint32_t(st.col_int(0)), st.col_int(1), st.col_int(2), st.col_int(3), st.col_int(4),
                   st.col_null(5) ? std::nullopt : std::optional(st.col_int(5))});
  }
  return out;
}

// io_stall

SlowDiskWaits slow_call_disk_waits(Connection& db, uint32_t pid, int64_t longest_offcpu_ns,
                                   int64_t driver_syscall) {
  const auto off = overlap(sql<"offcpu_events">(), "o", "s", kSlowEnd, true, longest_offcpu_ns);
  auto st = db.prepare(sql<"SELECT coalesce(sum({}), 0), count(*) FROM slow s{} WHERE {} AND s.pid = {}">(
      off.clipped, off.join, disk_wait_sql("o", driver_syscall), pid));
  SlowDiskWaits out;
  if (st.step()) out = {st.col_int(0), st.col_int(1)};
  return out;
}

SlowCallIo slow_call_io(Connection& db, uint32_t pid, int64_t longest_io_ns) {
  const auto io = overlap(sql<"io_requests">(), "i", "s", kSlowEnd, false, longest_io_ns);
  auto st = db.prepare(sql_in<"i io_requests",
                              "SELECT count(*), coalesce(sum(bytes), 0), coalesce(max(dur_ns), 0),"
                              " coalesce(avg(dur_ns), 0), group_concat(DISTINCT dev) FROM io_requests WHERE rowid IN"
                              " (SELECT i.rowid FROM slow s{} WHERE s.pid = {})">(io.join, pid));
  SlowCallIo out;
  if (st.step()) out = {st.col_int(0), st.col_int(1), st.col_int(2), st.col_double(3), st.col_text(4)};
  return out;
}

// cpu_contention

Preemptions slow_call_preemptions(Connection& db, uint32_t pid, int64_t longest_offcpu_ns) {
  const auto clipped = overlap(sql<"offcpu_events">(), "o", "s", kSlowEnd, true, longest_offcpu_ns).clipped;
  auto st = db.prepare(
      sql<"SELECT coalesce(sum({}), 0), count(*){}">(clipped, preempted_inside(db, pid, longest_offcpu_ns)));
  Preemptions out;
  if (st.step()) out = {st.col_int(0), st.col_int(1)};
  return out;
}

std::vector<Preemptor> slow_call_preemptors(Connection& db, uint32_t pid, int64_t longest_offcpu_ns,
                                            int limit) {
  const auto clipped = overlap(sql<"offcpu_events">(), "o", "s", kSlowEnd, true, longest_offcpu_ns).clipped;
  auto st = db.prepare(sql_in<"o offcpu_events cm comms",
                              "SELECT coalesce(cm.name, '?'), coalesce(o.by_pid, 0), sum({}), count(*){}"
                              " GROUP BY 1, 2 ORDER BY 3 DESC LIMIT {}">(
      clipped, preempted_inside(db, pid, longest_offcpu_ns), limit));
  std::vector<Preemptor> out;
  while (st.step()) out.push_back({st.col_text(0), st.col_int(1), st.col_int(2), st.col_int(3)});
  return out;
}

std::vector<CpuPreemptions> slow_call_preemption_cpus(Connection& db, uint32_t pid, int64_t longest_offcpu_ns,
                                                      int limit) {
  auto st = db.prepare(sql_in<"o offcpu_events", "SELECT o.cpu, count(*){} GROUP BY 1 ORDER BY 2 DESC LIMIT {}">(
      preempted_inside(db, pid, longest_offcpu_ns), limit));
  std::vector<CpuPreemptions> out;
  while (st.step()) out.push_back({st.col_int(0), st.col_int(1)});
  return out;
}

// io_stall, cpu_contention, memory_pressure

std::string slow_calls_stack_sql(uint32_t pid, int64_t op_id) {
  return sql<"SELECT stack_id FROM slow WHERE pid = {} AND op_id = {}">(pid, op_id);
}

}  // namespace causeway::store
