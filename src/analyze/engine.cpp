// SPDX-License-Identifier: Apache-2.0
#include "causeway/analyze/engine.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <set>
#include <optional>
#include <tuple>
#include <vector>

#include "causeway/common/error.h"
#include "causeway/common/op_table.h"
#include "causeway/common/time.h"
#include "causeway/events.h"
#include "causeway/model/block_io.h"
#include "causeway/model/reclaims.h"
#include "causeway/model/tcp_retransmits.h"
#include "causeway/store/explain_tables.h"
#include "causeway/store/migrations.h"
#include "causeway/store/read_only_trace.h"
#include "causeway/store/sqlite.h"
#include "causeway/store/trace_info.h"
#include "rule_context.h"

namespace causeway::analyze {

std::string_view severity_name(Severity s) {
  switch (s) {
    case Severity::High: return "HIGH";
    case Severity::Critical: return "CRITICAL";
    case Severity::Medium: return "MEDIUM";
    case Severity::Low: return "LOW";
  }
  return "LOW";
}

std::string UserFrame::where() const { return file + (line ? ":" + std::to_string(line) : ""); }

std::string UserFrame::text() const { return func + "() at " + where(); }

bool UserFrame::library() const {
  return file.find("-packages/") != std::string::npos || file.find("/lib/python") != std::string::npos ||
         file.rfind("<", 0) == 0 || file.find("/torchinductor_") != std::string::npos;
}

namespace {

// The whole file when no bound is given: first to last event of any kind.
Window resolve_window(store::Connection& db, const ExplainOptions& o) {
  Window w;
  w.pid = o.pid;
  // The traced processes' activity (the model says which tables hold it).
  const auto bounds = store::activity_bounds(db).value_or(std::pair<int64_t, int64_t>{0, 0});
  const int64_t lo = bounds.first, hi = bounds.second;
  w.from_ns = o.from_ns.value_or(lo);
  w.to_ns = o.to_ns.value_or(hi + 1);
  if (w.to_ns < w.from_ns)
    throw UsageError("the window ends before it starts (--from is after --to)");
  return w;
}

void build_temp_tables(RuleContext& ctx) {
  auto& db = ctx.db;
  const store::Window w = ctx.store_window();
  // Launches aggregated in the kernel (--launch-sampling) take their
  // baselines from the log2 histograms, since their recorded rows are a
  // biased sample (every slow one, one in N); recorded calls from the pass
  // below.
  store::create_launch_baselines(db, w);
  // One pass over the recorded calls builds what the rules would otherwise
  // each scan for: exact nearest-rank percentiles (a sort in SQL window
  // functions took 5 s per million rows), each key's first call, process
  // spans and launches per 100 ms.
  using Key = store::CallKey;
  const std::set<Key> aggregated = store::baseline_keys(db);
  struct First { int64_t ts, dur; std::optional<int64_t> stack; };
  std::map<Key, std::vector<int64_t>> durations;
  std::map<Key, First> firsts;
  std::map<std::pair<int64_t, uint32_t>, int64_t> slots;
  std::vector<bool> gpu_work(CW_MAX_OPS);
  for (const auto& op : all_ops())
    gpu_work[op.id] = op.cls == OpClass::Launch || op.cls == OpClass::Graph || op.cls == OpClass::Copy ||
                      op.cls == OpClass::Sync;
  const uint32_t agg_flag = CW_CALL_AGGREGATED;
  // A framework's tensor allocations are another level: memory.cpp reads
  // them, not baselines (each_baseline_call leaves them out).
  store::each_baseline_call(db, w, [&](const store::BaselineCall& c) {
    const Key& k = c.key;
    const int64_t dur = c.dur_ns, ts = c.ts_ns;
    if (!(c.flags & agg_flag) && !aggregated.count(k)) durations[k].push_back(dur);
    if (!c.cuda) return;  // NCCL: baselines only
    const uint32_t pid = uint32_t(std::get<0>(k));
    auto [f, fresh] = firsts.try_emplace(k, First{ts, dur, {}});
    if (fresh || ts < f->second.ts) {
      f->second = {ts, dur, {}};
      if (c.stack_id) f->second.stack = *c.stack_id;
    }
    auto [sp, new_pid] = ctx.spans.try_emplace(pid, ts, ts + dur);
    if (!new_pid) {
      sp->second.first = std::min(sp->second.first, ts);
      sp->second.second = std::max(sp->second.second, ts + dur);
    }
    const int64_t op = std::get<1>(k);
    if (op >= 0 && op < CW_MAX_OPS && gpu_work[size_t(op)]) slots[{ts / 100'000'000, pid}]++;
  });
  std::vector<store::FirstCall> first_rows;
  for (const auto& [k, f] : firsts) first_rows.push_back({k, f.ts, f.dur, f.stack});
  std::vector<store::GpuSlot> slot_rows;
  for (const auto& [k, n] : slots) slot_rows.push_back({k.first, int64_t(k.second), n});
  std::vector<store::BaselineRow> baselines;
  for (auto& [k, d] : durations) {
    const int64_t n = int64_t(d.size());
    auto rank = [&](int p) {  // nearest rank, 1-based, as the SQL it replaces
      const int64_t r = std::max<int64_t>(1, (n * p + 99) / 100);
      std::nth_element(d.begin(), d.begin() + (r - 1), d.end());
      return d[size_t(r - 1)];
    };
    const int64_t p99 = rank(99), p95 = rank(95), p50 = rank(50);
    int64_t total = 0;
    for (int64_t v : d) total += v;
    baselines.push_back({k, n, p50, p95, p99, *std::max_element(d.begin(), d.end()), total});
  }
  store::write_call_tables(db, first_rows, slot_rows, baselines);
  store::create_slow_table(db, w, kSlowFactor, kSlowMinExcessNs, kBaselineMinCalls);
}

DataSummary summarize(const RuleContext& ctx) {
  DataSummary d;
  auto& db = ctx.db;
  const store::Window w = ctx.store_window();
  // From the baselines: a launch aggregated in the kernel is counted once
  // (launch_stats), whether or not it was also recorded.
  for (const auto& [op_id, calls] : store::baseline_calls_by_op(db)) {
    const OpSpec* op = find_op(uint16_t(op_id));
    (op && op->layer == Layer::Nccl ? d.nccl_calls : d.calls) += calls;
  }
  d.offcpu_intervals = store::rows_in_window<model::OffCpu>(db, w);
  d.io_requests = store::rows_in_window<model::BlockIo>(db, w);
  d.tcp_retransmits = store::rows_in_window<model::TcpRetransmits>(db, w);
  d.reclaims = store::rows_in_window<model::Reclaims>(db, w);
  d.processes = store::baseline_processes(db);
  d.slow_calls = store::slow_call_count(db);
  for (const auto& [pid, op, kernel] : store::slowest_groups(db, 10))
    d.slowest.push_back(ctx.symptom(uint32_t(pid), op, kernel >= 0 ? std::optional(kernel) : std::nullopt));
  // Drops are counted over the whole file: a drop anywhere makes every
  // count a lower bound, and drop records carry no pid.
  // Shed rows are planned (overload: rows of fast calls whose calls stay
  // counted), not lost: reported apart, as are the tensor allocations that
  // returned before their call site was probed (what memory misses).
  for (const auto& [source, n] : store::drops_by_source(db)) {
    if (source == "shed") d.shed += n;
    // the first tensor through each call site: memory's own caveat
    else if (source == "retsite") d.unprobed_returns += n;
    else d.drops_by_source[source] += n;
  }
  int64_t op_dropped = store::op_counts_dropped(db);
  if (op_dropped > 0 && !d.drops_by_source.count("libcall"))
    d.drops_by_source["op_counts"] = op_dropped;
  for (const auto& [src, n] : d.drops_by_source) d.drops += n;
  return d;
}

// Cause over symptom: when one chain's evidence is a consequence of another's
// cause on the same process (or thread), the symptom's chain folds into the
// cause's as one line of evidence instead of ranking beside it.
struct Fold {
  const char* cause;
  const char* symptom;
  bool same_thread;
  const char* because;
  // When set: only a symptom chain whose evidence has this flag true.
  const char* when = nullptr;
  // The cause takes the symptom's severity when that is higher (the same
  // time, measured from the symptom's side).
  bool raises = false;
};
constexpr Fold kFolds[] = {
    {"call_failures", "gpu_fault", false, "the GPU reported the fault the failing calls show"},
    {"graph_recapture", "allocator_churn", false, "captures allocate their graph's memory pool"},
    {"sync_bound", "memcpy_bound", false, "the copies are the synchronisations' reads back"},
    {"io_stall", "memcpy_bound", false, "the copies wait on disk reads"},
    // The straggler's chain names the late rank's own cause and line (its
    // critical path): the same time seen from that rank alone.
    {"straggler_rank", "host_bound", false, "what the late rank does while the others wait", nullptr, true},
    {"straggler_rank", "input_bound", false, "what the late rank does while the others wait", nullptr, true},
    {"straggler_rank", "timer_sleep", false, "what the late rank does while the others wait", nullptr, true},
    {"straggler_rank", "io_stall", false, "what the late rank does while the others wait", nullptr, true},
    {"straggler_rank", "cpu_contention", false, "what the late rank does while the others wait", nullptr, true},
    {"straggler_rank", "cpu_throttled", false, "what the late rank does while the others wait", nullptr, true},
    {"straggler_rank", "launch_bound", false, "what the late rank does while the others wait", nullptr, true},
    {"straggler_rank", "lock_contention", false, "what the late rank does while the others wait", nullptr, true},
    {"straggler_rank", "gil_contention", false, "what the late rank does while the others wait", nullptr, true},
    {"straggler_rank", "gpu_bound", false, "the late rank's own GPU time", nullptr, false},
};

bool flagged(const CausalChain& c, const char* key) {
  for (const auto& e : c.evidence)
    if (e.data.is_object() && e.data.value(key, false)) return true;
  return false;
}

// How specific a cause is, for ranking chains whose evidence is close: a
// failure over memory over a named contention, wait or call pattern over a
// generic account of host or launch time (docs/explain.md).
int specificity(const std::string& root_cause) {
  static const std::map<std::string, int> tiers = {
      {"call_failures", 4}, {"gpu_fault", 4}, {"out_of_memory", 4}, {"hung_collective", 4}, {"hung_call", 4},
      {"gpu_health", 4},    {"memory_leak", 3}, {"host_bound", 1},  {"launch_bound", 1},  {"data_loss", 0},
      {"gpu_bound", 0},
  };
  auto it = tiers.find(root_cause);
  return it == tiers.end() ? 2 : it->second;
}
// Calls that failed because the runtime was unloading at exit are harmless:
// never promoted over a chain about the process's work.
int specificity(const CausalChain& c) {
  // A GPU holding its rated power (a software cap at the default limit) is a
  // verdict on the GPU, like gpu_bound: never above a cause in the program.
  if (c.root_cause == "gpu_throttled" && flagged(c, "at_rated_power")) return 0;
  if (c.root_cause == "call_failures")
    for (const auto& e : c.evidence)
      if (e.data.is_object() && e.data.value("kind", "") == "shutdown") return 0;
  return specificity(c.root_cause);
}

// After the sort by severity and impact: where a more specific cause on the
// same process follows a less specific one within one severity level (the
// margin run-to-run noise moves a share across), the specific one goes
// first and says the other was close. CRITICAL chains keep their order.
void rank_specific_first(std::vector<CausalChain>& chains) {
  for (bool moved = true; moved;) {
    moved = false;
    for (size_t i = 0; i + 1 < chains.size(); i++) {
      CausalChain &a = chains[i], &b = chains[i + 1];
      if (a.severity == Severity::Critical || b.severity == Severity::Critical) continue;
      if (a.symptom.pid != b.symptom.pid || !a.symptom.pid) continue;
      if (specificity(b) <= specificity(a)) continue;
      if (int(b.severity) < int(a.severity) - 1) continue;
      // A LOW chain says it is minor: it never goes above one that is not
      // (a slow first launch above the loop's MEDIUM host time).
      if (b.severity == Severity::Low && a.severity != Severity::Low) continue;
      if (b.close_to.empty()) b.close_to = a.root_cause;
      std::swap(a, b);
      moved = true;
    }
  }
}

// A process in which nothing worked has no performance to speak of: its
// other chains are artefacts of calls that never ran.
void fold_into_failures(std::vector<CausalChain>& chains) {
  auto nothing_worked = [](const CausalChain& c) {
    return c.root_cause == "call_failures" && !c.evidence.empty() &&
           c.evidence.front().data.value("nothing_worked", false);
  };
  std::set<uint32_t> dead;
  for (const auto& c : chains)
    if (nothing_worked(c)) dead.insert(c.symptom.pid);
  if (dead.empty()) return;
  std::vector<CausalChain> kept, folded;
  for (auto& c : chains) {
    const bool artefact = dead.count(c.symptom.pid) && c.root_cause != "call_failures" && c.root_cause != "data_loss";
    (artefact ? folded : kept).push_back(std::move(c));
  }
  for (const auto& f : folded)
    for (auto& c : kept)
      if (nothing_worked(c) && c.symptom.pid == f.symptom.pid) {
        c.evidence.push_back({"also shows as " + f.root_cause + " (calls that never ran: not a diagnosis)",
                              {{"folded", f.root_cause}, {"folded_impact_ns", f.impact_ns}}});
        break;
      }
  chains = std::move(kept);
}

void fold_symptoms(std::vector<CausalChain>& chains) {
  // Folded chains are marked first and removed after: erasing while a cause
  // is held by reference would move it under the reference.
  std::vector<bool> gone(chains.size(), false);
  for (const Fold& f : kFolds) {
    for (size_t c = 0; c < chains.size(); c++) {
      CausalChain& cause = chains[c];
      if (gone[c] || cause.root_cause != f.cause) continue;
      for (size_t i = 0; i < chains.size(); i++) {
        const CausalChain& it = chains[i];
        const bool same = !gone[i] && i != c && it.root_cause == f.symptom && it.symptom.pid == cause.symptom.pid &&
                          (!f.same_thread || !it.symptom.tid || !cause.symptom.tid || it.symptom.tid == cause.symptom.tid) &&
                          (!f.when || flagged(it, f.when));
        if (!same) continue;
        if (f.raises && it.severity > cause.severity) cause.severity = it.severity;
        cause.evidence.push_back({"also shows as " + it.root_cause + " (" + f.because + "): " +
                                      (it.evidence.empty() ? std::string() : it.evidence.front().text),
                                  {{"folded", it.root_cause}, {"folded_impact_ns", it.impact_ns}}});
        gone[i] = true;
      }
    }
  }
  std::vector<CausalChain> kept;
  for (size_t i = 0; i < chains.size(); i++)
    if (!gone[i]) kept.push_back(std::move(chains[i]));
  chains = std::move(kept);
}

// The ranks that wait for a straggler spend their steps in syncs, which
// their own account reads as waiting for their GPU (gpu_bound: "nothing on
// the host to fix"): they wait for the late rank's GPU, which waits for its
// host. Those chains fold into the straggler's.
void fold_waiting_ranks(std::vector<CausalChain>& chains) {
  std::set<uint32_t> waiting;
  CausalChain* straggler = nullptr;
  for (auto& c : chains)
    if (c.root_cause == "straggler_rank" && !c.evidence.empty() && c.evidence.front().data.contains("waiting_pids")) {
      straggler = &c;
      for (const auto& p : c.evidence.front().data["waiting_pids"]) waiting.insert(p.get<uint32_t>());
    }
  if (!straggler || waiting.empty()) return;
  auto folds = [&](const CausalChain& c) { return c.root_cause == "gpu_bound" && waiting.count(c.symptom.pid) > 0; };
  std::string who;
  int64_t folded = 0;
  for (const auto& c : chains)
    if (folds(c)) {
      who += (who.empty() ? "pid " : ", pid ") + std::to_string(c.symptom.pid);
      folded++;
    }
  if (!folded) return;
  straggler->evidence.push_back({"the waiting ranks (" + who + ") read as gpu_bound on their own: their syncs wait "
                                 "for this rank, not for their GPUs",
                                 {{"folded", "gpu_bound"}, {"folded_ranks", folded}}});
  chains.erase(std::remove_if(chains.begin(), chains.end(), folds), chains.end());
}

}  // namespace

Explanation explain(store::Connection& db, const ExplainOptions& opts) {
  Explanation e;
  e.db_path = db.path();
  if (store::check_schema_version(db) == 0) {
    e.window = Window{0, 0, opts.pid};
    return e;  // an empty file: nothing traced yet
  }
  if (!store::activity_bounds(db)) {
    // Nothing traced: no window to state (it would be 1970's first ns).
    e.window = Window{0, 0, opts.pid};
    e.data.empty = true;
    for (const auto& s : store::sessions(db)) e.data.traced_by.push_back(s.command_line);
    return e;
  }
  e.window = resolve_window(db, opts);
  // --verbose shows where the time goes, per phase and per rule.
  int64_t t = monotonic_now_ns();
  auto lap = [&t](std::string_view what) {
    const int64_t now = monotonic_now_ns();
    spdlog::debug("explain: {} {:.1f} ms", what, double(now - t) / 1e6);
    t = now;
  };
  RuleContext ctx(db, e.window);
  build_temp_tables(ctx);
  lap("baselines");
  e.data = summarize(ctx);
  lap("summary");
  ctx.accounts = account_threads(ctx);
  lap("accounts");
  ctx.path_facts.clear();  // keyed by the paths' addresses
  ctx.paths = build_paths(ctx);
  lap("paths");
  ctx.memory = account_memory(ctx);
  lap("memory");
  for (const auto& rule : all_rules()) {
    // One rule that cannot read this file (an old or damaged trace) costs
    // its own chains, not the answer.
    try {
      for (auto& c : rule.run(ctx)) {
        c.root_cause = rule.root_cause;
        e.chains.push_back(std::move(c));
      }
    } catch (const std::exception& ex) {
      spdlog::warn("explain: rule {} failed: {}", rule.root_cause, ex.what());
      e.data.rules_failed.push_back(std::string(rule.root_cause) + ": " + ex.what());
    }
    lap(rule.root_cause);
  }
  fold_into_failures(e.chains);
  fold_symptoms(e.chains);
  fold_waiting_ranks(e.chains);
  std::stable_sort(e.chains.begin(), e.chains.end(), [](const auto& a, const auto& b) {
    if (a.severity != b.severity) return a.severity > b.severity;
    return a.impact_ns > b.impact_ns;
  });
  rank_specific_first(e.chains);
  if (opts.top && e.chains.size() > opts.top) e.chains.resize(opts.top);
  e.accounts = std::move(ctx.accounts);
  e.paths = std::move(ctx.paths);
  e.memory = std::move(ctx.memory);
  return e;
}

std::vector<ProcessMemory> gpu_memory(store::Connection& db, const ExplainOptions& opts, std::optional<int64_t> at_ns) {
  if (store::check_schema_version(db) == 0) return {};
  RuleContext ctx(db, resolve_window(db, opts));
  if (at_ns && (*at_ns < ctx.window.from_ns || *at_ns >= ctx.window.to_ns))
    throw UsageError("the time asked for is outside the trace's window");
  return account_memory(ctx, at_ns);
}

Explanation explain_file(const std::string& path, const ExplainOptions& opts) {
  // A missing file gets explain's hint; the opener checks the rest (a
  // directory, not SQLite, not a trace, a newer schema).
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    // A trace `sudo causeway trace` wrote sits in root's 0700 folder: it is
    // there, and "no trace" would send the user looking for another.
    if (errno == EACCES)
      throw UsageError("permission denied: cannot read " + path +
                       " (a trace written by root): run with sudo, or trace with --db FILE in a folder you can read");
    throw UsageError("no trace at " + path + " (record one with `causeway trace`, or pass --db)");
  }
  return explain(*store::open_trace_read_only(path), opts);
}

}  // namespace causeway::analyze
