// SPDX-License-Identifier: Apache-2.0
#include "rule_context.h"

#include <algorithm>
#include <map>

#include <cstdio>

#include "causeway/common/op_table.h"
#include "timeline.h"

namespace causeway::analyze {

RuleContext::RuleContext(store::Connection& d, const Window& w) : db(d), window(w) {
  each("SELECT id, name FROM ops", [&](store::Statement& s) {
    op_names_[s.col_int(0)] = s.col_text(1);
  });
  max_offcpu_ns_ = scalar("SELECT coalesce(max(dur_ns), 0) FROM offcpu_events WHERE " + in_window());
  // Traces before schema 9 have no such table: launches were always probed.
  // Before schema 20 a window's launches were assumed to cost kLaunchTrapNs.
  if (scalar("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'launch_windows'")) {
    const bool trap = has_column("launch_windows", "trap_ns");
    each(std::string("SELECT session_id, ts_ns, end_ns, ") + (trap ? "trap_ns" : "NULL") +
             " FROM launch_windows ORDER BY session_id, ts_ns",
         [&](store::Statement& s) {
           launch_windows_[s.col_int(0)].push_back(
               {s.col_int(1), s.col_int(2), s.col_null(3) ? kLaunchTrapNs : s.col_int(3)});
         });
  }
  // Traces before schema 15 took no stack when a thread went to sleep.
  offcpu_stacks_ = has_column("offcpu_events", "stack_id");
  timelines_ = std::make_unique<ThreadTimelines>(*this);
}

RuleContext::~RuleContext() = default;

std::vector<std::pair<int64_t, int64_t>> RuleContext::launch_windows(int64_t session, int64_t from, int64_t to) const {
  std::vector<std::pair<int64_t, int64_t>> out;
  auto it = launch_windows_.find(session);
  if (it == launch_windows_.end()) return out;
  int64_t covered = 0;
  for (const auto& w : it->second) {
    const int64_t lo = std::max(w.from, from), hi = std::min(w.to, to);
    if (lo < hi) out.emplace_back(lo, hi), covered += hi - lo;
  }
  if (covered >= to - from) out.clear();  // probed throughout
  else if (out.empty()) out.emplace_back(from, from);  // never probed in [from, to)
  return out;
}

int64_t RuleContext::launch_trap_ns(int64_t session, int64_t from, int64_t to) const {
  auto it = launch_windows_.find(session);
  if (it == launch_windows_.end()) return kLaunchTrapNs;
  double weighed = 0, covered = 0;
  for (const auto& w : it->second) {
    const int64_t lo = std::max(w.from, from), hi = std::min(w.to, to);
    if (lo >= hi) continue;
    weighed += double(hi - lo) * double(w.trap_ns);
    covered += double(hi - lo);
  }
  return covered > 0 ? int64_t(weighed / covered) : kLaunchTrapNs;
}

std::string RuleContext::in_window(const std::string& a) const {
  std::string s = in_time(a);
  if (window.pid) s += " AND " + a + "pid = " + std::to_string(*window.pid);
  return s;
}

std::string RuleContext::in_time(const std::string& a) const {
  return a + "ts_ns >= " + std::to_string(window.from_ns) + " AND " + a + "ts_ns < " + std::to_string(window.to_ns);
}

void RuleContext::each(const std::string& sql,
                       const std::function<void(store::Statement&)>& row) const {
  auto st = db.prepare(sql);
  while (st.step()) row(st);
}

int64_t RuleContext::scalar(const std::string& sql) const {
  return db.query_int(sql).value_or(0);
}

bool RuleContext::has_column(const std::string& table, const std::string& column) const {
  return scalar("SELECT count(*) FROM pragma_table_info('" + table + "') WHERE name = '" + column + "'") > 0;
}

std::string RuleContext::op_name(int64_t op_id) const {
  if (auto it = op_names_.find(op_id); it != op_names_.end()) return it->second;
  if (const auto* op = find_op(uint16_t(op_id))) return std::string(op->name);
  return "op#" + std::to_string(op_id);
}

std::string RuleContext::kernel_name(int64_t kernel_id) const {
  if (kernel_id < 0) return {};
  std::string name;
  each("SELECT name FROM kernels WHERE id = " + std::to_string(kernel_id),
       [&](store::Statement& s) { name = s.col_text(0); });
  return name;
}

std::string RuleContext::comm(uint32_t pid) const {
  std::string c;
  each("SELECT coalesce(comm, '') FROM processes WHERE pid = " + std::to_string(pid) +
           " ORDER BY session_id DESC LIMIT 1",
       [&](store::Statement& s) { c = s.col_text(0); });
  return c;
}

int64_t RuleContext::process_span_ns(uint32_t pid) const {
  if (auto it = spans.find(pid); it != spans.end() && it->second.second > it->second.first)
    return it->second.second - it->second.first;
  int64_t span = 0;
  each("SELECT min(ts_ns), max(ts_ns + dur_ns) FROM cuda_call_events WHERE " + in_window() +
           " AND pid = " + std::to_string(pid),
       [&](store::Statement& s) {
         if (!s.col_null(0)) span = s.col_int(1) - s.col_int(0);
       });
  return span > 0 ? span : window.span_ns();
}

int64_t RuleContext::work_start_ns(uint32_t pid) const {
  int64_t start = 0;
  for (const auto& a : accounts)
    if (a.pid == pid && a.startup_end_ns > 0 && (!start || a.startup_end_ns < start)) start = a.startup_end_ns;
  auto it = spans.find(pid);
  const int64_t first = it != spans.end() ? it->second.first : 0;
  return std::max(start, first);
}

int64_t RuleContext::work_span_ns(uint32_t pid) const {
  auto it = spans.find(pid);
  if (it == spans.end() || it->second.second <= it->second.first) return process_span_ns(pid);
  return std::max<int64_t>(1, it->second.second - work_start_ns(pid));
}

std::string RuleContext::thread_name(int64_t session, uint32_t pid, uint32_t tid, int64_t at) const {
  std::string name;
  // Its latest name by then; else the first one after (a thread of a job
  // already running is named when its process is first traced).
  const std::string t = std::to_string(at);
  each("SELECT comm FROM threads WHERE session_id = " + std::to_string(session) + " AND tid = " +
           std::to_string(tid) + " AND pid = " + std::to_string(pid) + " ORDER BY ts_ns <= " + t +
           " DESC, CASE WHEN ts_ns <= " + t + " THEN -ts_ns ELSE ts_ns END LIMIT 1",
       [&](store::Statement& s) { name = s.col_text(0); });
  if (!name.empty()) return name;
  each("SELECT coalesce(comm, '') FROM processes WHERE session_id = " + std::to_string(session) +
           " AND pid = " + std::to_string(pid),
       [&](store::Statement& s) { name = s.col_text(0); });
  return name;
}

bool RuleContext::attached(uint32_t pid) const {
  auto [it, fresh] = attached_.try_emplace(pid, false);
  if (fresh)
    it->second = scalar("SELECT count(*) FROM processes p JOIN sessions s ON s.id = p.session_id WHERE p.pid = " +
                        std::to_string(pid) + " AND p.start_ts_ns IS NOT NULL AND p.start_ts_ns < s.start_ts_ns - "
                        "1000000000") > 0;
  return it->second;
}

std::optional<double> RuleContext::gpu_busy(int64_t session, uint32_t pid, int64_t from, int64_t to) const {
  std::optional<double> busy;
  const std::string when = " AND session_id = " + std::to_string(session) + " AND ts_ns >= " +
                           std::to_string(from) + " AND ts_ns <= " + std::to_string(to);
  each("SELECT avg(sm_util) FROM gpu_process_samples WHERE pid = " + std::to_string(pid) + when,
       [&](store::Statement& s) {
         if (!s.col_null(0)) busy = s.col_double(0) / 100.0;
       });
  if (busy) return busy;
  // The GPUs the process was seen on, else every GPU sampled.
  each("SELECT avg(util_gpu) FROM gpu_samples WHERE 1" + when +
           " AND (gpu IN (SELECT gpu FROM gpu_process_samples WHERE pid = " + std::to_string(pid) + when +
           ") OR NOT EXISTS (SELECT 1 FROM gpu_process_samples WHERE pid = " + std::to_string(pid) + when + "))",
       [&](store::Statement& s) {
         if (!s.col_null(0)) busy = s.col_double(0) / 100.0;
       });
  return busy;
}

int64_t RuleContext::longest(const std::string& table) const {
  if (table == "offcpu_events") return max_offcpu_ns_;
  return scalar("SELECT coalesce(max(dur_ns), 0) FROM " + table + " WHERE " + in_window());
}

RuleContext::Overlap RuleContext::overlap(const std::string& table, const std::string& a, const std::string& call,
                                          const std::string& call_end, bool same_thread) const {
  Overlap o;
  o.join = " JOIN " + table + " " + a + " ON " + a + ".pid = " + call + ".pid AND " + a +
           ".session_id = " + call + ".session_id" +
           (same_thread ? " AND " + a + ".tid = " + call + ".tid" : std::string()) + " AND " + a +
           ".ts_ns >= " + call + ".ts_ns - " + std::to_string(longest(table)) + " AND " + a + ".ts_ns < " +
           call_end + " AND " + a + ".ts_ns + " + a + ".dur_ns > " + call + ".ts_ns";
  o.clipped = "min(" + a + ".ts_ns + " + a + ".dur_ns, " + call_end + ") - max(" + a + ".ts_ns, " + call +
              ".ts_ns)";
  return o;
}

Symptom RuleContext::symptom(uint32_t pid, int64_t op_id, std::optional<int64_t> kernel_id) const {
  Symptom sy;
  sy.pid = pid;
  sy.comm = comm(pid);
  sy.op = op_name(op_id);
  std::string where = "pid = " + std::to_string(pid) + " AND op_id = " + std::to_string(op_id);
  if (kernel_id) {
    where += " AND kernel_id = " + std::to_string(*kernel_id);
    sy.kernel = kernel_name(*kernel_id);
  }
  // Over kernels: counts add up; percentiles come from the busiest kernel.
  each("SELECT sum(count), max(p50), max(p99), max(max_ns), sum(total_ns) FROM baseline WHERE " +
           where,
       [&](store::Statement& s) {
         sy.calls = s.col_int(0);
         sy.p50_ns = s.col_int(1);
         sy.p99_ns = s.col_int(2);
         sy.max_ns = s.col_int(3);
         sy.wall_share = window.span_ns() ? double(s.col_int(4)) / window.span_ns() : 0;
       });
  each("SELECT count(*), sum(dur_ns), avg(dur_ns * 1.0 / p50), min(ts_ns), max(ts_ns) FROM slow "
       "WHERE " + where,
       [&](store::Statement& s) {
         sy.slow_calls = s.col_int(0);
         if (sy.slow_calls == 0) return;
         sy.wall_share = window.span_ns() ? double(s.col_int(1)) / window.span_ns() : 0;
         sy.slower_x = s.col_double(2);
         sy.first_ts_ns = s.col_int(3);
         sy.last_ts_ns = s.col_int(4);
       });
  return sy;
}

std::optional<UserFrame> RuleContext::top_frame(const std::string& stack_ids_sql) const {
  std::optional<UserFrame> f;
  // Library code (site-/dist-packages, the interpreter's lib) is not where
  // users act; fall back to it only when no user frame exists.
  each("WITH ids AS (" + stack_ids_sql +
           "), top AS (SELECT stack_id FROM ids WHERE stack_id IS NOT NULL "
           "GROUP BY stack_id ORDER BY count(*) DESC LIMIT 1) "
           "SELECT f.func, f.file, coalesce(f.line, 0) FROM stack_frames f JOIN top USING "
           "(stack_id) WHERE f.kind = 'python' ORDER BY "
           "(f.file LIKE '%-packages/%' OR f.file LIKE '%/lib/python%' OR f.file LIKE '<%'), "
           "f.depth LIMIT 1",
       [&](store::Statement& s) { f = UserFrame{s.col_text(0), s.col_text(1), s.col_int(2)}; });
  if (f) return f;
  // A program with no Python (a C++ or CUDA binary, its runtime linked in):
  // the innermost native frame of its own code. Skipped: the traced API
  // itself (the runtime's entry points sit in the executable when it is
  // linked statically), unnamed addresses, and the C/C++ runtime and GPU
  // libraries' files.
  each("WITH ids AS (" + stack_ids_sql +
           "), top AS (SELECT stack_id FROM ids WHERE stack_id IS NOT NULL "
           "GROUP BY stack_id ORDER BY count(*) DESC LIMIT 1) "
           "SELECT f.func, coalesce(f.module, '') FROM stack_frames f JOIN top USING (stack_id) WHERE f.kind = 'native'"
           " AND f.func NOT LIKE '0x%' AND f.func NOT LIKE '[%' AND f.func NOT GLOB 'cuda[A-Z]*' AND f.func NOT GLOB"
           " 'cu[A-Z]*' AND f.func NOT GLOB '__cuda*' AND f.func NOT GLOB 'nccl[A-Z]*' AND f.func NOT"
           " LIKE 'cudart::%' AND f.func NOT LIKE 'std::%' AND coalesce(f.module, '') NOT GLOB 'lib*.so*' AND coalesce(f.module, '') NOT GLOB '*/lib*.so*'"
           " AND coalesce(f.module, '') NOT GLOB '*-packages/*' ORDER BY"
           " f.depth LIMIT 1",
       [&](store::Statement& s) { f = UserFrame{s.col_text(0), s.col_text(1), 0}; });
  if (f) {
    // "step(int)" as written in C++: the frame prints as func() at file.
    if (auto paren = f->func.find('('); paren != std::string::npos) f->func.resize(paren);
  }
  return f;
}

std::optional<UserFrame> RuleContext::frame_of(int64_t stack_id) const {
  if (stack_id < 0) return std::nullopt;
  auto [it, fresh] = frames_.try_emplace(stack_id);
  if (fresh) it->second = top_frame("SELECT " + std::to_string(stack_id) + " AS stack_id");
  return it->second;
}

std::vector<RuleContext::SampledLine> RuleContext::sampled_lines(int64_t session, uint32_t tid, int64_t from,
                                                                 int64_t to, bool outside_calls) const {
  std::map<std::string, SampledLine> by_line;
  // A row counts the samples of the second that starts at ts_ns' second.
  constexpr int64_t kSecond = 1'000'000'000;
  each("SELECT ts_ns, coalesce(stack_id, -1), samples FROM cpu_samples WHERE session_id = " +
           std::to_string(session) + " AND tid = " + std::to_string(tid) + " AND ts_ns >= " +
           std::to_string(from - kSecond) + " AND ts_ns < " + std::to_string(to) +
           (outside_calls ? " AND in_call = 0" : ""),
       [&](store::Statement& s) {
         const int64_t sec = s.col_int(0) / kSecond * kSecond;
         const int64_t lo = std::max(from, sec), hi = std::min(to, sec + kSecond);
         if (hi <= lo) return;
         auto f = frame_of(s.col_int(1));
         if (!f) return;
         auto& l = by_line[f->text()];
         l.frame = *f;
         l.samples += double(s.col_int(2)) * double(hi - lo) / double(kSecond);
       });
  std::vector<SampledLine> out;
  for (auto& [k, l] : by_line) out.push_back(std::move(l));
  std::sort(out.begin(), out.end(), [](const SampledLine& a, const SampledLine& b) { return a.samples > b.samples; });
  return out;
}

std::vector<SlowGroup> slow_groups(const RuleContext& ctx) {
  std::vector<SlowGroup> out;
  ctx.each("SELECT pid, count(*), sum(dur_ns - p50) FROM slow GROUP BY pid ORDER BY 3 DESC",
           [&](store::Statement& s) {
             out.push_back({uint32_t(s.col_int(0)), s.col_int(1), s.col_int(2), 0});
           });
  for (auto& g : out)
    g.top_op = ctx.scalar("SELECT op_id FROM slow WHERE pid = " + std::to_string(g.pid) +
                          " GROUP BY op_id ORDER BY sum(dur_ns - p50) DESC LIMIT 1");
  return out;
}

std::string own_workers_sql(uint32_t pid, int64_t session) {
  const std::string p = std::to_string(pid);
  const std::string in = session < 0 ? "" : " AND session_id = " + std::to_string(session);
  return "SELECT pid FROM processes WHERE ppid = " + p + in + " AND pid IN (SELECT waker_pid FROM offcpu_events"
         " WHERE pid = " + p + in + " GROUP BY waker_pid HAVING count(*) > 1)";
}

Severity attributed_severity(double explained, double excess_share) {
  if (explained >= 0.5 && excess_share >= 0.02) return Severity::High;
  if (excess_share >= 0.005) return Severity::Medium;
  return Severity::Low;
}

}  // namespace causeway::analyze
