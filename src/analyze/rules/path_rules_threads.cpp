// SPDX-License-Identifier: Apache-2.0
// The critical path's waits for other threads and processes:
// gil_contention, lock_contention, input_bound (path_rule.h).
#include <algorithm>

#include "causeway/common/time.h"
#include "path_rule.h"

namespace causeway::analyze::path_rules {

namespace {

// The processes (and feeder threads) the path waited in for its input,
// grouped by name: "2 worker processes cw_loader (1201-1202)".
void input_workers(const RuleContext& ctx, const ProcessPath& p, const Taken& t, CausalChain& c) {
  struct Group {
    std::set<uint32_t> ids;
    int64_t ns = 0;
    bool process = false;
  };
  std::map<std::string, Group> groups;
  int64_t behind_ns = 0;         // waiting for a CPU one of its workers held
  std::set<uint32_t> held_by;    // ... those workers
  for (const auto* part : t.parts) {
    if (part->cls == PathClass::Runnable) {
      behind_ns += part->ns;
      held_by.insert(part->by_pid);
      continue;
    }
    const bool process = part->pid != p.pid;
    const std::string name = process ? ctx.comm(part->pid) : part->thread;
    Group& g = groups[name];
    g.ids.insert(process ? part->pid : part->tid);
    g.ns += part->ns;
    g.process = g.process || process;
  }
  std::string words;
  nlohmann::json who = nlohmann::json::array();
  for (const auto& [name, g] : groups) {
    const std::string ids = g.ids.size() == 1 ? std::to_string(*g.ids.begin())
                                              : std::to_string(*g.ids.begin()) + "-" + std::to_string(*g.ids.rbegin());
    const bool one = g.ids.size() == 1;
    words += (words.empty() ? "" : "; ") + std::to_string(g.ids.size()) +
             (g.process ? (one ? " worker process " : " worker processes ") : (one ? " thread " : " threads ")) +
             (name.empty() ? "?" : name) + " (" + ids + "): " + ms(g.ns);
    who.push_back({{"name", name}, {"count", g.ids.size()}, {"ns", g.ns}, {"processes", g.process}});
  }
  if (!words.empty()) c.evidence.push_back({"the path waited in " + words, {{"input_from", who}}});
  if (behind_ns > 0) {
    const View v(ctx, p);
    const auto cpus = store::allowed_cpus(ctx.db, p.session_id, p.pid, p.to_ns);
    c.evidence.push_back(
        {ms(behind_ns) + (p.steps >= 3 ? " (" + format_duration(behind_ns / p.steps) + " a step)" : "") +
             " waiting for a CPU while its own loader workers ran on it (" + std::to_string(held_by.size()) + " of its " +
             std::to_string(v.workers.size()) + " workers ran instead" +
             (cpus ? ", on the " + std::to_string(cpus->cpus) + " CPUs it may use: " + cpus->cpu_list : "") +
             "): more workers than the CPUs left for them",
         {{"behind_workers_ns", behind_ns}, {"workers_holding", held_by.size()}}});
  }
}

}  // namespace

std::span<const PathRule> thread_path_rules() {
  static const PathRule rules[] = {
    {"gil_contention",
     [](const View&, const PathPart& x) {
       return x.via == PathVia::Gil && (x.cls == PathClass::OnCpu || x.cls == PathClass::Checkpoint);
     },
     false, true, "waits for the Python interpreter lock (GIL) held by another thread of its process",
     "Keep the interpreter lock off the training thread's path: do that thread's work in a process "
     "(multiprocessing, a DataLoader worker) instead of a thread, release the GIL in C extensions "
     "(Cython nogil, numpy/torch ops release it), or do it every N steps.",
     nullptr},
    {"lock_contention",
     [](const View& v, const PathPart& x) {
       return x.via == PathVia::Lock && x.tid != v.p.tid && x.cls == PathClass::OnCpu &&
              !(v.oversubscribed && v.oversubscribed->pool.count(x.tid));
     },
     false, true, "waits for another thread of its process doing host work (a lock it holds, a queue it fills)",
     "Do not make the training thread wait for another thread each step: hold shared locks briefly "
     "(copy, then release), hand results over through a queue without blocking (get_nowait, a "
     "double buffer), or move that work to a process.",
     nullptr},
    {"input_bound",
     [](const View& v, const PathPart& x) {
       // Waits for a CPU its own loader workers hold (more of them than the
       // CPUs left for them), the loop's or a worker's, are the input's too.
       return x.cls == PathClass::Input ||
              (x.cls == PathClass::Runnable && x.by_pid && v.workers.count(x.by_pid)) ||
              (x.via == PathVia::Input && x.cls != PathClass::DiskRead && x.cls != PathClass::DiskWrite &&
               x.cls != PathClass::Compile && x.cls != PathClass::Runnable && x.cls != PathClass::Throttled);
     },
     false, false, "waits for its input from other processes (loader workers, a pipe's writer) or for a CPU they hold",
     "Feed the GPU faster than it eats: give the DataLoader enough workers (and no more than the "
     "CPUs left for them), pin_memory=True with non_blocking copies, prefetch_factor >= 2 and "
     "persistent_workers=True; move decoding and augmentation off the critical path (GPU "
     "transforms, pre-processed or cached data, faster storage); the line above is where the workers' time goes.",
     input_workers},
  };
  return rules;
}

}  // namespace causeway::analyze::path_rules
