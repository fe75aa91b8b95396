// SPDX-License-Identifier: Apache-2.0
#include "causeway/store/rank_reads.h"

#include "causeway/common/op_table.h"
#include "read_util.h"

namespace causeway::store {

namespace {

// The NCCL calls of a known communicator that `where` (what follows its
// first AND) selects.
void each_nccl_call(Connection& db, const std::string& where,
                    const std::function<void(const CollectiveCall&)>& f) {
  auto st = db.prepare(
      sql<"SELECT session_id, pid, tid, rank, nranks, comm_hash, seq, ts_ns, dur_ns, op_id, bytes "
          "FROM nccl_call_events WHERE comm_hash IS NOT NULL AND {}">(where));
  CollectiveCall c;
  while (st.step()) {
    c.session_id = st.col_int(0);
    c.pid = uint32_t(st.col_int(1));
    c.tid = uint32_t(st.col_int(2));
    c.rank = opt_int(st, 3);
    c.nranks = opt_int(st, 4);
    c.comm_hash = st.col_text(5);
    c.seq = opt_int(st, 6);
    c.ts_ns = st.col_int(7);
    c.dur_ns = st.col_int(8);
    c.op_id = st.col_int(9);
    c.bytes = opt_int(st, 10);
    f(c);
  }
}

// Rows of a single count; 0 when none.
int64_t session_count(Connection& db, const std::string& sql, int64_t session) {
  auto st = db.prepare(sql);
  st.bind(1, session);
  return st.step() ? st.col_int(0) : 0;
}

}  // namespace

std::vector<RankSession> rank_sessions(Connection& db) {
  std::vector<RankSession> out;
  auto st = db.prepare(sql<"SELECT id, node_id, host, boot_id FROM sessions">());
  while (st.step()) out.push_back({st.col_int(0), st.col_text(1), st.col_text(2), st.col_text(3)});
  return out;
}

void each_numbered_collective(Connection& db, const std::function<void(const CollectiveCall&)>& f) {
  each_nccl_call(db, sql<"seq IS NOT NULL AND op_id IN ({})">(op_ids_sql_list(OpClass::Collective)), f);
}

void each_comm_init(Connection& db, const std::function<void(const CollectiveCall&)>& f) {
  each_nccl_call(db,
                 sql<"ret = 0 AND op_id IN ({},{})">(find_op("ncclCommInitRank")->id,
                                                      find_op("ncclCommInitRankConfig")->id),
                 f);
}

int64_t unnumbered_collectives(Connection& db) {
  auto st = db.prepare(
      sql<"SELECT count(*) FROM nccl_call_events WHERE comm_hash IS NOT NULL AND comm_hash != '' AND "
          "seq IS NULL AND op_id IN ({})">(op_ids_sql_list(OpClass::Collective)));
  return st.step() ? st.col_int(0) : 0;
}

void each_blocking_wait(Connection& db, int64_t min_dur_ns,
                        const std::function<void(const BlockingWait&)>& f) {
  auto st = db.prepare(
      sql<"SELECT session_id, pid, ts_ns, dur_ns FROM cuda_call_events WHERE dur_ns >= ? AND (op_id IN ({})"
          " OR {}) ORDER BY ts_ns">(op_ids_sql_list(OpClass::Sync), readback_sql()));
  st.bind(1, min_dur_ns);
  BlockingWait w;
  while (st.step()) {
    w = {st.col_int(0), uint32_t(st.col_int(1)), st.col_int(2), st.col_int(3)};
    f(w);
  }
}

void each_offcpu_overlapping(Connection& db, int64_t session, uint32_t pid, int64_t from_ns, int64_t to_ns,
                             const std::function<void(const RankOffcpu&)>& f) {
  auto st = db.prepare(
      sql<"SELECT e.ts_ns, e.dur_ns, e.tid, e.state, coalesce(c.name, '') FROM offcpu_events e "
          "LEFT JOIN comms c ON c.id = e.by_comm_id WHERE e.session_id = ? AND e.pid = ? AND "
          "e.ts_ns < ? AND e.ts_ns + e.dur_ns > ?">());
  st.bind(1, session).bind(2, int64_t(pid)).bind(3, to_ns).bind(4, from_ns);
  RankOffcpu o;
  while (st.step()) {
    o.ts_ns = st.col_int(0);
    o.dur_ns = st.col_int(1);
    o.tid = uint32_t(st.col_int(2));
    o.state = st.col_int(3);
    o.by_comm = st.col_text(4);
    f(o);
  }
}

void each_io_overlapping(Connection& db, int64_t session, uint32_t pid, int64_t from_ns, int64_t to_ns,
                         const std::function<void(const HostInterval&)>& f) {
  auto st = db.prepare(
      sql<"SELECT ts_ns, dur_ns FROM io_requests WHERE session_id = ? AND pid = ? AND ts_ns < ? AND "
          "ts_ns + dur_ns > ?">());
  st.bind(1, session).bind(2, int64_t(pid)).bind(3, to_ns).bind(4, from_ns);
  while (st.step()) f({st.col_int(0), st.col_int(1)});
}

void each_reclaim_overlapping(Connection& db, int64_t session, int64_t from_ns, int64_t to_ns,
                              const std::function<void(const HostInterval&)>& f) {
  auto st = db.prepare(
      sql<"SELECT ts_ns, dur_ns FROM reclaims WHERE session_id = ? AND ts_ns < ? AND ts_ns + dur_ns > ?">());
  st.bind(1, session).bind(2, to_ns).bind(3, from_ns);
  while (st.step()) f({st.col_int(0), st.col_int(1)});
}

void each_retransmit_between(Connection& db, int64_t session, int64_t from_ns, int64_t to_ns,
                             const std::function<void(int64_t ts_ns)>& f) {
  auto st =
      db.prepare(sql<"SELECT ts_ns FROM tcp_retransmits WHERE session_id = ? AND ts_ns >= ? AND ts_ns < ?">());
  st.bind(1, session).bind(2, from_ns).bind(3, to_ns);
  while (st.step()) f(st.col_int(0));
}

int64_t retransmit_count(Connection& db, int64_t session) {
  return session_count(db, sql<"SELECT count(*) FROM tcp_retransmits WHERE session_id = ?">(), session);
}

std::vector<IbCounterGrowth> ib_counter_growth(Connection& db, int64_t session) {
  auto st = db.prepare(
      sql<"SELECT counter, max(value) - min(value) FROM ib_counters WHERE session_id = ? "
          "GROUP BY device, port, counter">());
  st.bind(1, session);
  std::vector<IbCounterGrowth> out;
  while (st.step()) out.push_back({st.col_text(0), st.col_int(1)});
  return out;
}

int64_t verbs_fatal_count(Connection& db, int64_t session) {
  return session_count(db,
                       sql<"SELECT count(*) FROM verbs_events WHERE session_id = ? AND "
                           "(detail LIKE '% fatal%' OR detail LIKE '-> ERR%')">(),
                       session);
}

std::vector<GpuSmShare> process_gpu_sm(Connection& db, int64_t session, uint32_t pid) {
  auto st = db.prepare(sql<"SELECT gpu, avg(coalesce(sm_util, 0)) FROM gpu_process_samples WHERE session_id = {}"
                           " AND pid = {} GROUP BY gpu">(session, pid));
  std::vector<GpuSmShare> out;
  while (st.step()) out.push_back({st.col_int(0), st.col_double(1)});
  return out;
}

std::optional<ProcessSmShare> top_gpu_neighbour(Connection& db, int64_t session, int64_t gpu,
                                              const std::vector<uint32_t>& except_pids, int64_t min_samples) {
  auto st = db.prepare(
      sql<"SELECT pid, avg(coalesce(sm_util, 0)) AS sm FROM gpu_process_samples WHERE session_id = {} AND gpu = {}"
          " AND pid NOT IN ({}) GROUP BY pid HAVING count(*) >= {} ORDER BY sm DESC LIMIT 1">(
          session, gpu, comma_list(except_pids), min_samples));
  std::optional<ProcessSmShare> out;
  while (st.step()) out = ProcessSmShare{uint32_t(st.col_int(0)), st.col_double(1)};
  return out;
}

std::string cuda_call_stack_ids_sql(int64_t session, uint32_t pid) {
  return sql<"SELECT stack_id FROM cuda_call_events WHERE pid = {} AND session_id = {}">(pid, session);
}

std::string collective_stack_ids_sql(int64_t session, uint32_t pid) {
  return sql<"SELECT stack_id FROM nccl_call_events WHERE session_id = {} AND pid = {} AND comm_hash IS NOT NULL">(
      session, pid);
}

}  // namespace causeway::store
