// SPDX-License-Identifier: Apache-2.0
// The rules on each process's critical path (critical_path.h): tables of
// classifiers, each taking the path's segments of its cause. A chain's
// impact is the critical-path time it takes (one currency for every chain
// on a path), its severity the share of the step that time is, bounded by
// the GPU's idle time where the time is host work (what making it faster
// could save: once the GPU is the bottleneck, faster host work does not
// shorten the step). docs/explain.md, "Rules on the critical path".
// The classifiers are in path_rules_*.cpp, a table a family (path_rule.h);
// this file judges what each takes.
#include <algorithm>
#include <array>
#include <map>
#include <set>

#include "causeway/common/time.h"
#include "path_rule.h"

namespace causeway::analyze::path_rules {

void gpu_idle_note(const RuleContext&, const ProcessPath& p, const Taken&, CausalChain& c) {
  if (p.gpu_busy && *p.gpu_busy < 0.5)
    c.evidence.push_back({"the GPU was busy " + pct(*p.gpu_busy) + " of the time (NVML): it idles while the loop waits",
                          {{"gpu_busy", *p.gpu_busy}}});
}

}  // namespace causeway::analyze::path_rules

namespace causeway::analyze {

namespace {

using namespace path_rules;

constexpr double kMinShare = 0.05;         // of the step, for a chain (LOW)
constexpr double kMediumShare = 0.15;
constexpr double kHighShare = 0.40;
constexpr double kHighGenericShare = 0.50;  // host_bound, launch_bound: a generic account
constexpr double kEpisodeCover = 0.3;       // an episode covers this much of the judged time (3 tenths)

// The innermost user frame that at least half of the taken time (of the
// parts with a stack) runs under; none when no frame holds half.
std::optional<UserFrame> common_frame(const RuleContext& ctx, const Taken& t) {
  struct Seen {
    UserFrame frame;
    int64_t ns = 0;
    double depth = 0;  // summed over the parts it is in, by their time
  };
  std::map<std::string, Seen> by;
  int64_t stacked = 0;
  for (const auto* part : t.parts) {
    if (part->stack_id < 0) continue;
    stacked += part->ns;
    std::set<std::string> here;
    int depth = 0;
    for (const auto& py : store::python_frames(ctx.db, part->stack_id)) {
      UserFrame f{py.func, py.file, py.line};
      if (f.library() || !here.insert(f.text()).second) continue;
      Seen& x = by[f.text()];
      x.frame = f;
      x.ns += part->ns;
      x.depth += double(depth++) * double(part->ns);
    }
  }
  const Seen* best = nullptr;
  for (const auto& [k, x] : by)
    if (2 * x.ns >= stacked && stacked > 0 &&
        (!best || x.depth / double(x.ns) < best->depth / double(best->ns)))
      best = &x;
  if (!best) return std::nullopt;
  return best->frame;
}

std::string thread_words(const ProcessPath& p, const PathPart& part) {
  std::string name = part.thread.empty() ? "thread " + std::to_string(part.tid) : part.thread;
  if (part.tid == p.tid) return name + " (its loop)";
  if (part.pid != p.pid) return name + " (pid " + std::to_string(part.pid) + ")";
  return name + " (" + std::to_string(part.tid) + ")";
}

bool calls_only(std::string_view cause) {
  // Told from the calls alone: the time inside them.
  for (const char* c : {"sync_bound", "memcpy_bound", "allocator_churn", "pinning", "launch_bound", "gpu_bound",
                        "autotuning"})
    if (cause == c) return true;
  return false;
}

Severity severity_of(double saving, bool generic, Severity most) {
  Severity s = saving >= (generic ? kHighGenericShare : kHighShare) ? Severity::High
               : saving >= kMediumShare                            ? Severity::Medium
                                                                   : Severity::Low;
  return std::min(s, most);
}

// What judges host time on the path (on the CPU, dispatching): where the
// path ran past the launch windows, launching there passes for host work.
bool takes_host_time(std::string_view cause) {
  for (const char* c : {"host_bound", "launch_bound", "lock_contention", "gil_contention"})
    if (cause == c) return true;
  return false;
}

// An episode: a cause that takes most of the step in part of the window
// (a neighbour that ran for a minute) is judged on that part, where it is
// three tenths of the window or more.
struct Episode {
  std::array<int64_t, kPathSlices> taken{};  // the cause's time per tenth of the window
  int64_t covered_ns = 0;                    // the tenths it took most of
  int slices = 0;
  double share = 0;                          // of those tenths; 0: no episode
};

Episode episode_of(const ProcessPath& p, const Taken& t) {
  Episode e;
  for (const auto* part : t.parts)
    for (int i = 0; i < kPathSlices; i++) e.taken[size_t(i)] += part->slices[size_t(i)];
  int64_t in_ns = 0;
  for (int i = 0; i < kPathSlices; i++) {
    // A slice the launch windows barely touch says too little to judge.
    const int64_t covered = p.slice_ns[size_t(i)];
    if (double(covered) < 0.5 * double(p.covered_ns()) / kPathSlices ||
        double(e.taken[size_t(i)]) < kHighShare * double(covered))
      continue;
    in_ns += e.taken[size_t(i)], e.covered_ns += covered, e.slices++;
  }
  e.share = e.covered_ns >= int64_t(kEpisodeCover * double(p.covered_ns())) && e.slices < kPathSlices
                ? double(in_ns) / double(e.covered_ns)
                : 0;
  return e;
}

// A cost that recurs where it costs (recurring_line), judged where it ended:
// under 5% of it in the window's last three tenths is a one-time cost that
// is over (torch.compile's first compile, longer than a short trace's loop),
// not one that slows the steps. A recompile each step leaves ~30% there.
void judge_one_time(const std::array<int64_t, kPathSlices>& taken, const Taken& t, CausalChain& c) {
  int64_t late = 0;
  for (int i = kPathSlices - 3; i < kPathSlices; i++) late += taken[size_t(i)];
  if (20 * late >= t.ns) return;
  c.severity = Severity::Low;
  c.evidence.push_back({"it ended before the window's last three tenths (" + pct(double(late) / double(t.ns)) +
                            " of it there): a one-time cost, over (a first compile, a warm-up), not one of the "
                            "steps: LOW",
                        {{"late_share", double(late) / double(t.ns)}, {"one_time", true}}});
}

// The threads the cause ran on, most time first (three at most).
void add_threads_on_path(const ProcessPath& p, const Taken& t, std::map<uint32_t, int64_t>& by_thread,
                         CausalChain& c) {
  std::string where;
  std::vector<std::pair<int64_t, const PathPart*>> threads;
  std::set<uint32_t> seen;
  for (const auto* part : t.parts)
    if (seen.insert(part->tid).second) threads.push_back({by_thread[part->tid], part});
  std::sort(threads.begin(), threads.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
  for (size_t i = 0; i < threads.size() && i < 3; i++)
    where += (i ? ", " : "") + thread_words(p, *threads[i].second) + " " + pct(double(threads[i].first) / double(t.ns));
  c.evidence.push_back({"on the path on " + where, {{"threads", threads.size()}}});
}

// The line: the part with a line that took the most.
// A user's line before a library's (a stack deeper than the frames kept
// loses its user frames: then the library's line is what there is).
void place_line(const RuleContext& ctx, const PathRule& rule, const ProcessPath& p, const Taken& t, CausalChain& c) {
    bool any_class = rule.line_from < 0, any_frame = false;
    auto lined = [&](const PathPart* part) {
      return part->frame && (any_frame || !part->frame->library()) && (any_class || int(part->cls) == rule.line_from);
    };
    if (std::none_of(t.parts.begin(), t.parts.end(), lined)) any_class = true;
    if (std::none_of(t.parts.begin(), t.parts.end(), lined)) any_frame = true;
    if (rule.common_line) c.frame = common_frame(ctx, t);
    std::vector<const PathPart*> candidates = t.parts;
    if (rule.recurring_line) {
      // By line, over all its parts: a line with under 5% of its time in the
      // window's last three tenths is a cost that ended (a second's time is
      // spread over its lines alike, so a warm-up that ended in it leaves a
      // little there; a recompile each step has ~30%): it goes after the
      // lines that go on. Then the most time.
      constexpr int kLate = kPathSlices - 3;
      std::map<std::string, std::pair<int64_t, int64_t>> by_line;  // late ns, ns
      for (const auto* part : t.parts)
        if (lined(part)) {
          auto& x = by_line[part->frame->where()];
          for (int i = kLate; i < kPathSlices; i++) x.first += part->slices[size_t(i)];
          x.second += part->ns;
        }
      auto key = [&](const PathPart* x) {
        if (!lined(x)) return std::pair<int, int64_t>{-1, 0};
        const auto& l = by_line[x->frame->where()];
        return std::pair<int, int64_t>{20 * l.first >= l.second, l.second};
      };
      std::stable_sort(candidates.begin(), candidates.end(),
                       [&](const PathPart* x, const PathPart* y) { return key(x) > key(y); });
    }
    for (const auto* part : candidates)
      if (!c.frame && lined(part)) {
        c.frame = part->frame;
        if (part->tid != p.tid)
          c.frame->func = (part->thread.empty() ? "thread " + std::to_string(part->tid) : part->thread) + ": " + c.frame->func;
        break;
      }
    if (!c.frame)
      c.no_frame_reason = std::string(rule.root_cause) == "cpu_throttled"
                              ? "a CPU limit holds back every line alike"
                              : "no Python stack on this part of the path (no CPU samples there, or a thread without "
                                "Python)";
}

std::vector<CausalChain> run(const RuleContext& ctx, const PathRule& rule) {
  std::vector<CausalChain> out;
  for (const auto& p : ctx.paths) {
    const View view(ctx, p);
    Taken t;
    for (const auto& part : p.parts)
      if (rule.take(view, part)) t.ns += part.ns, t.parts.push_back(&part);
    // A second of the loop at least: less is a start, not a step to judge.
    if (t.parts.empty() || !p.judged_enough() || (!calls_only(rule.root_cause) && !p.host_context) ||
        (p.launches_unseen && takes_host_time(rule.root_cause)))
      continue;
    const double share = double(t.ns) / double(p.covered_ns());
    if (share < kMinShare) continue;
    const Episode ep = episode_of(p, t);
    const double episode = ep.share;
    const double saving = p.saving(std::max(share, episode), rule.on_host);
    // Launching bounds the step only where it takes more of it than the GPU
    // is busy (NVML, or the path's own waits on a busy GPU): otherwise the
    // host keeps the queue ahead, the GPU sets the step, and it is a note.
    // (The loop's own host code at a line is judged on what removing it
    // saves, as every other cause.)
    const double gpu_share = std::max(p.gpu_busy.value_or(0), p.share(PathClass::GpuBusy));
    const bool gpu_sets_step = rule.bound_only_past_gpu && std::max(share, episode) <= gpu_share;
    CausalChain c;
    // Without a repeating step a generic account is of one stretch of
    // activity, not of a loop: MEDIUM at most.
    c.severity = severity_of(saving, rule.generic,
                             gpu_sets_step                    ? Severity::Low
                             : rule.generic && p.steps < 3 ? Severity::Medium
                                                              : rule.most);
    c.impact_ns = t.ns;
    c.share = share;
    c.threshold = kMinShare;
    // The symptom: the thread that took most of it.
    std::map<uint32_t, int64_t> by_thread;
    for (const auto* part : t.parts) by_thread[part->tid] += part->ns;
    const auto top = std::max_element(by_thread.begin(), by_thread.end(),
                                      [](const auto& x, const auto& y) { return x.second < y.second; });
    const PathPart* first = *std::find_if(t.parts.begin(), t.parts.end(), [&](const PathPart* x) { return x->tid == top->first; });
    c.symptom.pid = p.pid;
    c.symptom.comm = ctx.comm(p.pid);
    c.symptom.tid = first->tid;
    c.symptom.thread = first->thread;
    const std::string period =
        p.steps >= 3 ? "each " + format_duration(p.step_ns) + " step (" + std::to_string(p.steps) + ", marked by " +
                           p.step_marker + "): " + format_duration(int64_t(double(t.ns) / double(p.steps))) + " a step"
                     : format_duration(p.covered_ns()) + " of activity (no repeating step found)";
    c.evidence.push_back({pct(share) + " of " + period + " " + rule.words,
                          {{"path_share", share}, {"path_ns", t.ns}, {"saving", saving},
                           {"per_step_ns", p.steps >= 3 ? t.ns / p.steps : 0}}});
    if (episode > share)
      c.evidence.push_back({"in " + std::to_string(ep.slices) + " of " + std::to_string(kPathSlices) +
                                " tenths of the window (" + format_duration(ep.covered_ns) + ") it took " +
                                pct(episode) + " of the path: an episode",
                            {{"episode_share", episode}, {"episode_ns", ep.covered_ns}, {"episode_slices", ep.slices}}});
    if (saving + 1e-9 < std::max(share, episode))
      c.evidence.push_back({"the GPU was busy " + pct(p.gpu_busy.value_or(0)) + " of the time (NVML): making it faster "
                                "saves at most " + pct(saving) + " of the step",
                            {{"gpu_busy", p.gpu_busy.value_or(0)}}});
    if (rule.recurring_line) judge_one_time(ep.taken, t, c);
    if (gpu_sets_step)
      c.evidence.push_back({"the GPU was busy " + pct(gpu_share) + " of the step, more than this takes: the GPU sets the "
                                "step (the host keeps its queue ahead), so this is LOW",
                            {{"gpu_share", gpu_share}, {"gpu_sets_step", true}}});
    if (by_thread.size() > 1 || first->tid != p.tid) add_threads_on_path(p, t, by_thread, c);
    c.evidence.push_back({"the step's critical path: " + p.text, {{"path", p.text}}});
    place_line(ctx, rule, p, t, c);
    c.recommendation = rule.recommendation;
    if (rule.more) rule.more(ctx, p, t, c);
    out.push_back(std::move(c));
  }
  return out;
}

const PathRule& rule_named(std::string_view name) {
  for (const auto family : {disk_path_rules(), cpu_path_rules(), compile_path_rules(), thread_path_rules(),
                            call_path_rules()})
    for (const auto& r : family)
      if (name == r.root_cause) return r;
  throw std::logic_error("no path rule " + std::string(name));
}

}  // namespace

std::vector<CausalChain> rule_on_path(const RuleContext& ctx, std::string_view root_cause) {
  return run(ctx, rule_named(root_cause));
}

std::vector<CausalChain> weigh_on_path(const RuleContext& ctx, std::string_view root_cause, std::vector<CausalChain> old,
                                       bool path_line) {
  std::vector<CausalChain> on_path = run(ctx, rule_named(root_cause));
  std::set<uint32_t> with_path;
  for (const auto& p : ctx.paths) with_path.insert(p.pid);
  std::vector<CausalChain> out;
  for (auto& c : old) {
    if (!with_path.count(c.symptom.pid)) {
      out.push_back(std::move(c));  // no path to weigh it on (too few calls for an account)
      continue;
    }
    auto it = std::find_if(on_path.begin(), on_path.end(), [&](const CausalChain& x) { return x.symptom.pid == c.symptom.pid; });
    const size_t at = c.evidence.size();  // after the rule's own evidence
    if (it == on_path.end()) {
      // Not on the critical path: what it costs overlaps other work.
      c.severity = Severity::Low;
      c.impact_ns = 0;
      c.evidence.insert(c.evidence.begin() + at, {"under 5% of the loop's critical path: the rest of what it "
                                                  "costs overlaps other work, or is too little to matter",
                                                  {{"path_share", 0.0}}});
    } else {
      c.severity = it->severity;
      c.impact_ns = it->impact_ns;
      c.share = it->share;
      c.threshold = it->threshold;
      // What the path says of it, after the rule's own evidence (its share,
      // the threads it was on, an episode; not the path's line again).
      for (const auto& ev : it->evidence)
        if (!ev.data.contains("path") && !ev.data.contains("ran_instead")) c.evidence.push_back(ev);
      // Where the time on the path was lost, rather than where its calls were slowest.
      if (path_line && it->frame) c.frame = it->frame, c.no_frame_reason.clear();
      if (!c.frame) c.frame = it->frame;
      on_path.erase(it);
    }
    out.push_back(std::move(c));
  }
  for (auto& c : on_path) out.push_back(std::move(c));
  return out;
}

}  // namespace causeway::analyze

