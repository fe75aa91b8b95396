// SPDX-License-Identifier: Apache-2.0
#include "causeway/store/gpu_reads.h"

#include "causeway/common/op_table.h"
#include "causeway/store/lookups.h"
#include "read_util.h"

namespace causeway::store {

namespace {

// A kernel-log XID's GPU as NVML numbers it: joined by PCI address, else the
// only GPU of the session, else -1 (gpu_events aliased `e`). A literal spliced
// into each statement's sql<...> so that `e` is checked with the statement
// that declares it.
#define CW_GPU_INDEX_SQL                                                                                  \
  "CASE WHEN e.gpu >= 0 THEN e.gpu ELSE coalesce((SELECT d.gpu FROM gpu_devices d WHERE d.session_id = " \
  "e.session_id AND d.pci = e.pci), (SELECT min(d.gpu) FROM gpu_devices d WHERE d.session_id = e.session_id" \
  " HAVING count(*) = 1), -1) END"

std::string in_range(int64_t from_ns, int64_t to_ns) {
  return sql<"ts_ns >= {} AND ts_ns < {}">(from_ns, to_ns);
}

std::vector<int64_t> ints(Connection& db, const std::string& sql) {
  std::vector<int64_t> out;
  auto st = db.prepare(sql);
  while (st.step()) out.push_back(st.col_int(0));
  return out;
}

}  // namespace

void each_process_xid(Connection& db, int64_t from_ns, int64_t to_ns,
                      const std::function<void(const ProcessXid&)>& f) {
  // Traced processes only: another tenant's fault is the GPU's story.
  auto st = db.prepare(sql<
      "SELECT session_id, " CW_GPU_INDEX_SQL ", ts_ns, code, pid, coalesce(process, ''), coalesce(pci, ''),"
      " coalesce(detail, '') FROM gpu_events e WHERE event = 'xid' AND pid IS NOT NULL AND (pid IN"
      " (SELECT pid FROM processes p WHERE p.session_id = e.session_id) OR pid IN (SELECT pid FROM"
      " cuda_call_events c WHERE c.session_id = e.session_id)) AND {} ORDER BY ts_ns">(in_range(from_ns, to_ns)));
  ProcessXid x;
  while (st.step()) {
    x.session = st.col_int(0);
    x.gpu = st.col_int(1);
    x.ts_ns = st.col_int(2);
    x.code = st.col_int(3);
    x.pid = st.col_int(4);
    x.process = st.col_text(5);
    x.pci = st.col_text(6);
    x.detail = st.col_text(7);
    f(x);
  }
}

void each_gpu_event(Connection& db, int64_t from_ns, int64_t to_ns,
                    const std::function<void(const GpuEvent&)>& f) {
  auto st = db.prepare(sql<"SELECT session_id, " CW_GPU_INDEX_SQL ", ts_ns, event, code, pid, coalesce(pci, ''), "
                           "coalesce(process, '') FROM gpu_events e WHERE {} ORDER BY ts_ns">(
      in_range(from_ns, to_ns)));
  GpuEvent e;
  while (st.step()) {
    e.session = st.col_int(0);
    e.gpu = st.col_int(1);
    e.ts_ns = st.col_int(2);
    e.event = st.col_text(3);
    e.code = st.col_int(4);
    e.pid = st.col_null(5) ? std::nullopt : std::optional(st.col_int(5));
    e.pci = st.col_text(6);
    e.process = st.col_text(7);
    f(e);
  }
}

std::vector<GpuCounterGrowth> gpu_counter_growth(Connection& db, int64_t from_ns, int64_t to_ns) {
  auto st = db.prepare(sql<
      "SELECT session_id, gpu, max(coalesce(ecc_uncorrected, 0)) - min(coalesce(ecc_uncorrected, 0)),"
      " max(coalesce(remap_pending, 0)), max(coalesce(retired_pages, 0)) - min(coalesce(retired_pages, 0)),"
      " min(CASE WHEN remap_pending > 0 THEN ts_ns END) FROM gpu_samples WHERE {} GROUP BY 1, 2">(
      in_range(from_ns, to_ns)));
  std::vector<GpuCounterGrowth> out;
  while (st.step()) {
    GpuCounterGrowth g;
    g.session = st.col_int(0);
    g.gpu = st.col_int(1);
    g.ecc_uncorrected = st.col_int(2);
    g.remap_pending = st.col_int(3);
    g.retired_pages = st.col_int(4);
    if (!st.col_null(5)) g.first_remap_pending_ns = st.col_int(5);
    out.push_back(g);
  }
  return out;
}

void each_gpu_clock_sample(Connection& db, int64_t from_ns, int64_t to_ns,
                           const std::function<void(const GpuClockSample&)>& f) {
  auto st = db.prepare(
      sql<"SELECT session_id, gpu, ts_ns, coalesce(throttle, 0), coalesce(sm_clock, 0) FROM gpu_samples WHERE {}"
          " ORDER BY session_id, gpu, ts_ns">(in_range(from_ns, to_ns)));
  GpuClockSample s;
  while (st.step()) {
    s = {st.col_int(0), st.col_int(1), st.col_int(2), st.col_int(3), st.col_int(4)};
    f(s);
  }
}

std::string gpu_device_name(Connection& db, int64_t session, int64_t gpu) {
  std::string name;
  auto st = db.prepare(sql<"SELECT coalesce(name, '') FROM gpu_devices WHERE session_id = {} AND gpu = {}">(
      session, gpu));
  while (st.step()) name = st.col_text(0);
  return name;
}

GpuDeviceLimits gpu_device_limits(Connection& db, int64_t session, int64_t gpu) {
  const bool has_default = has_column(db, sql<"gpu_devices">(), sql<"power_default_mw">());
  auto st = db.prepare(sql<"SELECT coalesce(sm_clock_max, 0), coalesce(power_limit_mw, 0), {}"
                           " FROM gpu_devices WHERE session_id = {} AND gpu = {}">(
      has_default ? sql<"coalesce(power_default_mw, 0)">() : sql<"0">(), session, gpu));
  GpuDeviceLimits l;
  while (st.step()) l = {st.col_int(0), st.col_int(1), st.col_int(2)};
  return l;
}

int64_t gpu_device_count(Connection& db, int64_t session) {
  return db.query_int(sql<"SELECT count(*) FROM gpu_devices WHERE session_id = {}">(session)).value_or(0);
}

std::vector<int64_t> gpu_process_pids(Connection& db, int64_t session, int64_t gpu, const Window& w) {
  return ints(db, sql<"SELECT DISTINCT pid FROM gpu_process_samples WHERE session_id = {} AND gpu = {}{}">(
                      session, gpu, w.sql_and()));
}

std::vector<int64_t> cuda_call_pids(Connection& db, int64_t session, const Window& w) {
  return ints(db, sql<"SELECT DISTINCT pid FROM cuda_call_events WHERE session_id = {}{}">(session, w.sql_and()));
}

std::optional<KernelLaunch> last_kernel_launch(Connection& db, int64_t session, int64_t pid, int64_t at_ns) {
  const std::string launches = op_ids_sql_list(OpClass::Launch), naming = op_ids_sql_list(OpClass::Naming);
  auto st = db.prepare(sql<"SELECT c.ts_ns, coalesce(k.name, ''), c.stack_id, c.op_id IN ({}) FROM"
                           " cuda_call_events c LEFT JOIN kernels k ON k.id = c.kernel_id WHERE c.session_id = {}"
                           " AND c.pid = {} AND c.ts_ns <= {} AND c.ret = 0 AND c.kernel_id IS NOT NULL AND"
                           " (c.op_id IN ({}) OR c.op_id IN ({})) ORDER BY c.ts_ns DESC LIMIT 1">(
      naming, session, pid, at_ns, launches, naming));
  if (!st.step()) return std::nullopt;
  KernelLaunch k;
  k.ts_ns = st.col_int(0);
  k.kernel = st.col_text(1);
  if (!st.col_null(2)) k.stack_id = st.col_int(2);
  k.lookup = st.col_int(3) != 0;
  return k;
}

std::optional<FailedCall> first_failed_call(Connection& db, int64_t session, int64_t pid, int64_t from_ns) {
  auto st = db.prepare(sql<"SELECT ts_ns, op_id, ret FROM cuda_call_events WHERE session_id = {} AND pid = {}"
                           " AND ret != 0 AND ts_ns >= {} ORDER BY ts_ns LIMIT 1">(session, pid, from_ns));
  if (!st.step()) return std::nullopt;
  return FailedCall{st.col_int(0), pid, st.col_int(1), st.col_int(2)};
}

std::optional<FailedCall> first_failed_call_in(Connection& db, int64_t session, int64_t from_ns,
                                               int64_t to_ns) {
  auto st = db.prepare(sql<"SELECT ts_ns, pid, op_id, ret FROM cuda_call_events WHERE ret != 0 AND {}"
                           " AND session_id = {} ORDER BY ts_ns LIMIT 1">(in_range(from_ns, to_ns), session));
  if (!st.step()) return std::nullopt;
  return FailedCall{st.col_int(0), st.col_int(1), st.col_int(2), st.col_int(3)};
}

void each_gpu_wait(Connection& db, int64_t session, int64_t pid, const Window& w,
                   const std::function<void(const TimedCall&)>& f) {
  const std::string waits = sql<"{},{}">(op_ids_sql_list(OpClass::Sync), op_ids_sql_list(OpClass::Collective));
  const std::string of = of_process(session, uint32_t(pid)), and_w = w.sql_and();
  auto st = db.prepare(sql<"SELECT ts_ns, dur_ns, op_id FROM cuda_call_events WHERE {} AND ret = 0 AND op_id IN ({}){}"
                           " UNION ALL SELECT ts_ns, dur_ns, op_id FROM nccl_call_events WHERE {}"
                           " AND op_id IN ({}){}">(of, waits, and_w, of, waits, and_w));
  TimedCall c;
  while (st.step()) {
    c = {st.col_int(0), st.col_int(1), st.col_int(2)};
    f(c);
  }
}

std::string op_stack_ids_sql(const Window& w, int64_t pid, int64_t op_id) {
  return sql<"SELECT stack_id FROM cuda_call_events WHERE {} AND pid = {} AND op_id = {}">(w.sql_where(), pid,
                                                                                        op_id);
}

namespace {

// Ranks of one NCCL job launch together by design: left out.
const std::string kSoloPids = sql<"pid NOT IN (SELECT pid FROM nccl_call_events WHERE nranks > 1)">();

}  // namespace

int64_t create_shared_buckets(Connection& db) {
  db.exec(sql<"DROP TABLE IF EXISTS temp.shared_buckets">());
  db.exec(sql<"CREATE TEMP TABLE shared_buckets AS SELECT b FROM gpu_slots WHERE {} GROUP BY b "
              "HAVING count(*) >= 2">(kSoloPids));
  return db.query_int(sql<"SELECT count(*) FROM shared_buckets">()).value_or(0);
}

std::vector<std::pair<uint32_t, int64_t>> gpus_of_candidates(Connection& db, const Window& w) {
  auto st = db.prepare(sql<"SELECT DISTINCT pid, gpu FROM gpu_process_samples WHERE {}"
                           " AND pid IN (SELECT pid FROM gpu_slots WHERE {})">(w.sql_where(), kSoloPids));
  std::vector<std::pair<uint32_t, int64_t>> out;
  while (st.step()) out.emplace_back(uint32_t(st.col_int(0)), st.col_int(1));
  return out;
}

int64_t drop_buckets_of_apart(Connection& db, const std::vector<uint32_t>& apart) {
  db.exec(sql<"DROP TABLE IF EXISTS temp.apart_pids">());
  db.exec(sql<"CREATE TEMP TABLE apart_pids (pid INTEGER PRIMARY KEY)">());
  for (uint32_t pid : apart) db.exec(sql<"INSERT INTO apart_pids VALUES ({})">(pid));
  db.exec(sql<"DELETE FROM shared_buckets WHERE b NOT IN (SELECT b FROM gpu_slots WHERE {}"
              " AND pid NOT IN (SELECT pid FROM apart_pids) GROUP BY b HAVING count(*) >= 2)">(kSoloPids));
  return db.query_int(sql<"SELECT count(*) FROM shared_buckets">()).value_or(0);
}

std::vector<std::pair<uint32_t, int64_t>> work_in_shared_buckets(Connection& db) {
  auto st = db.prepare(sql<"SELECT pid, sum(n) FROM gpu_slots WHERE {}"
                           " AND b IN (SELECT b FROM shared_buckets) GROUP BY pid ORDER BY 2 DESC">(kSoloPids));
  std::vector<std::pair<uint32_t, int64_t>> out;
  while (st.step()) out.emplace_back(uint32_t(st.col_int(0)), st.col_int(1));
  return out;
}

SyncSharing sync_sharing(Connection& db, const Window& w, uint32_t pid) {
  auto st = db.prepare(sql<"SELECT avg(CASE WHEN sb.b IS NULL THEN c.dur_ns END), avg(CASE WHEN sb.b IS NOT "
                           "NULL THEN c.dur_ns END), count(sb.b) FROM cuda_call_events c LEFT JOIN "
                           "shared_buckets sb ON sb.b = c.ts_ns / {} WHERE {} AND c.pid = {} AND c.op_id IN ({})">(
      kGpuSlotNs, w.sql_where("c."), pid, op_ids_sql_list(OpClass::Sync)));
  SyncSharing r;
  while (st.step()) {
    r.alone_ns = st.col_null(0) ? std::nullopt : std::optional(st.col_double(0));
    r.shared_ns = st.col_null(1) ? std::nullopt : std::optional(st.col_double(1));
    r.shared_calls = st.col_int(2);
  }
  return r;
}

int64_t busiest_sync_op(Connection& db, uint32_t pid) {
  return db.query_int(sql<"SELECT op_id FROM baseline WHERE pid = {} AND op_id IN ({}) ORDER BY total_ns DESC"
                          " LIMIT 1">(pid, op_ids_sql_list(OpClass::Sync)))
      .value_or(0);
}

std::vector<std::pair<int64_t, double>> sm_util_when_shared(Connection& db, const Window& w, uint32_t pid) {
  auto st = db.prepare(sql<"SELECT gpu, avg(sm_util) FROM gpu_process_samples s WHERE {} AND pid = {}"
                           " AND sm_util IS NOT NULL AND EXISTS (SELECT 1 FROM shared_buckets sb WHERE "
                           "sb.b = s.ts_ns / {}) GROUP BY gpu">(w.sql_where(), pid, kGpuSlotNs));
  std::vector<std::pair<int64_t, double>> out;
  while (st.step()) out.emplace_back(st.col_int(0), st.col_double(1));
  return out;
}

}  // namespace causeway::store
