// SPDX-License-Identifier: Apache-2.0
#include "causeway/store/hang_reads.h"

#include "causeway/store/lookups.h"
#include "read_util.h"

namespace causeway::store {

namespace {

// "1,2,3"; "-1" (no op has it) when empty, so `IN (...)` stays valid.
std::string id_list(const std::vector<int64_t>& ids) { return ids.empty() ? "-1" : comma_list(ids); }

}  // namespace

std::vector<StalledCall> stalled_calls(Connection& db, const Window& w) {
  // Traces of older schemas lack the later columns.
  const std::string stalled = sql<"stalled_calls">();
  const bool has_at_stop = has_column(db, stalled, sql<"at_stop">()),
             has_before = has_column(db, stalled, sql<"entered_before">()),
             has_seq = has_column(db, stalled, sql<"seq">());
  // The three optional columns (older traces lack them) name `s`, which the
  // statement declares: checked as fragments of stalled_calls s.
  auto st = db.prepare(sql<
      "SELECT s.session_id, s.ts_ns, max(s.waited_ns), max(s.seen_ts_ns), s.pid, s.tid, s.op_id,"
      " coalesce(max(s.stack_id), -1),"
      " coalesce((SELECT c.dur_ns FROM cuda_call_events c WHERE c.session_id = s.session_id AND"
      " c.tid = s.tid AND c.ts_ns = s.ts_ns), (SELECT n.dur_ns FROM nccl_call_events n WHERE"
      " n.session_id = s.session_id AND n.tid = s.tid AND n.ts_ns = s.ts_ns)), {}, {}, {} FROM stalled_calls s"
      " WHERE {} GROUP BY s.session_id, s.tid, s.ts_ns ORDER BY s.ts_ns">(
      has_at_stop ? sql_in<"s stalled_calls", "min(s.at_stop)">() : "0",
      has_before ? sql_in<"s stalled_calls", "max(s.entered_before)">() : "0",
      has_seq ? sql_in<"s stalled_calls", "max(s.seq)">() : "NULL", w.sql_where("s.")));
  std::vector<StalledCall> out;
  while (st.step()) {
    StalledCall c;
    c.session_id = st.col_int(0);
    c.ts_ns = st.col_int(1);
    c.waited_ns = st.col_int(2);
    c.seen_ts_ns = st.col_int(3);
    c.pid = uint32_t(st.col_int(4));
    c.tid = uint32_t(st.col_int(5));
    c.op_id = st.col_int(6);
    c.stack_id = st.col_int(7);
    if (!st.col_null(8)) c.returned_after_ns = st.col_int(8);
    c.at_stop = st.col_int(9) != 0;
    c.entered_before = st.col_int(10) != 0;
    if (!st.col_null(11)) c.seq = st.col_int(11);
    out.push_back(c);
  }
  return out;
}

int64_t calls_after(Connection& db, int64_t session, uint32_t pid, int64_t after_ns, Threads threads,
                    uint32_t tid) {
  const std::string when = sql<"{} AND ts_ns > {}{}">(of_process(session, pid), after_ns,
                                                      threads == Threads::Only     ? sql<" AND tid = {}">(tid)
                                                      : threads == Threads::Others ? sql<" AND tid != {}">(tid)
                                                                                   : std::string());
  return db.query_int(sql<"SELECT (SELECT count(*) FROM cuda_call_events WHERE {})"
                          " + (SELECT count(*) FROM nccl_call_events WHERE {})">(when, when))
      .value_or(0);
}

int64_t busiest_thread(Connection& db, int64_t session, uint32_t pid) {
  return db.query_int(sql<"SELECT tid FROM cuda_call_events WHERE {} GROUP BY tid ORDER BY count(*) DESC LIMIT 1">(
                          of_process(session, pid)))
      .value_or(0);
}

int64_t longest_call_ns(Connection& db, int64_t session, uint32_t pid, const std::vector<int64_t>& op_ids) {
  return db.query_int(sql<"SELECT coalesce(max(dur_ns), 0) FROM cuda_call_events WHERE {} AND op_id IN ({})">(
                          of_process(session, pid), id_list(op_ids)))
      .value_or(0);
}

int64_t last_call_end_ns(Connection& db, int64_t session, uint32_t pid) {
  return db.query_int(sql<"SELECT max(ts_ns + dur_ns) FROM cuda_call_events WHERE {}">(of_process(session, pid)))
      .value_or(0);
}

std::optional<LatestCollective> latest_collective(Connection& db, int64_t session, uint32_t pid,
                                                  int64_t at_ns) {
  auto st = db.prepare(
      sql<"SELECT coalesce(comm_hash, ''), op_id, coalesce(rank, -1), coalesce(nranks, 0), coalesce(seq, -1),"
          " ts_ns, coalesce(stack_id, -1) FROM nccl_call_events WHERE {} AND ts_ns <= {} AND seq IS NOT NULL"
          " ORDER BY ts_ns DESC LIMIT 1">(of_process(session, pid), at_ns));
  if (!st.step()) return std::nullopt;
  return LatestCollective{st.col_text(0), st.col_int(1), st.col_int(2), st.col_int(3),
                          st.col_int(4),  st.col_int(5), st.col_int(6)};
}

std::vector<RankLatest> communicator_ranks(Connection& db, const std::string& comm_hash) {
  // The quotes go with the value: a hole inside a '...' literal is no hole.
  const std::string hash = "'" + comm_hash + "'";
  auto st = db.prepare(
      sql<"SELECT n.session_id, n.pid, n.rank, n.seq, n.ts_ns, coalesce(n.stack_id, -1), n.op_id"
          " FROM nccl_call_events n JOIN (SELECT session_id, pid, max(seq) AS seq FROM nccl_call_events"
          " WHERE comm_hash = {} AND seq IS NOT NULL GROUP BY session_id, pid) m"
          " ON m.session_id = n.session_id AND m.pid = n.pid AND m.seq = n.seq"
          " WHERE n.comm_hash = {} GROUP BY n.session_id, n.pid ORDER BY n.rank">(hash, hash));
  std::vector<RankLatest> out;
  while (st.step())
    out.push_back({st.col_int(0), uint32_t(st.col_int(1)), st.col_int(2), st.col_int(3), st.col_int(4),
                   st.col_int(5), st.col_int(6)});
  return out;
}

std::optional<ProcessExit> process_exit(Connection& db, int64_t session, uint32_t pid) {
  auto st = db.prepare(sql<"SELECT end_ts_ns, coalesce(exit_code, 0) FROM processes WHERE {}"
                           " AND end_ts_ns IS NOT NULL">(of_process(session, pid)));
  if (!st.step()) return std::nullopt;  // one row per process and session (the key)
  return ProcessExit{st.col_int(0), st.col_int(1)};
}

std::optional<CallAtStop> longest_call_at_stop(Connection& db, int64_t session, uint32_t pid) {
  auto st = db.prepare(sql<"SELECT op_id, coalesce(stack_id, -1), max(waited_ns) FROM stalled_calls WHERE {}"
                           " AND at_stop = 1 GROUP BY tid ORDER BY max(waited_ns) DESC LIMIT 1">(
      of_process(session, pid)));
  if (!st.step()) return std::nullopt;
  return CallAtStop{st.col_int(0), st.col_int(1), st.col_int(2)};
}

std::optional<LongSleep> sleep_reaching(Connection& db, int64_t session, uint32_t pid, int64_t reaches_ns,
                                        int64_t min_dur_ns) {
  auto st = db.prepare(
      sql<"SELECT tid, dur_ns, state, coalesce(syscall, -1), coalesce(stack_id, -1) FROM offcpu_events WHERE {}"
          " AND ts_ns + dur_ns >= {} AND dur_ns >= {}"
          " ORDER BY (tid = pid) DESC, (stack_id IS NOT NULL) DESC, dur_ns DESC LIMIT 1">(
          of_process(session, pid), reaches_ns, min_dur_ns));
  if (!st.step()) return std::nullopt;
  return LongSleep{st.col_int(0), st.col_int(1), st.col_int(2), st.col_int(3), st.col_int(4)};
}

std::optional<SampledStack> top_sampled_stack(Connection& db, int64_t session, uint32_t pid,
                                              int64_t since_ns) {
  if (!has_column(db, sql<"cpu_samples">(), sql<"in_call">())) return std::nullopt;
  auto st = db.prepare(sql<"SELECT coalesce(stack_id, -1), sum(samples) FROM cpu_samples WHERE {} AND ts_ns >= {}"
                           " GROUP BY stack_id ORDER BY sum(samples) DESC LIMIT 1">(of_process(session, pid),
                                                                                   since_ns));
  if (!st.step()) return std::nullopt;
  return SampledStack{st.col_int(0), st.col_int(1)};
}

std::vector<KernelGiven> kernels_given(Connection& db, int64_t session, uint32_t pid,
                                       const std::vector<int64_t>& launch_ops,
                                       const std::vector<int64_t>& lookup_ops, int64_t from_ns, int64_t to_ns,
                                       int limit) {
  // `pid` unqualified is the calls' (kernels has no pid).
  auto st = db.prepare(
      sql<"SELECT coalesce(k.name, '?'), max(c.ts_ns), max(coalesce(c.stack_id, -1)) FROM cuda_call_events c"
          " LEFT JOIN kernels k ON k.id = c.kernel_id WHERE c.{} AND (c.op_id IN ({})"
          " OR (c.op_id IN ({}) AND c.kernel_id IS NOT NULL)) AND"
          " c.ts_ns <= {} AND c.ts_ns > {} GROUP BY 1 ORDER BY 2 DESC LIMIT {}">(
          of_process(session, pid), id_list(launch_ops), id_list(lookup_ops), to_ns, from_ns, limit));
  std::vector<KernelGiven> out;
  while (st.step()) out.push_back({st.col_text(0), st.col_int(1), st.col_int(2)});
  return out;
}

std::vector<ThreadLastCall> threads_quiet_since(Connection& db, int64_t session, uint32_t pid,
                                                uint32_t except_tid, int64_t before_ns) {
  auto st = db.prepare(sql<"SELECT tid, max(ts_ns + dur_ns) FROM cuda_call_events WHERE {} AND tid != {}"
                           " GROUP BY tid HAVING max(ts_ns + dur_ns) < {}">(of_process(session, pid), except_tid,
                                                                           before_ns));
  std::vector<ThreadLastCall> out;
  while (st.step()) out.push_back({st.col_int(0), st.col_int(1)});
  return out;
}

}  // namespace causeway::store
