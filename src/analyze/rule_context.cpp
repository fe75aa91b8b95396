// SPDX-License-Identifier: Apache-2.0
#include "rule_context.h"

#include <algorithm>
#include <map>

#include <cstdio>

#include "causeway/common/op_table.h"
#include "causeway/store/explain_tables.h"
#include "causeway/store/lookups.h"
#include "causeway/store/path_rule_reads.h"
#include "timeline.h"

namespace causeway::analyze {

RuleContext::RuleContext(store::Connection& d, const Window& w) : db(d), window(w) {
  for (auto& [id, name] : store::op_names(db)) op_names_[id] = std::move(name);
  max_offcpu_by_state_ = store::longest_offcpu_by_state(db, store_window());
  for (const auto& [state, ns] : max_offcpu_by_state_) max_offcpu_ns_ = std::max(max_offcpu_ns_, ns);
  // Traces before schema 9 have no such table: launches were always probed.
  // Before schema 20 a window's launches were assumed to cost kLaunchTrapNs.
  for (const auto& lw : store::launch_windows(db))
    launch_windows_[lw.session].push_back({lw.from_ns, lw.to_ns, lw.trap_ns.value_or(kLaunchTrapNs)});
  // Traces before schema 15 took no stack when a thread went to sleep.
  offcpu_stacks_ = store::offcpu_has_stacks(db);
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

store::Window RuleContext::store_window() const { return {window.from_ns, window.to_ns, window.pid}; }

std::string RuleContext::op_name(int64_t op_id) const {
  if (auto it = op_names_.find(op_id); it != op_names_.end()) return it->second;
  if (const auto* op = find_op(uint16_t(op_id))) return std::string(op->name);
  return "op#" + std::to_string(op_id);
}

std::string RuleContext::kernel_name(int64_t kernel_id) const {
  if (kernel_id < 0) return {};
  return store::kernel_name(db, kernel_id);
}

std::string RuleContext::comm(uint32_t pid) const {
  return store::process_comm(db, pid);
}

int64_t RuleContext::process_span_ns(uint32_t pid) const {
  if (auto it = spans.find(pid); it != spans.end() && it->second.second > it->second.first)
    return it->second.second - it->second.first;
  const auto calls = store::cuda_call_span(db, store_window(), pid);
  const int64_t span = calls ? calls->second - calls->first : 0;
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
  std::string name = store::thread_comm(db, session, pid, tid, at);
  return name.empty() ? store::process_comm(db, session, pid) : name;
}

const CrossRankReport& RuleContext::cross_rank() const {
  if (!cross_rank_) cross_rank_ = analyze_cross_rank(db);
  return *cross_rank_;
}

bool RuleContext::attached(uint32_t pid) const {
  auto [it, fresh] = attached_.try_emplace(pid, false);
  if (fresh) it->second = store::started_before_trace(db, pid);
  return it->second;
}

namespace {

// NVML's readings over [from, to], each weighed by how much of its period
// (since the one before on its GPU, at most kLongestPeriodNs) lies inside.
// Where some lie whole inside, only they count: a period that straddles an
// edge holds time outside (the idle start-up before a loop, the idle GPU
// after it), and a 3-s loop read with its two edge seconds was 66% busy by
// the plain mean of its process samples, 89% by those inside.
constexpr int64_t kLongestPeriodNs = 1'500'000'000;
constexpr double kWholeInside = 0.9;

std::optional<double> busy_over(const std::vector<store::UtilReading>& rs, int64_t from, int64_t to) {
  struct Weighed {
    double util, inside, period;
  };
  std::vector<Weighed> ws;
  for (size_t i = 0; i < rs.size(); i++) {
    const bool first = i == 0 || rs[i - 1].gpu != rs[i].gpu;
    const int64_t period = std::clamp<int64_t>(first ? kLongestPeriodNs : rs[i].ts_ns - rs[i - 1].ts_ns, 1, kLongestPeriodNs);
    const int64_t lo = std::max(from, rs[i].ts_ns - period), hi = std::min(to, rs[i].ts_ns);
    if (hi > lo) ws.push_back({rs[i].util, double(hi - lo), double(period)});
  }
  const bool whole = std::any_of(ws.begin(), ws.end(), [](const Weighed& w) { return w.inside >= kWholeInside * w.period; });
  double sum = 0, weight = 0;
  for (const auto& w : ws)
    if (!whole || w.inside >= kWholeInside * w.period) sum += w.util * w.inside, weight += w.inside;
  if (weight <= 0) return std::nullopt;
  return sum / weight / 100.0;
}

}  // namespace

std::optional<double> RuleContext::gpu_busy(int64_t session, uint32_t pid, int64_t from, int64_t to) const {
  // Its own SM share, else the busy share of its GPUs (of every GPU sampled
  // when it was seen on none).
  if (auto own = busy_over(store::process_sm_readings(db, session, pid, from, to), from, to)) return own;
  return busy_over(store::gpus_util_readings(db, session, pid, from, to), from, to);
}

int64_t RuleContext::longest_of(const std::string& table) const {
  return store::longest_interval_ns(db, table, store_window());
}

Symptom RuleContext::symptom(uint32_t pid, int64_t op_id, std::optional<int64_t> kernel_id) const {
  Symptom sy;
  sy.pid = pid;
  sy.comm = comm(pid);
  sy.op = op_name(op_id);
  if (kernel_id) sy.kernel = kernel_name(*kernel_id);
  // Over kernels: counts add up; percentiles come from the busiest kernel.
  const auto b = store::baseline_of(db, pid, op_id, kernel_id);
  sy.calls = b.calls;
  sy.p50_ns = b.p50;
  sy.p99_ns = b.p99;
  sy.max_ns = b.max_ns;
  sy.wall_share = window.span_ns() ? double(b.total_ns) / window.span_ns() : 0;
  const auto slow = store::slow_of(db, pid, op_id, kernel_id);
  sy.slow_calls = slow.calls;
  if (sy.slow_calls == 0) return sy;
  sy.wall_share = window.span_ns() ? double(slow.total_ns) / window.span_ns() : 0;
  sy.slower_x = slow.mean_ratio;
  sy.first_ts_ns = slow.first_ts_ns;
  sy.last_ts_ns = slow.last_ts_ns;
  return sy;
}

std::optional<UserFrame> RuleContext::top_frame(const std::string& stack_ids_sql) const {
  // A user's Python line, else a library's; a program with no Python (a C++
  // or CUDA binary, its runtime linked in): the innermost native frame of its
  // own code, in its module.
  if (auto py = store::top_python_frame(db, stack_ids_sql)) return UserFrame{py->func, py->file, py->line};
  auto native = store::top_native_frame(db, stack_ids_sql);
  if (!native) return std::nullopt;
  UserFrame f{native->func, native->file, 0};
  // "step(int)" as written in C++: the frame prints as func() at file.
  if (auto paren = f.func.find('('); paren != std::string::npos) f.func.resize(paren);
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
  store::each_cpu_sample(db, session, tid, from - kSecond, to, outside_calls, [&](const store::CpuSampleRow& r) {
    const int64_t sec = r.ts_ns / kSecond * kSecond;
    const int64_t lo = std::max(from, sec), hi = std::min(to, sec + kSecond);
    if (hi <= lo) return;
    auto f = frame_of(r.stack_id);
    if (!f) return;
    auto& l = by_line[f->text()];
    l.frame = *f;
    l.samples += double(r.samples) * double(hi - lo) / double(kSecond);
  });
  std::vector<SampledLine> out;
  for (auto& [k, l] : by_line) out.push_back(std::move(l));
  std::sort(out.begin(), out.end(), [](const SampledLine& a, const SampledLine& b) { return a.samples > b.samples; });
  return out;
}

std::vector<SlowGroup> slow_groups(const RuleContext& ctx) {
  std::vector<SlowGroup> out;
  for (const auto& s : store::slow_by_process(ctx.db)) out.push_back({s.pid, s.calls, s.excess_ns, 0});
  for (auto& g : out) g.top_op = store::slowest_op(ctx.db, g.pid);
  return out;
}

Severity attributed_severity(double explained, double excess_share) {
  if (explained >= 0.5 && excess_share >= 0.02) return Severity::High;
  if (excess_share >= 0.005) return Severity::Medium;
  return Severity::Low;
}

}  // namespace causeway::analyze
