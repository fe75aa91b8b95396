// SPDX-License-Identifier: Apache-2.0
#include "causeway/store/lookups.h"

#include "causeway/store/checked_sql.h"

namespace causeway::store {

std::vector<std::pair<int64_t, std::string>> op_names(Connection& db) {
  auto st = db.prepare(sql<"SELECT id, name FROM ops">());
  std::vector<std::pair<int64_t, std::string>> out;
  while (st.step()) out.emplace_back(st.col_int(0), st.col_text(1));
  return out;
}

std::string kernel_name(Connection& db, int64_t kernel_id) {
  auto st = db.prepare(sql<"SELECT name FROM kernels WHERE id = {}">(kernel_id));
  std::string name;
  while (st.step()) name = st.col_text(0);
  return name;
}

std::string process_comm(Connection& db, uint32_t pid) {
  auto st = db.prepare(
      sql<"SELECT coalesce(comm, '') FROM processes WHERE pid = {} ORDER BY session_id DESC LIMIT 1">(pid));
  std::string c;
  while (st.step()) c = st.col_text(0);
  return c;
}

std::string process_comm(Connection& db, int64_t session, uint32_t pid) {
  auto st =
      db.prepare(sql<"SELECT coalesce(comm, '') FROM processes WHERE session_id = {} AND pid = {}">(session, pid));
  std::string c;
  while (st.step()) c = st.col_text(0);
  return c;
}

std::string thread_comm(Connection& db, int64_t session, uint32_t pid, uint32_t tid, int64_t at) {
  auto st = db.prepare(sql<"SELECT comm FROM threads WHERE session_id = {} AND tid = {} AND pid = {}"
                           " ORDER BY ts_ns <= {} DESC, CASE WHEN ts_ns <= {} THEN -ts_ns ELSE ts_ns END LIMIT 1">(
      session, tid, pid, at, at));
  std::string name;
  while (st.step()) name = st.col_text(0);
  return name;
}

bool started_before_trace(Connection& db, uint32_t pid) {
  return db.query_int(sql<"SELECT count(*) FROM processes p JOIN sessions s ON s.id = p.session_id WHERE p.pid = {}"
                          " AND p.start_ts_ns IS NOT NULL AND p.start_ts_ns < s.start_ts_ns - 1000000000">(pid))
             .value_or(0) > 0;
}

std::set<uint32_t> tracer_pids(Connection& db) {
  std::set<uint32_t> out;
  if (!has_column(db, sql<"sessions">(), sql<"agent_pid">())) return out;
  auto st = db.prepare(sql<"SELECT DISTINCT agent_pid FROM sessions WHERE agent_pid IS NOT NULL">());
  while (st.step()) out.insert(uint32_t(st.col_int(0)));
  return out;
}

std::string tracer_pids_sql(Connection& db) {
  std::string out = "0";
  for (uint32_t pid : tracer_pids(db)) out += "," + std::to_string(pid);
  return out;
}

bool has_column(Connection& db, const std::string& table, const std::string& column) {
  // The quotes come with the names: a hole inside a quoted literal is no hole to the check.
  return db.query_int(sql<"SELECT count(*) FROM pragma_table_info({}) WHERE name = {}">("'" + table + "'",
                                                                                       "'" + column + "'"))
             .value_or(0) > 0;
}

bool has_table(Connection& db, const std::string& name) {
  return db.query_int(sql<"SELECT count(*) FROM sqlite_master WHERE name = {}">("'" + name + "'")).value_or(0) > 0;
}

bool offcpu_has_stacks(Connection& db) {
  return has_column(db, sql<"offcpu_events">(), sql<"stack_id">());
}

std::vector<LaunchWindowRow> launch_windows(Connection& db) {
  std::vector<LaunchWindowRow> out;
  if (!has_table(db, sql<"launch_windows">())) return out;
  const bool trap = has_column(db, sql<"launch_windows">(), sql<"trap_ns">());
  auto st = db.prepare(trap ? sql<"SELECT session_id, ts_ns, end_ns, trap_ns FROM launch_windows"
                                  " ORDER BY session_id, ts_ns">()
                            : sql<"SELECT session_id, ts_ns, end_ns, NULL FROM launch_windows"
                                  " ORDER BY session_id, ts_ns">());
  while (st.step()) {
    LaunchWindowRow r{st.col_int(0), st.col_int(1), st.col_int(2), std::nullopt};
    if (!st.col_null(3)) r.trap_ns = st.col_int(3);
    out.push_back(r);
  }
  return out;
}

int64_t longest_interval_ns(Connection& db, const std::string& table, const Window& w) {
  return db.query_int(sql<"SELECT coalesce(max(dur_ns), 0) FROM {} WHERE {}">(table, w.sql_where())).value_or(0);
}

std::map<int, int64_t> longest_offcpu_by_state(Connection& db, const Window& w) {
  std::map<int, int64_t> out;
  auto st = db.prepare(sql<"SELECT state, max(dur_ns) FROM offcpu_events WHERE {} GROUP BY state">(w.sql_where()));
  while (st.step()) out[int(st.col_int(0))] = st.col_int(1);
  return out;
}

std::optional<std::pair<int64_t, int64_t>> cuda_call_span(Connection& db, const Window& w, uint32_t pid) {
  auto st = db.prepare(sql<"SELECT min(ts_ns), max(ts_ns + dur_ns) FROM cuda_call_events WHERE {} AND pid = {}">(
      w.sql_where(), pid));
  std::optional<std::pair<int64_t, int64_t>> span;
  while (st.step())
    if (!st.col_null(0)) span = {st.col_int(0), st.col_int(1)};
  return span;
}

namespace {

std::string session_between(int64_t session, int64_t from, int64_t to) {
  return sql<" AND session_id = {} AND ts_ns >= {} AND ts_ns <= {}">(session, from, to);
}

}  // namespace

namespace {
constexpr int64_t kReadingMarginNs = 2'000'000'000;

std::vector<UtilReading> readings(Connection& db, const std::string& sql) {
  auto st = db.prepare(sql);
  std::vector<UtilReading> out;
  while (st.step()) out.push_back({st.col_int(0), int(st.col_int(1)), st.col_double(2)});
  return out;
}
}  // namespace

std::vector<UtilReading> process_sm_readings(Connection& db, int64_t session, uint32_t pid, int64_t from, int64_t to) {
  return readings(db, sql<"SELECT ts_ns, gpu, sm_util FROM gpu_process_samples WHERE pid = {}{}"
                          " AND sm_util IS NOT NULL ORDER BY gpu, ts_ns">(
                          pid, session_between(session, from - kReadingMarginNs, to + kReadingMarginNs)));
}

std::vector<UtilReading> gpus_util_readings(Connection& db, int64_t session, uint32_t pid, int64_t from, int64_t to) {
  const std::string near = session_between(session, from - kReadingMarginNs, to + kReadingMarginNs);
  return readings(db, sql<"SELECT ts_ns, gpu, util_gpu FROM gpu_samples WHERE util_gpu IS NOT NULL{}"
                          " AND (gpu IN (SELECT gpu FROM gpu_process_samples WHERE pid = {}{})"
                          " OR NOT EXISTS (SELECT 1 FROM gpu_process_samples WHERE pid = {}{})) ORDER BY gpu, ts_ns">(
                          near, pid, near, pid, near));
}

void each_cpu_sample(Connection& db, int64_t session, uint32_t tid, int64_t from, int64_t to, bool outside_calls,
                     const std::function<void(const CpuSampleRow&)>& f) {
  auto st = db.prepare(outside_calls ? sql<"SELECT ts_ns, coalesce(stack_id, -1), samples FROM cpu_samples"
                                           " WHERE session_id = {} AND tid = {} AND ts_ns >= {} AND ts_ns < {}"
                                           " AND in_call = 0">(session, tid, from, to)
                                     : sql<"SELECT ts_ns, coalesce(stack_id, -1), samples FROM cpu_samples"
                                           " WHERE session_id = {} AND tid = {} AND ts_ns >= {} AND ts_ns < {}">(
                                           session, tid, from, to));
  while (st.step()) f({st.col_int(0), st.col_int(1), st.col_int(2)});
}

std::optional<TopFrame> top_python_frame(Connection& db, const std::string& stack_ids_sql) {
  // Library code (site-/dist-packages, the interpreter's lib) is not where
  // users act: it comes after any user frame.
  auto st = db.prepare(sql<"WITH ids AS ({}), top AS (SELECT stack_id FROM ids WHERE stack_id IS NOT NULL "
                           "GROUP BY stack_id ORDER BY count(*) DESC LIMIT 1) "
                           "SELECT f.func, f.file, coalesce(f.line, 0) FROM stack_frames f JOIN top USING "
                           "(stack_id) WHERE f.kind = 'python' ORDER BY "
                           "(f.file LIKE '%-packages/%' OR f.file LIKE '%/lib/python%' OR f.file LIKE '<%'), "
                           "f.depth LIMIT 1">(stack_ids_sql));
  std::optional<TopFrame> f;
  while (st.step()) f = TopFrame{st.col_text(0), st.col_text(1), st.col_int(2)};
  return f;
}

std::optional<TopFrame> top_native_frame(Connection& db, const std::string& stack_ids_sql) {
  // Skipped: the traced API itself (the runtime's entry points sit in the
  // executable when it is linked statically), unnamed addresses, and the
  // C/C++ runtime and GPU libraries' files.
  auto st = db.prepare(sql<
      "WITH ids AS ({}), top AS (SELECT stack_id FROM ids WHERE stack_id IS NOT NULL "
      "GROUP BY stack_id ORDER BY count(*) DESC LIMIT 1) "
      "SELECT f.func, coalesce(f.module, '') FROM stack_frames f JOIN top USING (stack_id) WHERE f.kind = 'native'"
      " AND f.func NOT LIKE '0x%' AND f.func NOT LIKE '[%' AND f.func NOT GLOB 'cuda[A-Z]*' AND f.func NOT GLOB"
      " 'cu[A-Z]*' AND f.func NOT GLOB '__cuda*' AND f.func NOT GLOB 'nccl[A-Z]*' AND f.func NOT"
      " LIKE 'cudart::%' AND f.func NOT LIKE 'std::%' AND coalesce(f.module, '') NOT GLOB 'lib*.so*' AND "
      "coalesce(f.module, '') NOT GLOB '*/lib*.so*'"
      " AND coalesce(f.module, '') NOT GLOB '*-packages/*' ORDER BY"
      " f.depth LIMIT 1">(stack_ids_sql));
  std::optional<TopFrame> f;
  while (st.step()) f = TopFrame{st.col_text(0), st.col_text(1), 0};
  return f;
}

}  // namespace causeway::store
