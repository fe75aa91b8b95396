// SPDX-License-Identifier: Apache-2.0
#include "dispatch.h"

#include <algorithm>

#include "causeway/common/time.h"

namespace causeway::analyze {

std::string period_words(const ThreadAccount& a) {
  if (a.steps >= 3)
    return format_duration(a.step_ns) + " steps (" + std::to_string(a.steps) + ", marked by " + a.step_marker + ")";
  const std::string after = a.startup_ns() >= 100'000'000 ? " after its " + format_duration(a.startup_ns()) + " start-up" : "";
  if (a.launch_windows)
    return format_duration(a.covered_ns()) + " of activity in launch windows" + after + " (no repeating step found)";
  return format_duration(a.covered_ns()) + " of activity" + after + " (no repeating step found)";
}

void attach_frame(const RuleContext& ctx, CausalChain& c, const std::string& stack_sql, const std::string& why_none) {
  c.frame = ctx.top_frame(stack_sql);
  if (!c.frame) c.no_frame_reason = why_none;
}

Symptom thread_symptom(const RuleContext& ctx, const ThreadAccount& a, int64_t op_id) {
  Symptom s = op_id >= 0 ? ctx.symptom(a.pid, op_id) : Symptom{};
  // The thread's time is the symptom, not calls slower than their median.
  s.slow_calls = 0;
  s.slower_x = 0;
  s.pid = a.pid;
  s.comm = ctx.comm(a.pid);
  s.tid = a.tid;
  s.thread = a.name;
  return s;
}

Evidence split_evidence(const ThreadAccount& a) {
  const TimeSplit& t = a.judged();
  const double total = double(std::max<int64_t>(1, t.total()));
  std::vector<std::pair<double, const SplitPart*>> parts;
  for (const auto& p : split_parts())
    if (t.*p.field > 0) parts.emplace_back(double(t.*p.field) / total, &p);
  std::sort(parts.begin(), parts.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
  std::string text = (a.steps >= 3 ? "each step: " : "its time: ");
  nlohmann::json data = nlohmann::json::object();
  for (size_t i = 0; i < parts.size(); i++) {
    if (i < 5) text += (i ? " · " : "") + std::string(parts[i].second->words) + " " + pct(parts[i].first);
    data[parts[i].second->key] = parts[i].first;
  }
  return {text, {{"shares", data}, {"step_ns", a.steps >= 3 ? a.step_ns : 0}, {"steps", a.steps}}};
}

void add_gpu_evidence(CausalChain& c, const ThreadAccount& a) {
  if (!a.gpu_busy) return;
  c.evidence.push_back({"GPU " + pct(*a.gpu_busy) + " busy over the same time (NVML)", {{"gpu_busy", *a.gpu_busy}}});
}

SampledWords sampled_words(const RuleContext& ctx, const ThreadAccount& a, uint32_t tid, bool outside_calls,
                           size_t shown) {
  SampledWords w;
  const auto lines = ctx.sampled_lines(a.session_id, tid, std::max(a.from_ns, a.startup_end_ns), a.to_ns, outside_calls);
  for (const auto& l : lines) w.total += l.samples;
  if (lines.empty() || w.total <= 0) return w;
  for (size_t i = 0; i < lines.size() && i < shown; i++) {
    w.words += (i ? " · " : "") + lines[i].frame.text() + " " + pct(lines[i].samples / w.total);
    w.lines.push_back({{"where", lines[i].frame.where()}, {"func", lines[i].frame.func},
                       {"samples", lines[i].samples}, {"share", lines[i].samples / w.total}});
  }
  w.top = lines.front().frame;
  return w;
}

bool judgeable(const ThreadAccount& a) { return a.covered_ns() >= 1'000'000'000; }

bool holder_starved(const WaitedFor& w) {
  constexpr double kStarved = 0.25, kStarvedVsRan = 0.5;
  return double(w.runnable_ns) >= kStarved * double(std::max<int64_t>(1, w.ns)) &&
         double(w.runnable_ns) >= kStarvedVsRan * double(w.on_cpu_ns);
}

}  // namespace causeway::analyze
