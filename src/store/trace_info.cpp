// SPDX-License-Identifier: Apache-2.0
#include "causeway/store/trace_info.h"

#include "causeway/store/checked_sql.h"

namespace causeway::store {

std::vector<SessionInfo> sessions(Connection& db) {
  auto st = db.prepare(
      sql<"SELECT id, host, node_id, source, version, command_line, start_ts_ns, end_ts_ns "
          "FROM sessions ORDER BY id">());
  std::vector<SessionInfo> out;
  while (st.step()) {
    SessionInfo s;
    s.id = st.col_int(0);
    s.host = st.col_text(1);
    s.node_id = st.col_text(2);
    s.source = st.col_text(3);
    s.version = st.col_text(4);
    s.command_line = st.col_text(5);
    s.start_ts_ns = st.col_int(6);
    if (!st.col_null(7)) s.end_ts_ns = st.col_int(7);
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<std::pair<std::string, int64_t>> family_row_counts(Connection& db) {
  std::vector<std::pair<std::string, int64_t>> out;
  for (const std::string& t : {sql<"cuda_call_events">(), sql<"nccl_call_events">(), sql<"offcpu_events">(),
                               sql<"io_requests">(), sql<"tcp_retransmits">(), sql<"reclaims">(),
                               sql<"verbs_events">(), sql<"processes">(), sql<"kernels">(), sql<"stack_frames">()})
    out.emplace_back(t, db.query_int(sql<"SELECT count(*) FROM {}">(t)).value_or(0));
  return out;
}

int64_t records_dropped(Connection& db) {
  return db.query_int(sql<"SELECT coalesce(sum(count), 0) FROM drops">()).value_or(0);
}

const char* call_table_name(CallTable table) {
  static const std::string cuda = sql<"cuda_call_events">(), nccl = sql<"nccl_call_events">();
  return table == CallTable::Cuda ? cuda.c_str() : nccl.c_str();
}

CallStackRef call_stack(Connection& db, CallTable table, int64_t rowid) {
  auto st = db.prepare(sql<"SELECT stack_id FROM {} WHERE rowid = ?">(call_table_name(table)));
  st.bind(1, rowid);
  CallStackRef ref;
  if (!st.step()) return ref;
  ref.found = true;
  if (!st.col_null(0)) ref.stack_id = st.col_int(0);
  return ref;
}

std::vector<model::StackFrameRow> stack_frames(Connection& db, int64_t stack_id) {
  auto st = db.prepare(
      sql<"SELECT depth, kind, func, file, line, module FROM stack_frames WHERE stack_id = ? ORDER BY depth">());
  st.bind(1, stack_id);
  std::vector<model::StackFrameRow> out;
  while (st.step()) {
    model::StackFrameRow r;
    r.stack_id = stack_id;
    r.depth = st.col_int(0);
    r.frame.kind = st.col_text(1);
    r.frame.func = st.col_text(2);
    r.frame.file = st.col_text(3);
    if (!st.col_null(4)) r.frame.line = st.col_int(4);
    r.frame.module = st.col_text(5);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace causeway::store
