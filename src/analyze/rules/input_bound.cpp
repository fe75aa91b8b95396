// SPDX-License-Identifier: Apache-2.0
// input_bound: between steps the dispatcher thread sleeps, outside any CUDA
// call, until another process hands it its input (DataLoader workers, a
// pipe or socket), or a thread of its own that itself waited for one (a
// pin-memory thread); the GPU waits with it. A wait for a sibling thread
// that was doing something else is not input (lock_contention says what).
#include "dispatch.h"

#include <algorithm>

#include "causeway/common/time.h"

namespace causeway::analyze {

namespace {
constexpr double kMinShare = 0.25;     // waiting for input this share of the step
constexpr double kHighShare = 0.50;
constexpr double kMaxSyncBusy = 0.30;
}

std::vector<CausalChain> rule_input_bound(const RuleContext& ctx) {
  std::vector<CausalChain> out;
  for (const auto& a : ctx.accounts) {
    if (!judgeable(a) || !a.host_context) continue;  // time outside calls is unknown without host context
    const double input = a.share(&TimeSplit::input);
    if (input < kMinShare || a.share(&TimeSplit::sync_busy) >= kMaxSyncBusy) continue;
    CausalChain c;
    c.severity = input >= kHighShare ? Severity::High : Severity::Medium;
    c.impact_ns = a.time.input;
    c.share = input;
    c.threshold = kMinShare;
    c.symptom = thread_symptom(ctx, a, -1);
    c.evidence.push_back({pct(input) + " of " + period_words(a) +
                              " is asleep outside CUDA calls until its input arrives (the GPU has nothing queued)",
                          {{"input_share", input}, {"input_ns", a.time.input}}});
    // Who hands it over, grouped by name and kind (eight workers are one line).
    struct Group {
      std::string name, kind;
      std::vector<uint32_t> ids;
      int64_t ns = 0, times = 0;
    };
    std::vector<Group> groups;
    nlohmann::json wakers = nlohmann::json::array();
    auto add = [&](const OtherTask& w, const std::string& kind) {
      const std::string name = w.name.empty() ? "?" : w.name;
      auto g = std::find_if(groups.begin(), groups.end(), [&](const Group& x) { return x.name == name && x.kind == kind; });
      if (g == groups.end()) g = groups.insert(groups.end(), Group{name, kind, {}, 0, 0});
      g->ids.push_back(w.same_process ? w.tid : w.pid);
      g->ns += w.ns;
      g->times += w.times;
      wakers.push_back({{"pid", w.pid}, {"tid", w.tid}, {"name", w.name}, {"same_process", w.same_process},
                        {"child", w.child}, {"ns", w.ns}, {"wakeups", w.times}, {"kind", kind}});
    };
    for (const OtherTask& w : a.wakers)
      if (!w.same_process) add(w, w.child ? "worker process" : "process");
    for (const OtherTask& w : a.input_via) add(w, "thread fed by them");
    std::sort(groups.begin(), groups.end(), [](const Group& x, const Group& y) { return x.ns > y.ns; });
    std::string who;
    for (size_t i = 0; i < groups.size() && i < 3; i++) {
      Group& g = groups[i];
      std::sort(g.ids.begin(), g.ids.end());
      const std::string plural = g.kind == "thread fed by them" ? "threads fed by them" : g.kind + "es";
      const std::string ids = g.ids.size() == 1 ? std::to_string(g.ids[0])
                                                : std::to_string(g.ids.front()) + "-" + std::to_string(g.ids.back());
      who += (who.empty() ? "" : "; ") + (g.ids.size() > 1 ? std::to_string(g.ids.size()) + " " + plural + " " : g.kind + " ") +
             g.name + " (" + ids + "): " + std::to_string(g.times) + " wakeups, " + ms(g.ns);
    }
    if (!who.empty()) c.evidence.push_back({"woken by " + who, {{"wakers", wakers}}});
    std::string starved;
    // The workers: how many, and whether they wait for a CPU.
    const std::string s = std::to_string(a.session_id);
    int64_t workers = 0, worker_runnable = 0, worker_span = 0;
    ctx.each("SELECT count(DISTINCT p.pid), coalesce(sum(CASE WHEN o.state = 0 THEN o.dur_ns END), 0),"
             " coalesce(max(o.ts_ns + o.dur_ns) - min(o.ts_ns), 0) FROM processes p JOIN offcpu_events o"
             " ON o.pid = p.pid AND o.session_id = p.session_id AND " + ctx.in_window("o.") +
                 " WHERE p.session_id = " + s + " AND p.ppid = " + std::to_string(a.pid),
             [&](store::Statement& st) {
               workers = st.col_int(0);
               worker_runnable = st.col_int(1);
               worker_span = st.col_int(2);
             });
    const int64_t cpus = ctx.scalar("SELECT coalesce(cpus, 0) FROM sessions WHERE id = " + s);
    if (workers > 0) {
      const double per_worker = worker_span ? double(worker_runnable) / double(workers) / double(worker_span) : 0;
      c.evidence.push_back({std::to_string(workers) + " child processes (loader workers)" +
                                (cpus ? " on " + std::to_string(cpus) + " CPUs" : "") + "; they waited for a CPU " +
                                pct(per_worker) + " of the time each",
                            {{"workers", workers}, {"cpus", cpus}, {"worker_runnable_share", per_worker}}});
      if (per_worker >= 0.2) starved = " The workers themselves wait for CPUs: fewer workers than CPUs, or cheaper transforms.";
    }
    add_gpu_evidence(c, a);
    // The line that consumes the input: the thread's first call after each
    // wait its input ended (a process woke it, or a thread fed by one), not
    // every call near it (a step's read-back outnumbers its one copy in).
    std::string fed_by = "0";
    for (const OtherTask& w : a.input_via) fed_by += "," + std::to_string(w.tid);
    attach_frame(ctx, c,
                 first_call_after_sql(ctx.in_window("o.") + thread_rows(a) +
                                      " AND o.state = 1 AND o.dur_ns >= 1000000 AND (coalesce(o.waker_pid, 0) NOT IN (0, " +
                                      std::to_string(a.pid) + ") OR o.waker_tid IN (" + fed_by + "))"),
                 "the calls after the waits carried no Python stack");
    c.recommendation =
        "Feed the GPU faster than it eats: give the DataLoader enough workers (and no more than the "
        "CPUs left for them), pin_memory=True with non_blocking copies, prefetch_factor >= 2 and "
        "persistent_workers=True; move decoding and augmentation off the critical path (GPU "
        "transforms, pre-processed or cached data, faster storage)." + starved;
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace causeway::analyze
