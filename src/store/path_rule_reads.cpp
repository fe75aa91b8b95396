// SPDX-License-Identifier: Apache-2.0
#include "causeway/store/path_rule_reads.h"

#include "read_util.h"

namespace causeway::store {

namespace {

std::string in_span(int64_t from, int64_t to) {
  return sql<" AND ts_ns >= {} AND ts_ns < {}">(from, to);
}

std::optional<CgroupMemoryReading> cgroup_memory(Connection& db, int64_t session, uint32_t pid,
                                                 const std::string& where, const std::string& order) {
  auto st = db.prepare(
      sql<"SELECT cgroup, version, limit_bytes, high_bytes, refault_file, limit_hits, pgscan, pgsteal, psi_some_us, ts_ns "
          "FROM cgroup_memory WHERE session_id = {} AND pid = {} AND (limit_bytes IS NOT NULL OR high_bytes IS NOT"
          " NULL){} ORDER BY ts_ns {} LIMIT 1">(session, pid, where, order));
  std::optional<CgroupMemoryReading> r;
  while (st.step()) {
    CgroupMemoryReading m;
    m.cgroup = st.col_text(0);
    m.version = st.col_int(1);
    if (!st.col_null(2)) m.limit = st.col_int(2);
    if (!st.col_null(3)) m.high = st.col_int(3);
    m.refaults = st.col_int(4);
    m.hits = st.col_int(5);
    if (!st.col_null(6)) m.scanned = st.col_int(6);
    if (!st.col_null(7)) m.stolen = st.col_int(7);
    if (!st.col_null(8)) m.stall_us = st.col_int(8);
    m.ts_ns = st.col_int(9);
    r = m;
  }
  return r;
}

std::optional<CgroupCpuReading> cgroup_cpu(Connection& db, int64_t session, uint32_t pid, const std::string& order) {
  auto st = db.prepare(sql<"SELECT cgroup, version, quota_us, period_us, nr_periods, nr_throttled, throttled_us "
                           "FROM cgroup_cpu WHERE session_id = {} AND pid IN (SELECT {} UNION {})"
                           " AND quota_us IS NOT NULL ORDER BY ts_ns {} LIMIT 1">(
      session, pid, own_workers_sql(pid, session), order));
  std::optional<CgroupCpuReading> r;
  while (st.step())
    r = CgroupCpuReading{st.col_text(0), st.col_int(1), st.col_int(2), st.col_int(3),
                         st.col_int(4), st.col_int(5), st.col_int(6)};
  return r;
}

// session < 0: every session.
std::string in_session(int64_t session) { return session < 0 ? "" : sql<" AND session_id = {}">(session); }

}  // namespace

std::string own_workers_sql(uint32_t pid, int64_t session) {
  const std::string in = in_session(session);
  return sql<"SELECT pid FROM processes WHERE ppid = {}{} AND pid IN (SELECT waker_pid FROM offcpu_events"
             " WHERE pid = {}{} GROUP BY waker_pid HAVING count(*) > 1)">(pid, in, pid, in);
}

std::set<uint32_t> own_workers(Connection& db, uint32_t pid, int64_t session) {
  // Most processes have no child to look for: then the wake-ups (every one
  // of the process's, no index by pid) are not read at all.
  if (db.query_int(sql<"SELECT count(*) FROM processes WHERE ppid = {}{}">(pid, in_session(session))).value_or(0) == 0)
    return {};
  auto st = db.prepare(own_workers_sql(pid, session));
  std::set<uint32_t> out;
  while (st.step()) out.insert(uint32_t(st.col_int(0)));
  return out;
}

std::optional<CgroupMemoryReading> cgroup_memory_at_or_before(Connection& db, int64_t session, uint32_t pid,
                                                              int64_t ts_ns) {
  auto r = cgroup_memory(db, session, pid, sql<" AND ts_ns <= {}">(ts_ns), sql<"DESC">());
  return r ? r : cgroup_memory(db, session, pid, "", sql<"ASC">());
}

std::optional<CgroupMemoryReading> cgroup_memory_at_or_after(Connection& db, int64_t session, uint32_t pid,
                                                             int64_t ts_ns) {
  auto r = cgroup_memory(db, session, pid, sql<" AND ts_ns >= {}">(ts_ns), sql<"ASC">());
  return r ? r : cgroup_memory(db, session, pid, "", sql<"DESC">());
}

int64_t block_bytes_read(Connection& db, int64_t session, uint32_t pid, int64_t from, int64_t to) {
  return db.query_int(sql<"SELECT coalesce(sum(bytes), 0) FROM io_requests WHERE session_id = {}"
                          " AND op = 'read' AND pid = {}{}">(session, pid, in_span(from, to)))
      .value_or(0);
}

std::optional<AllowedCpus> allowed_cpus(Connection& db, int64_t session, uint32_t pid, int64_t at_ns) {
  auto st = db.prepare(sql<"SELECT cpus, cpu_list FROM process_cpus WHERE session_id = {} AND pid = {}"
                           " ORDER BY ts_ns <= {} DESC, ts_ns DESC LIMIT 1">(session, pid, at_ns));
  std::optional<AllowedCpus> r;
  while (st.step()) r = AllowedCpus{st.col_int(0), st.col_text(1)};
  return r;
}

std::optional<CpuQuota> cpu_quota(Connection& db, int64_t session, uint32_t pid) {
  auto st = db.prepare(sql<"SELECT quota_us, period_us FROM cgroup_cpu WHERE session_id = {} AND pid = {}"
                           " AND quota_us IS NOT NULL AND period_us > 0 ORDER BY ts_ns DESC LIMIT 1">(session, pid));
  std::optional<CpuQuota> r;
  while (st.step()) r = CpuQuota{st.col_int(0), st.col_int(1)};
  return r;
}

std::optional<CgroupCpuReading> cgroup_cpu_first(Connection& db, int64_t session, uint32_t pid) {
  return cgroup_cpu(db, session, pid, sql<"ASC">());
}

std::optional<CgroupCpuReading> cgroup_cpu_last(Connection& db, int64_t session, uint32_t pid) {
  return cgroup_cpu(db, session, pid, sql<"DESC">());
}

std::vector<ThreadOffCpu> thread_offcpu(Connection& db, int64_t session, uint32_t pid, int64_t from, int64_t to) {
  auto st = db.prepare(
      sql<"SELECT tid, min(ts_ns), max(ts_ns + dur_ns), sum(CASE WHEN state = 0 THEN 0 ELSE dur_ns - runq_ns END),"
          " sum(state = 0), sum(state != 0), sum(runq_ns) FROM offcpu_events WHERE session_id = {} AND pid = {}{}"
          " GROUP BY tid">(session, pid, in_span(from, to)));
  std::vector<ThreadOffCpu> out;
  while (st.step())
    out.push_back({uint32_t(st.col_int(0)), st.col_int(1), st.col_int(2), st.col_int(3), st.col_int(4),
                   st.col_int(5), st.col_int(6)});
  return out;
}

std::string sleep_stack_ids_sql(int64_t session, uint32_t tid, int64_t from, int64_t to) {
  return sql<"SELECT stack_id FROM offcpu_events WHERE session_id = {} AND tid = {} AND stack_id IS NOT NULL{}">(
      session, tid, in_span(from, to));
}

std::vector<PyFrame> python_frames(Connection& db, int64_t stack_id) {
  auto st = db.prepare(sql<"SELECT func, file, coalesce(line, 0) FROM stack_frames WHERE stack_id = {}"
                           " AND kind = 'python' ORDER BY depth">(stack_id));
  std::vector<PyFrame> out;
  while (st.step()) out.push_back({st.col_text(0), st.col_text(1), st.col_int(2)});
  return out;
}

BlockIo block_writes(Connection& db, int64_t session, uint32_t pid, int64_t from, int64_t to) {
  auto st = db.prepare(
      sql<"SELECT count(*), coalesce(sum(bytes), 0), coalesce(max(dur_ns), 0) FROM io_requests WHERE session_id = {}"
          " AND pid = {} AND op IN ('write', 'flush'){}">(session, pid, in_span(from, to)));
  BlockIo r;
  while (st.step()) {
    r.requests = st.col_int(0);
    r.bytes = st.col_int(1);
    r.max_ns = st.col_int(2);
  }
  return r;
}

BlockIo block_reads_with_workers(Connection& db, int64_t session, uint32_t pid, int64_t from, int64_t to) {
  auto st = db.prepare(
      sql<"SELECT count(*), coalesce(sum(bytes), 0), coalesce(avg(dur_ns), 0), coalesce(max(dur_ns), 0),"
          " group_concat(DISTINCT dev) FROM io_requests WHERE session_id = {} AND op = 'read'{}"
          " AND pid IN (SELECT {} UNION {})">(session, in_span(from, to), pid, own_workers_sql(pid, session)));
  BlockIo r;
  while (st.step()) {
    r.requests = st.col_int(0);
    r.bytes = st.col_int(1);
    r.mean_ns = st.col_double(2);
    r.max_ns = st.col_int(3);
    r.devices = st.col_text(4);
  }
  return r;
}

CallsAndBytes calls_and_bytes(Connection& db, int64_t session, uint32_t pid, const std::vector<int64_t>& op_ids,
                              int64_t from, int64_t to) {
  auto st = db.prepare(
      sql<"SELECT count(*), coalesce(sum(CASE WHEN ret = 0 THEN bytes END), 0) FROM cuda_call_events WHERE "
          "session_id = {} AND pid = {} AND op_id IN ({}){}">(session, pid, comma_list(op_ids), in_span(from, to)));
  CallsAndBytes r;
  while (st.step()) r = {st.col_int(0), st.col_int(1)};
  return r;
}

TunerFrames tuner_frames(Connection& db, const std::set<int64_t>& stack_ids) {
  auto st = db.prepare(
      sql<"SELECT max(kind = 'native' AND (func GLOB '*cudnn*' OR func GLOB '*algorithm_search*')), "
          "max(kind = 'native' AND (func GLOB '*time_sorted_plan*' OR func GLOB 'cudnnFind*' OR func GLOB "
          "'*findAlgorithm*')), "
          "max(file GLOB '*triton/runtime/autotuner.py'), max(file GLOB '*torch/_inductor/*') FROM stack_frames "
          "WHERE stack_id IN ({})">(comma_list(stack_ids)));
  TunerFrames t;
  while (st.step())
    t = {st.col_int(0) > 0, st.col_int(1) > 0, st.col_int(2) > 0, st.col_int(3) > 0};
  return t;
}

std::vector<std::pair<int64_t, int64_t>> calls_with_stacks(Connection& db, int64_t session, uint32_t pid,
                                                           const std::set<int64_t>& stack_ids, int64_t from,
                                                           int64_t to) {
  auto st = db.prepare(sql<"SELECT ts_ns, op_id FROM cuda_call_events WHERE session_id = {} AND pid = {}"
                           " AND stack_id IN ({}){} ORDER BY ts_ns">(session, pid, comma_list(stack_ids),
                                                                    in_span(from, to)));
  std::vector<std::pair<int64_t, int64_t>> out;
  while (st.step()) out.emplace_back(st.col_int(0), st.col_int(1));
  return out;
}

int64_t counted_launches(Connection& db, int64_t session, uint32_t pid, int64_t from, int64_t to) {
  auto st = db.prepare(sql<"SELECT coalesce(sum(calls), 0) FROM launch_stats WHERE session_id = {} AND pid = {}{}">(
      session, pid, in_span(from, to)));
  int64_t n = 0;
  while (st.step()) n = st.col_int(0);
  return n;
}

}  // namespace causeway::store
