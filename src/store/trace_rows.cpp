// SPDX-License-Identifier: Apache-2.0
#include "causeway/store/trace_rows.h"

#include <algorithm>

#include "causeway/store/lookups.h"
#include "read_util.h"

namespace causeway::store {

std::optional<int64_t> first_event_ns(Connection& db, const Window& w) {
  const std::string and_window = w.sql_and();
  std::optional<int64_t> first;
  for (const std::string& table : {sql<"cuda_call_events">(), sql<"nccl_call_events">(), sql<"offcpu_events">(),
                                   sql<"io_requests">(), sql<"tcp_retransmits">(), sql<"reclaims">()}) {
    auto v = db.query_int(sql<"SELECT min(ts_ns) FROM {} WHERE 1{}">(table, and_window));
    if (v) first = first ? std::min(*first, *v) : *v;
  }
  return first;
}

void each_cuda_call(Connection& db, const Window& w, const std::function<void(const CudaCallRow&)>& f) {
  auto st = db.prepare(
      sql<"SELECT ts_ns, dur_ns, pid, tid, op, layer, ret, bytes, kind, stream, grid_x, grid_y, "
          "grid_z, block_x, block_y, block_z, shared_mem, kernel, stack_id FROM cuda_calls WHERE 1{}"
          " ORDER BY ts_ns">(w.sql_and()));
  CudaCallRow c;
  while (st.step()) {
    c.ts_ns = st.col_int(0);
    c.dur_ns = st.col_int(1);
    c.pid = st.col_int(2);
    c.tid = st.col_int(3);
    c.op = st.col_text(4);
    c.layer = st.col_text(5);
    c.ret = st.col_int(6);
    c.bytes = opt_int(st, 7);
    c.kind = opt_text(st, 8);
    c.stream = opt_int(st, 9);
    // grid_x and block_x say whether there are dimensions (a launch).
    c.grid = st.col_null(10) ? std::nullopt
                             : std::optional<Dim3>(Dim3{st.col_int(10), st.col_int(11), st.col_int(12)});
    c.block = st.col_null(13) ? std::nullopt
                              : std::optional<Dim3>(Dim3{st.col_int(13), st.col_int(14), st.col_int(15)});
    c.shared_mem = opt_int(st, 16);
    c.kernel = opt_text(st, 17);
    c.stack_id = opt_int(st, 18);
    f(c);
  }
}

void each_nccl_call(Connection& db, const Window& w, const std::function<void(const NcclCallRow&)>& f) {
  auto st = db.prepare(
      sql<"SELECT ts_ns, dur_ns, pid, tid, op, ret, comm_hash, rank, nranks, seq, count, datatype, "
          "redop, bytes, stream, peer, stack_id FROM nccl_calls WHERE 1{} ORDER BY ts_ns">(w.sql_and()));
  NcclCallRow c;
  while (st.step()) {
    c.ts_ns = st.col_int(0);
    c.dur_ns = st.col_int(1);
    c.pid = st.col_int(2);
    c.tid = st.col_int(3);
    c.op = st.col_text(4);
    c.ret = st.col_int(5);
    c.comm_hash = opt_text(st, 6);
    c.rank = opt_int(st, 7);
    c.nranks = opt_int(st, 8);
    c.seq = opt_int(st, 9);
    c.count = opt_int(st, 10);
    c.datatype = opt_text(st, 11);
    c.redop = opt_text(st, 12);
    c.bytes = opt_int(st, 13);
    c.stream = opt_int(st, 14);
    c.peer = opt_int(st, 15);
    c.stack_id = opt_int(st, 16);
    f(c);
  }
}

void each_offcpu_interval(Connection& db, const Window& w, const std::function<void(const OffcpuRow&)>& f) {
  auto st = db.prepare(
      sql<"SELECT ts_ns, dur_ns, pid, tid, cpu, state, by_pid, by_comm, waker_pid FROM offcpu WHERE 1{}"
          " ORDER BY ts_ns">(w.sql_and()));
  OffcpuRow o;
  while (st.step()) {
    o.ts_ns = st.col_int(0);
    o.dur_ns = st.col_int(1);
    o.pid = st.col_int(2);
    o.tid = st.col_int(3);
    o.cpu = st.col_int(4);
    o.state = st.col_text(5);
    o.by_pid = opt_int(st, 6);
    o.by_comm = opt_text(st, 7);
    o.waker_pid = opt_int(st, 8);
    f(o);
  }
}

void each_reclaim(Connection& db, const Window& w, const std::function<void(const ReclaimRow&)>& f) {
  auto st = db.prepare(
      sql<"SELECT ts_ns, dur_ns, pid, tid, nr_reclaimed FROM reclaims WHERE 1{} ORDER BY ts_ns">(w.sql_and()));
  while (st.step()) f({st.col_int(0), st.col_int(1), st.col_int(2), st.col_int(3), st.col_int(4)});
}

void each_io_request(Connection& db, const Window& w, const std::function<void(const IoRequestRow&)>& f) {
  auto st = db.prepare(
      sql<"SELECT ts_ns, dur_ns, pid, dev, bytes, op FROM io_requests WHERE 1{} ORDER BY ts_ns">(w.sql_and()));
  while (st.step())
    f({st.col_int(0), st.col_int(1), st.col_int(2), st.col_text(3), st.col_int(4), st.col_text(5)});
}

void each_tcp_retransmit(Connection& db, const Window& w,
                         const std::function<void(const TcpRetransmitRow&)>& f) {
  auto st = db.prepare(
      sql<"SELECT ts_ns, pid, saddr, sport, daddr, dport, state FROM tcp_retransmits WHERE 1{} ORDER BY ts_ns">(
          w.sql_and()));
  while (st.step())
    f({st.col_int(0), st.col_int(1), st.col_text(2), st.col_int(3), st.col_text(4), st.col_int(5),
       st.col_text(6)});
}

void each_gpu_memory_held(Connection& db, const Window& w,
                          const std::function<void(const MemoryHeldRow&)>& f) {
  auto st = db.prepare(
      sql<"SELECT ts_ns, pid, memory, held_bytes FROM gpu_memory_timeline WHERE memory != 'host'{}"
          " ORDER BY ts_ns">(w.sql_and()));
  while (st.step()) f({st.col_int(0), st.col_int(1), st.col_text(2), st.col_int(3)});
}

void each_tensor_memory_held(Connection& db, const Window& w,
                             const std::function<void(const TensorsHeldRow&)>& f) {
  // The view came with schema 13; an older file still opens.
  if (!has_table(db, sql<"gpu_memory_curves">())) return;
  auto st = db.prepare(
      sql<"SELECT ts_ns, pid, held_bytes FROM gpu_memory_curves WHERE level = 'allocated'{} ORDER BY ts_ns">(
          w.sql_and()));
  while (st.step()) f({st.col_int(0), st.col_int(1), st.col_int(2)});
}

std::vector<ProcessRow> processes_by_session(Connection& db) {
  auto st = db.prepare(sql<"SELECT pid, comm, cmdline FROM processes ORDER BY session_id">());
  std::vector<ProcessRow> out;
  while (st.step()) out.push_back({st.col_int(0), st.col_text(1), st.col_text(2)});
  return out;
}

std::vector<CallRow> slowest_calls(Connection& db, const Window& w, int limit) {
  auto st = db.prepare(
      sql<"SELECT ts_ns, dur_ns, pid, tid, op FROM (SELECT ts_ns, dur_ns, pid, tid, op FROM "
          "cuda_calls UNION ALL SELECT ts_ns, dur_ns, pid, tid, op FROM nccl_calls) WHERE 1{}"
          " ORDER BY dur_ns DESC LIMIT {}">(w.sql_and(), limit));
  std::vector<CallRow> out;
  while (st.step())
    out.push_back({st.col_int(0), st.col_int(1), st.col_int(2), st.col_int(3), st.col_text(4)});
  return out;
}

std::optional<CallRow> slowest_call_of(Connection& db, int64_t pid, const std::string& op,
                                       const std::string& kernel,
                                       const std::optional<std::pair<int64_t, int64_t>>& between) {
  auto st = db.prepare(
      sql<"SELECT ts_ns, dur_ns, tid FROM (SELECT ts_ns, dur_ns, pid, tid, op, kernel FROM cuda_calls "
          "UNION ALL SELECT ts_ns, dur_ns, pid, tid, op, NULL FROM nccl_calls) WHERE pid = ?1 AND "
          "op = ?2 AND (?3 = '' OR kernel = ?3){} ORDER BY dur_ns DESC LIMIT 1">(
          between ? sql<" AND ts_ns BETWEEN ?4 AND ?5">() : std::string()));
  st.bind(1, pid).bind(2, op).bind(3, kernel);
  if (between) st.bind(4, between->first).bind(5, between->second);
  if (!st.step()) return std::nullopt;
  return CallRow{st.col_int(0), st.col_int(1), pid, st.col_int(2), op};
}

std::vector<HostEventRow> host_events_during(Connection& db, int64_t pid, int64_t tid, int64_t from_ns,
                                             int64_t to_ns, int limit) {
  auto st = db.prepare(
      sql<"SELECT kind, label, ts_ns, dur_ns FROM ("
          " SELECT 'offcpu' AS kind, 'off-CPU (' || state || coalesce(', ' || by_comm, '') || ')' "
          "   AS label, ts_ns, dur_ns FROM offcpu WHERE pid = ?1 AND tid = ?2"
          " UNION ALL SELECT 'reclaim', 'direct reclaim', ts_ns, dur_ns FROM reclaims"
          "   WHERE pid = ?1 AND tid = ?2"
          " UNION ALL SELECT 'io', 'block ' || op || ' ' || dev, ts_ns, dur_ns FROM io_requests"
          "   WHERE pid = ?1)"
          " WHERE ts_ns < ?4 AND ts_ns + dur_ns > ?3 ORDER BY dur_ns DESC LIMIT {}">(limit));
  st.bind(1, pid).bind(2, tid).bind(3, from_ns).bind(4, to_ns);
  std::vector<HostEventRow> out;
  while (st.step()) out.push_back({st.col_text(0), st.col_text(1), st.col_int(2), st.col_int(3)});
  return out;
}

}  // namespace causeway::store
