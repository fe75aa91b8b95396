// SPDX-License-Identifier: Apache-2.0
#include "causeway/store/lookups.h"

namespace causeway::store {

std::vector<std::pair<int64_t, std::string>> op_names(Connection& db) {
  auto st = db.prepare("SELECT id, name FROM ops");
  std::vector<std::pair<int64_t, std::string>> out;
  while (st.step()) out.emplace_back(st.col_int(0), st.col_text(1));
  return out;
}

std::string kernel_name(Connection& db, int64_t kernel_id) {
  auto st = db.prepare("SELECT name FROM kernels WHERE id = " + std::to_string(kernel_id));
  std::string name;
  while (st.step()) name = st.col_text(0);
  return name;
}

std::string process_comm(Connection& db, uint32_t pid) {
  auto st = db.prepare("SELECT coalesce(comm, '') FROM processes WHERE pid = " + std::to_string(pid) +
                       " ORDER BY session_id DESC LIMIT 1");
  std::string c;
  while (st.step()) c = st.col_text(0);
  return c;
}

std::string process_comm(Connection& db, int64_t session, uint32_t pid) {
  auto st = db.prepare("SELECT coalesce(comm, '') FROM processes WHERE session_id = " + std::to_string(session) +
                       " AND pid = " + std::to_string(pid));
  std::string c;
  while (st.step()) c = st.col_text(0);
  return c;
}

std::string thread_comm(Connection& db, int64_t session, uint32_t pid, uint32_t tid, int64_t at) {
  const std::string t = std::to_string(at);
  auto st = db.prepare("SELECT comm FROM threads WHERE session_id = " + std::to_string(session) + " AND tid = " +
                       std::to_string(tid) + " AND pid = " + std::to_string(pid) + " ORDER BY ts_ns <= " + t +
                       " DESC, CASE WHEN ts_ns <= " + t + " THEN -ts_ns ELSE ts_ns END LIMIT 1");
  std::string name;
  while (st.step()) name = st.col_text(0);
  return name;
}

bool started_before_trace(Connection& db, uint32_t pid) {
  return db.query_int("SELECT count(*) FROM processes p JOIN sessions s ON s.id = p.session_id WHERE p.pid = " +
                      std::to_string(pid) + " AND p.start_ts_ns IS NOT NULL AND p.start_ts_ns < s.start_ts_ns - "
                      "1000000000").value_or(0) > 0;
}

bool has_column(Connection& db, const std::string& table, const std::string& column) {
  return db.query_int("SELECT count(*) FROM pragma_table_info('" + table + "') WHERE name = '" + column + "'")
             .value_or(0) > 0;
}

bool has_table(Connection& db, const std::string& name) {
  return db.query_int("SELECT count(*) FROM sqlite_master WHERE name = '" + name + "'").value_or(0) > 0;
}

std::vector<LaunchWindowRow> launch_windows(Connection& db) {
  std::vector<LaunchWindowRow> out;
  if (!has_table(db, "launch_windows")) return out;
  const bool trap = has_column(db, "launch_windows", "trap_ns");
  auto st = db.prepare(std::string("SELECT session_id, ts_ns, end_ns, ") + (trap ? "trap_ns" : "NULL") +
                       " FROM launch_windows ORDER BY session_id, ts_ns");
  while (st.step()) {
    LaunchWindowRow r{st.col_int(0), st.col_int(1), st.col_int(2), std::nullopt};
    if (!st.col_null(3)) r.trap_ns = st.col_int(3);
    out.push_back(r);
  }
  return out;
}

int64_t longest_interval_ns(Connection& db, const std::string& table, const Window& w) {
  return db.query_int("SELECT coalesce(max(dur_ns), 0) FROM " + table + " WHERE " + w.sql_where()).value_or(0);
}

std::optional<std::pair<int64_t, int64_t>> cuda_call_span(Connection& db, const Window& w, uint32_t pid) {
  auto st = db.prepare("SELECT min(ts_ns), max(ts_ns + dur_ns) FROM cuda_call_events WHERE " + w.sql_where() +
                       " AND pid = " + std::to_string(pid));
  std::optional<std::pair<int64_t, int64_t>> span;
  while (st.step())
    if (!st.col_null(0)) span = {st.col_int(0), st.col_int(1)};
  return span;
}

namespace {

std::string session_between(int64_t session, int64_t from, int64_t to) {
  return " AND session_id = " + std::to_string(session) + " AND ts_ns >= " + std::to_string(from) +
         " AND ts_ns <= " + std::to_string(to);
}

std::optional<double> one_double(Connection& db, const std::string& sql) {
  auto st = db.prepare(sql);
  std::optional<double> v;
  while (st.step())
    if (!st.col_null(0)) v = st.col_double(0);
  return v;
}

}  // namespace

std::optional<double> process_sm_util(Connection& db, int64_t session, uint32_t pid, int64_t from, int64_t to) {
  return one_double(db, "SELECT avg(sm_util) FROM gpu_process_samples WHERE pid = " + std::to_string(pid) +
                            session_between(session, from, to));
}

std::optional<double> gpus_util(Connection& db, int64_t session, uint32_t pid, int64_t from, int64_t to) {
  const std::string when = session_between(session, from, to);
  return one_double(db, "SELECT avg(util_gpu) FROM gpu_samples WHERE 1" + when +
                            " AND (gpu IN (SELECT gpu FROM gpu_process_samples WHERE pid = " + std::to_string(pid) +
                            when + ") OR NOT EXISTS (SELECT 1 FROM gpu_process_samples WHERE pid = " +
                            std::to_string(pid) + when + "))");
}

void each_cpu_sample(Connection& db, int64_t session, uint32_t tid, int64_t from, int64_t to, bool outside_calls,
                     const std::function<void(const CpuSampleRow&)>& f) {
  auto st = db.prepare("SELECT ts_ns, coalesce(stack_id, -1), samples FROM cpu_samples WHERE session_id = " +
                       std::to_string(session) + " AND tid = " + std::to_string(tid) + " AND ts_ns >= " +
                       std::to_string(from) + " AND ts_ns < " + std::to_string(to) +
                       (outside_calls ? " AND in_call = 0" : ""));
  while (st.step()) f({st.col_int(0), st.col_int(1), st.col_int(2)});
}

std::optional<TopFrame> top_python_frame(Connection& db, const std::string& stack_ids_sql) {
  // Library code (site-/dist-packages, the interpreter's lib) is not where
  // users act: it comes after any user frame.
  auto st = db.prepare("WITH ids AS (" + stack_ids_sql +
                       "), top AS (SELECT stack_id FROM ids WHERE stack_id IS NOT NULL "
                       "GROUP BY stack_id ORDER BY count(*) DESC LIMIT 1) "
                       "SELECT f.func, f.file, coalesce(f.line, 0) FROM stack_frames f JOIN top USING "
                       "(stack_id) WHERE f.kind = 'python' ORDER BY "
                       "(f.file LIKE '%-packages/%' OR f.file LIKE '%/lib/python%' OR f.file LIKE '<%'), "
                       "f.depth LIMIT 1");
  std::optional<TopFrame> f;
  while (st.step()) f = TopFrame{st.col_text(0), st.col_text(1), st.col_int(2)};
  return f;
}

std::optional<TopFrame> top_native_frame(Connection& db, const std::string& stack_ids_sql) {
  // Skipped: the traced API itself (the runtime's entry points sit in the
  // executable when it is linked statically), unnamed addresses, and the
  // C/C++ runtime and GPU libraries' files.
  auto st = db.prepare(
      "WITH ids AS (" + stack_ids_sql +
      "), top AS (SELECT stack_id FROM ids WHERE stack_id IS NOT NULL "
      "GROUP BY stack_id ORDER BY count(*) DESC LIMIT 1) "
      "SELECT f.func, coalesce(f.module, '') FROM stack_frames f JOIN top USING (stack_id) WHERE f.kind = 'native'"
      " AND f.func NOT LIKE '0x%' AND f.func NOT LIKE '[%' AND f.func NOT GLOB 'cuda[A-Z]*' AND f.func NOT GLOB"
      " 'cu[A-Z]*' AND f.func NOT GLOB '__cuda*' AND f.func NOT GLOB 'nccl[A-Z]*' AND f.func NOT"
      " LIKE 'cudart::%' AND f.func NOT LIKE 'std::%' AND coalesce(f.module, '') NOT GLOB 'lib*.so*' AND "
      "coalesce(f.module, '') NOT GLOB '*/lib*.so*'"
      " AND coalesce(f.module, '') NOT GLOB '*-packages/*' ORDER BY"
      " f.depth LIMIT 1");
  std::optional<TopFrame> f;
  while (st.step()) f = TopFrame{st.col_text(0), st.col_text(1), 0};
  return f;
}

}  // namespace causeway::store
