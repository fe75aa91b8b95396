// SPDX-License-Identifier: Apache-2.0
// gpu_health: the GPU itself is failing (XID errors, uncorrectable ECC,
// pending row remaps) — CRITICAL, tied to the calls that failed after it.
// gpu_throttled: the GPU ran below its clocks (thermal, power, hardware
// slowdown) while the work on it got slower — NVML samples beside the calls.
#include "../rule_context.h"

#include <algorithm>
#include <map>

#include "causeway/common/time.h"
#include "causeway/store/gpu_reads.h"

namespace causeway::analyze {

namespace {

struct Xid {
  int code;
  const char* meaning;
  bool hardware;  // the device or its link, not the application
};
// NVIDIA's XID catalogue (docs.nvidia.com/deploy/xid-errors), the ones seen in training fleets.
constexpr Xid kXids[] = {
    {13, "graphics engine exception (often an out-of-bounds access in a kernel)", false},
    {31, "GPU memory page fault (an illegal address in a kernel)", false},
    {43, "GPU stopped processing (a kernel faulted or was killed)", false},
    {45, "preemptive cleanup after a previous fault", false},
    {48, "double-bit ECC error", true},
    {61, "internal micro-controller breakpoint/warning", true},
    {62, "internal micro-controller halt", true},
    {63, "ECC page retirement or row remapping recorded", true},
    {64, "ECC page retirement or row remapping failed", true},
    {74, "NVLink error", true},
    {79, "GPU has fallen off the bus", true},
    {92, "high single-bit ECC error rate", true},
    {94, "contained ECC error", true},
    {95, "uncontained ECC error", true},
    {119, "GSP RPC timeout", true},
    {120, "GSP error", true},
    {140, "unrecovered ECC error", true},
};

const Xid* find_xid(int64_t code) {
  for (const auto& x : kXids)
    if (x.code == code) return &x;
  return nullptr;
}

// nvmlClocksEventReasons bits that slow the GPU down (not idle, not an
// application clock setting).
struct Reason {
  int64_t bit;
  const char* words;
};
constexpr Reason kReasons[] = {
    {0x4, "software power cap"},        {0x8, "hardware slowdown"},          {0x20, "software thermal slowdown"},
    {0x40, "hardware thermal slowdown"}, {0x80, "hardware power brake"},
};
constexpr int64_t kSlowdownBits = 0x4 | 0x8 | 0x20 | 0x40 | 0x80;
constexpr int kMinThrottledSamples = 3;
constexpr double kMinSlowdown = 1.2;   // work this much slower while throttled
constexpr double kHighSlowdown = 1.3;

std::string reasons_words(int64_t bits) {
  std::string s;
  for (const auto& r : kReasons)
    if (bits & r.bit) s += (s.empty() ? "" : ", ") + std::string(r.words);
  return s;
}

// NVML's and the kernel log's report of one fault land within this of each other.
constexpr int64_t kSameFaultNs = 3'000'000'000;

// Application XIDs the kernel log tied to a process, one per (session, pid),
// the first of each.
struct ProcessFault {
  int64_t session, ts, code;
  int gpu;
  uint32_t pid;
  std::string process, pci, detail;
  int64_t lines = 0;
};

std::vector<ProcessFault> process_faults(const RuleContext& ctx) {
  std::map<std::pair<int64_t, uint32_t>, ProcessFault> by_pid;
  // Traced processes only: another tenant's fault is the GPU's story (gpu_health).
  store::each_process_xid(ctx.db, ctx.window.from_ns, ctx.window.to_ns, [&](const store::ProcessXid& e) {
    const Xid* x = find_xid(e.code);
    if (x && x->hardware) return;
    auto [it, fresh] = by_pid.try_emplace({e.session, uint32_t(e.pid)});
    ProcessFault& f = it->second;
    f.lines++;
    if (!fresh) return;
    f = {e.session, e.ts_ns, e.code, int(e.gpu), uint32_t(e.pid), e.process, e.pci, e.detail, 1};
  });
  std::vector<ProcessFault> out;
  for (auto& [k, f] : by_pid) out.push_back(std::move(f));
  return out;
}

}  // namespace

// gpu_fault: the GPU faulted in a process's kernel, and the kernel log says
// which process (NVML cannot). CRITICAL: the process's CUDA context is lost.
// Names the last kernel it launched before the fault and that launch's line;
// a process whose failing calls were traced tells the same incident
// (call_failures), and this folds into it.
std::vector<CausalChain> rule_gpu_fault(const RuleContext& ctx) {
  std::vector<CausalChain> out;
  for (const ProcessFault& f : process_faults(ctx)) {
    if (ctx.window.pid && *ctx.window.pid != f.pid) continue;
    const Xid* x = find_xid(f.code);
    const std::string pid = std::to_string(f.pid);
    CausalChain c;
    c.severity = Severity::Critical;
    c.impact_ns = f.lines;
    c.symptom.pid = f.pid;
    c.symptom.comm = ctx.comm(f.pid);
    if (c.symptom.comm.empty()) c.symptom.comm = f.process;
    c.symptom.first_ts_ns = f.ts;
    const std::string gpu = f.gpu >= 0 ? "GPU " + std::to_string(f.gpu) : "the GPU at " + f.pci;
    c.symptom.op = "GPU fault";
    c.symptom.summary = "XID " + std::to_string(f.code) + " on " + gpu + ", in this process's kernel";
    c.evidence.push_back({"the kernel log at " + format_wall_time(f.ts) + ": NVRM Xid " + std::to_string(f.code) +
                              " (" + (x ? x->meaning : "see NVIDIA's XID catalogue") + ") on " + gpu + " for pid " +
                              pid + (f.process.empty() ? "" : " (" + f.process + ")") +
                              (f.detail.empty() ? "" : ": " + f.detail),
                          {{"xid", f.code}, {"gpu", f.gpu}, {"pci", f.pci}, {"pid", f.pid}, {"process", f.process},
                           {"detail", f.detail}, {"lines", f.lines}}});
    // The last kernel it launched before the fault: a launch row, or the
    // first lookup of a kernel (CUDA's lazy loading names each kernel just
    // before its first launch; that call is always traced).
    std::optional<int64_t> stack;
    if (auto k = store::last_kernel_launch(ctx.db, f.session, f.pid, f.ts)) {
      stack = k->stack_id;
      c.evidence.push_back({"the last kernel it launched before the fault: " + k->kernel +
                                (k->lookup ? " (its first launch)" : "") + ", " +
                                format_duration(std::max<int64_t>(0, f.ts - k->ts_ns)) + " before",
                            {{"kernel", k->kernel}, {"launched_ts_ns", k->ts_ns}}});
    }
    // (launch_windows is empty where launches were probed throughout.)
    if (!ctx.launch_windows(f.session, f.ts - 1, f.ts + 1).empty())
      c.evidence.push_back({"the fault fell outside the launch windows (trace --launch-duty): the last launch recorded "
                            "may not be the faulting one; --launch-duty always records every launch",
                            {{"outside_launch_windows", true}}});
    if (auto e = store::first_failed_call(ctx.db, f.session, f.pid, f.ts - kSameFaultNs))
      c.evidence.push_back({"then " + ctx.op_name(e->op_id) + " failed (error " + std::to_string(e->ret) +
                                ")",
                            {{"failed_op", ctx.op_name(e->op_id)}, {"failed_ts_ns", e->ts_ns}}});
    if (stack) c.frame = ctx.top_frame("SELECT " + std::to_string(*stack) + " AS stack_id");
    if (!c.frame) c.no_frame_reason = "no recorded launch before the fault carried a Python stack";
    c.recommendation =
        "A kernel of this process faulted on the GPU (its CUDA context is lost; the process must restart). Rerun "
        "the failing step with CUDA_LAUNCH_BLOCKING=1 or under compute-sanitizer to stop at the faulting kernel, and "
        "check its indices against its buffers' sizes.";
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<CausalChain> rule_gpu_health(const RuleContext& ctx) {
  std::vector<CausalChain> out;
  // Per GPU: its XIDs and ECC events in the window, and its counters' growth.
  struct Gpu {
    int64_t session;
    int gpu;
    std::string name;
    std::vector<std::pair<int64_t, int64_t>> xids;  // (ts, code)
    int64_t ecc_double = 0, ecc_growth = 0, remap_pending = 0, retired_growth = 0;
    int64_t first_ts = INT64_MAX;
    std::string pci;                       // the kernel log's address, when NVML's index is unknown
    std::map<uint32_t, std::string> pids;  // processes the kernel log named (not traced ones)
  };
  std::map<std::pair<int64_t, int>, Gpu> gpus;
  auto gpu_of = [&](int64_t s, int g) -> Gpu& {
    auto& x = gpus[{s, g}];
    x.session = s;
    x.gpu = g;
    return x;
  };
  // An application fault the kernel log joined to its process is that
  // process's incident (gpu_fault): NVML's copy of it, within seconds on the
  // same GPU, is not told twice. Hardware faults stay the GPU's.
  const auto joined = process_faults(ctx);
  // The same fault: the same GPU within seconds, logged for that process or for none.
  auto told = [&](int64_t session, int gpu, int64_t ts, std::optional<uint32_t> pid) {
    for (const auto& f : joined)
      if (f.session == session && (f.gpu == gpu || f.gpu < 0 || gpu < 0) && ts >= f.ts - kSameFaultNs &&
          ts <= f.ts + kSameFaultNs && (!pid || *pid == f.pid))
        return true;
    return false;
  };
  store::each_gpu_event(ctx.db, ctx.window.from_ns, ctx.window.to_ns, [&](const store::GpuEvent& e) {
    const Xid* x = find_xid(e.code);
    const bool application = e.event == "xid" && !(x && x->hardware);
    const auto pid = e.pid ? std::optional(uint32_t(*e.pid)) : std::nullopt;
    if (application && told(e.session, int(e.gpu), e.ts_ns, pid)) return;
    Gpu& g = gpu_of(e.session, int(e.gpu));
    if (g.pci.empty()) g.pci = e.pci;
    if (pid) g.pids[*pid] = e.process;
    if (e.event == "xid") g.xids.emplace_back(e.ts_ns, e.code);
    if (e.event == "ecc_double") g.ecc_double++;
    if (e.event == "xid" || e.event == "ecc_double") g.first_ts = std::min(g.first_ts, e.ts_ns);
  });
  for (const auto& grown : store::gpu_counter_growth(ctx.db, ctx.window.from_ns, ctx.window.to_ns)) {
    if (grown.ecc_uncorrected <= 0 && grown.remap_pending <= 0 && grown.retired_pages <= 0) continue;
    Gpu& g = gpu_of(grown.session, int(grown.gpu));
    g.ecc_growth = grown.ecc_uncorrected;
    g.remap_pending = grown.remap_pending;
    g.retired_growth = grown.retired_pages;
    if (grown.first_remap_pending_ns) g.first_ts = std::min(g.first_ts, *grown.first_remap_pending_ns);
  }
  for (auto& [key, g] : gpus) {
    bool hardware = g.ecc_double || g.ecc_growth > 0 || g.remap_pending > 0;
    std::map<int64_t, int64_t> codes;
    for (const auto& [ts, code] : g.xids) {
      codes[code]++;
      if (const Xid* x = find_xid(code); x && x->hardware) hardware = true;
    }
    if (codes.empty() && !hardware) continue;
    g.name = store::gpu_device_name(ctx.db, g.session, g.gpu);
    CausalChain c;
    // An application fault (XID 13/31/43) is the GPU reporting a kernel's
    // bug: the failing calls tell it; the GPU is healthy.
    c.severity = hardware ? Severity::Critical : Severity::High;
    c.impact_ns = int64_t(g.xids.size()) + g.ecc_double + g.ecc_growth;
    c.symptom.op = (g.gpu >= 0 ? "GPU " + std::to_string(g.gpu) : "the GPU at " + g.pci) +
                   (g.name.empty() ? "" : " (" + g.name + ")");
    c.symptom.first_ts_ns = g.first_ts;
    std::string summary;
    nlohmann::json xid_json = nlohmann::json::array();
    for (const auto& [code, n] : codes) {
      const Xid* x = find_xid(code);
      summary += (summary.empty() ? "" : ", ") + std::string("XID ") + std::to_string(code) + (n > 1 ? " x" + std::to_string(n) : "");
      xid_json.push_back({{"xid", code}, {"count", n}, {"meaning", x ? x->meaning : ""}, {"hardware", x && x->hardware}});
      c.evidence.push_back({"XID " + std::to_string(code) + " (" + (x ? x->meaning : "see NVIDIA's XID catalogue") + ")" +
                                (n > 1 ? ", " + std::to_string(n) + " times" : "") + ", first at " +
                                format_wall_time(g.first_ts),
                            {{"xid", code}, {"count", n}}});
    }
    if (!g.pids.empty()) {
      std::string who;
      for (const auto& [pid, name] : g.pids)
        who += (who.empty() ? "" : ", ") + std::to_string(pid) + (name.empty() ? "" : " (" + name + ")");
      c.evidence.push_back({"the kernel log names pid " + who + ", not a process this trace followed",
                            {{"logged_pids", nlohmann::json(g.pids)}}});
    }
    if (g.ecc_double || g.ecc_growth)
      c.evidence.push_back({"uncorrectable ECC errors: " + std::to_string(std::max(g.ecc_double, g.ecc_growth)) +
                                " in the window",
                            {{"ecc_uncorrected", std::max(g.ecc_double, g.ecc_growth)}}});
    if (g.remap_pending)
      c.evidence.push_back({"a memory row remap is pending: the GPU needs a reset to apply it",
                            {{"remap_pending", g.remap_pending}}});
    if (g.retired_growth)
      c.evidence.push_back({std::to_string(g.retired_growth) + " more pages retired", {{"retired_pages", g.retired_growth}}});
    if (summary.empty()) summary = "uncorrectable memory errors";
    c.symptom.summary = summary;
    // Tie it to the calls: the first failing call after it, and on which process.
    const int64_t since = g.first_ts - 1'000'000'000;
    if (auto e = store::first_failed_call_in(ctx.db, g.session, since, ctx.window.to_ns)) {
      c.symptom.pid = uint32_t(e->pid);
      c.symptom.comm = ctx.comm(c.symptom.pid);
      c.evidence.push_back({"pid " + std::to_string(e->pid) + "'s " + ctx.op_name(e->op_id) +
                                " failed (error " + std::to_string(e->ret) + ") " +
                                format_duration(std::max<int64_t>(0, e->ts_ns - g.first_ts)) + " after it",
                            {{"failed_pid", e->pid}, {"failed_ts_ns", e->ts_ns}}});
    }
    c.evidence.front().data["xids"] = xid_json;
    c.no_frame_reason = "a GPU fault, not a line of the program";
    c.recommendation =
        hardware ? "Drain this node and have GPU " + std::to_string(g.gpu) +
                       " checked: `nvidia-smi -q -d ECC,ROW_REMAPPER,PAGE_RETIREMENT`, `dmesg | grep -i xid`; a pending "
                       "row remap or a fallen-off-the-bus GPU needs a reset (or an RMA); restart the job elsewhere from "
                       "its last checkpoint."
                 : "An application fault reported by the GPU: find the faulting kernel (the failing calls beside this "
                   "chain name the last one launched) and rerun with CUDA_LAUNCH_BLOCKING=1 or compute-sanitizer.";
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<CausalChain> rule_gpu_throttled(const RuleContext& ctx) {
  std::vector<CausalChain> out;
  struct Sample {
    int64_t ts, bits, clock;
  };
  std::map<std::pair<int64_t, int>, std::vector<Sample>> samples;
  const auto sampled = [&](const store::GpuClockSample& s) {
    samples[{s.session, int(s.gpu)}].push_back({s.ts_ns, s.throttle, s.sm_clock});
  };
  store::each_gpu_clock_sample(ctx.db, ctx.window.from_ns, ctx.window.to_ns, sampled);
  store::Window w{ctx.window.from_ns, ctx.window.to_ns, std::nullopt};
  if (ctx.window.pid) w.pid = *ctx.window.pid;
  for (const auto& [key, ss] : samples) {
    const auto [session, gpu] = key;
    int throttled = 0;
    int64_t bits = 0;
    for (const auto& s : ss)
      if (s.bits & kSlowdownBits) {
        throttled++;
        bits |= s.bits & kSlowdownBits;
      }
    if (throttled < kMinThrottledSamples) continue;
    // The device as NVML describes it: its top clock and power limits.
    const store::GpuDeviceLimits device = store::gpu_device_limits(ctx.db, session, gpu);
    const int64_t clock_max = device.sm_clock_max, limit = device.power_limit_mw;
    const int64_t dflt = device.power_default_mw;
    // A software power cap alone, with the limit at the board's default, is
    // a GPU running as fast as its power budget allows (a saturated H100
    // draws its 700 W and lowers its clocks to stay there): a note. A limit
    // set below the default (nvidia-smi -pl) is the incident.
    const bool at_rated_power = bits == 0x4 && limit > 0 && dflt > 0 && limit >= dflt;
    const bool lowered = limit > 0 && dflt > 0 && limit < dflt;
    // The processes on this GPU (else, with one GPU, every process).
    std::vector<uint32_t> pids;
    for (int64_t pid : store::gpu_process_pids(ctx.db, session, gpu, w)) pids.push_back(uint32_t(pid));
    if (pids.empty() && store::gpu_device_count(ctx.db, session) <= 1)
      for (int64_t pid : store::cuda_call_pids(ctx.db, session, w)) pids.push_back(uint32_t(pid));
    // Work while throttled vs not: the synchronising calls' mean time (what
    // the host waits for the GPU), each put in the second of its sample.
    auto throttled_at = [&](int64_t ts) -> std::optional<bool> {
      auto it = std::lower_bound(ss.begin(), ss.end(), ts, [](const Sample& s, int64_t t) { return s.ts < t; });
      if (it == ss.end() || it->ts - ts > 1'500'000'000) return std::nullopt;  // a sample covers the second before it
      return (it->bits & kSlowdownBits) != 0;
    };
    for (uint32_t pid : pids) {
      int64_t n[2] = {0, 0}, total[2] = {0, 0};
      int64_t top_op = -1;
      store::each_gpu_wait(ctx.db, session, pid, w, [&](const store::TimedCall& call) {
        auto t = throttled_at(call.ts_ns + call.dur_ns);
        if (!t) return;
        n[*t]++;
        total[*t] += call.dur_ns;
        top_op = call.op_id;
      });
      if (n[0] < 5 || n[1] < 5) continue;
      int64_t clock_lo = INT64_MAX, clock_hi = 0;
      for (const auto& s : ss) {
        if (!s.clock) continue;
        if (s.bits & kSlowdownBits) clock_lo = std::min(clock_lo, s.clock);
        else clock_hi = std::max(clock_hi, s.clock);
      }
      // The clocks bound what they can explain: work at 1935 MHz instead of
      // 1980 is at most 2% slower, whatever else made those seconds' waits
      // longer (a compile phase, a bigger batch).
      double slow = double(total[1]) / double(n[1]) / (double(total[0]) / double(n[0]));
      if (clock_lo != INT64_MAX && clock_hi > 0) slow = std::min(slow, double(clock_hi) / double(clock_lo));
      if (slow < kMinSlowdown) continue;
      CausalChain c;
      const double share = double(throttled) / double(ss.size());
      c.severity = at_rated_power                           ? Severity::Low
                   : slow >= kHighSlowdown && share >= 0.1 ? Severity::High
                                                           : Severity::Medium;
      c.impact_ns = int64_t(double(total[1]) * (1 - 1 / slow));
      c.symptom = ctx.symptom(pid, top_op);
      c.symptom.summary = "GPU " + std::to_string(gpu) + " throttled " + std::to_string(throttled) + " of " +
                          std::to_string(ss.size()) + " s; its waits " + fixed1(slow) + "x longer then";
      c.evidence.push_back({"GPU " + std::to_string(gpu) + " ran below its clocks in " + std::to_string(throttled) + " of " +
                                std::to_string(ss.size()) + " one-second samples (" + reasons_words(bits) + ")" +
                                (clock_lo != INT64_MAX && clock_hi
                                     ? ": SM clock " + std::to_string(clock_lo) + " MHz vs " + std::to_string(clock_hi) +
                                           " MHz otherwise" + (clock_max ? " (max " + std::to_string(clock_max) + ")" : "")
                                     : ""),
                            {{"gpu", gpu}, {"throttled_samples", throttled}, {"samples", ss.size()}, {"reasons", bits},
                             {"sm_clock_throttled", clock_lo == INT64_MAX ? 0 : clock_lo}, {"sm_clock_other", clock_hi},
                             {"sm_clock_max", clock_max}}});
      c.evidence.push_back({"pid " + std::to_string(pid) + " waited " + fixed1(slow) + "x longer per sync while throttled (" +
                                ms(total[1] / n[1]) + " vs " + ms(total[0] / n[0]) + ", " + std::to_string(n[1]) + " and " +
                                std::to_string(n[0]) + " calls)",
                            {{"slowdown", slow}, {"throttled_calls", n[1]}, {"other_calls", n[0]},
                             {"throttled_mean_ns", total[1] / n[1]}, {"other_mean_ns", total[0] / n[0]}}});
      if (limit > 0 && dflt > 0)
        c.evidence.push_back({at_rated_power ? "its power limit is the board's default (" + std::to_string(limit / 1000) +
                                                   " W): it runs as fast as its power budget allows, as a saturated "
                                                   "GPU does"
                                             : lowered ? "its power limit was lowered to " + std::to_string(limit / 1000) +
                                                             " W (default " + std::to_string(dflt / 1000) + " W)"
                                                       : "its power limit: " + std::to_string(limit / 1000) + " W",
                              {{"power_limit_mw", limit}, {"power_default_mw", dflt}, {"lowered", lowered},
                               {"at_rated_power", at_rated_power}}});
      c.no_frame_reason = "the GPU's clocks, not a line of the program";
      if (at_rated_power)
        c.recommendation = "Nothing to fix on the node: the GPU draws its rated power and sets its clocks to stay there "
                           "(the work is GPU-bound). Cheaper kernels (mixed precision, fused ops) do more within it.";
      else
        c.recommendation =
            std::string(lowered ? "Its power limit was lowered: restore it (`nvidia-smi -pl " + std::to_string(dflt / 1000) +
                                      "`, or the site's power policy), or expect these steps to be slower. "
                                : "") +
            std::string(bits & (0x20 | 0x40) ? "Cool the GPU: check its fans, the inlet temperature and airflow "
                                               "(`nvidia-smi -q -d TEMPERATURE,PERFORMANCE`). "
                                             : "") +
            std::string(bits & (0x4 | 0x80) ? "The GPU hits its power limit: check `nvidia-smi -q -d POWER` (a lowered "
                                              "limit, a PSU or power-brake event). "
                                            : "") +
            std::string(bits & 0x8 ? "Hardware slowdown is thermal or power-supply protection: have the node checked. "
                                   : "") +
            "Until fixed, move the job off this GPU or expect these steps to be slower.";
      out.push_back(std::move(c));
    }
  }
  return out;
}

}  // namespace causeway::analyze
