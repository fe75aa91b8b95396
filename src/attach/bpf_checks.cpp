// SPDX-License-Identifier: Apache-2.0
#include "causeway/attach/bpf_checks.h"

#include <bpf/libbpf.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>

#include "causeway/attach/libbpf_log.h"
#include "causeway/attach/trap_cost.h"
#include "causeway/discover/entry_insn.h"
#include "probe_check.skel.h"

extern "C" __attribute__((noinline, used)) void causeway_check_probe_target() {
  // Keeps the call (and the function) from being folded away.
  asm volatile("" ::: "memory");
}

namespace causeway::attach {
namespace {

using discover::CheckResult;
using discover::CheckStatus;

CheckResult result(std::string name, CheckStatus status, std::string detail, std::string fix = {}) {
  return CheckResult{std::move(name), status, std::move(detail), std::move(fix)};
}

struct SkeletonDestroy {
  void operator()(probe_check_bpf* s) const { probe_check_bpf__destroy(s); }
};
struct LinkDestroy {
  void operator()(bpf_link* l) const { bpf_link__destroy(l); }
};

}  // namespace

std::vector<CheckResult> check_bpf_load_and_uprobe(const Privileges& p) {
  if (!p.can_trace()) {
    return {result("bpf_load", CheckStatus::Warn, "not checked: needs root (CAP_BPF and CAP_PERFMON)", missing_privileges_message(p)),
            result("uprobe", CheckStatus::Warn, "not checked: needs root (CAP_BPF and CAP_PERFMON)", missing_privileges_message(p))};
  }
  route_libbpf_log();
  std::vector<CheckResult> out;
  std::unique_ptr<probe_check_bpf, SkeletonDestroy> skel(probe_check_bpf__open_and_load());
  if (!skel) {
    int err = errno;
    out.push_back(result("bpf_load", CheckStatus::Fail,
                         std::string("loading a trivial BPF program failed: ") + std::strerror(err),
                         "run causeway -v check for the verifier/libbpf log; check privileges, BTF and lockdown above"));
    out.push_back(result("uprobe", CheckStatus::Fail, "not checked: no BPF program loaded", "fix bpf_load first"));
    return out;
  }
  out.push_back(result("bpf_load", CheckStatus::Ok, "loaded probe_check (uprobe program, .bss global)"));

  // By file offset, from where the function is mapped: works on a stripped
  // binary too (no symbol table to look the name up in).
  const uint64_t offset = offset_in_self(reinterpret_cast<uint64_t>(&causeway_check_probe_target));
  LIBBPF_OPTS(bpf_uprobe_opts, opts);
  std::unique_ptr<bpf_link, LinkDestroy> link(
      offset ? bpf_program__attach_uprobe_opts(skel->progs.cw_check_uprobe, ::getpid(), "/proc/self/exe",
                                               offset, &opts)
             : nullptr);
  if (!link) {
    int err = errno;
    out.push_back(result("uprobe", CheckStatus::Fail,
                         std::string("attaching a uprobe to causeway_check_probe_target failed: ") + std::strerror(err),
                         "check /sys/bus/event_source/devices/uprobe exists (CONFIG_UPROBE_EVENTS=y); "
                         "run causeway -v check for libbpf's log"));
    return out;
  }
  // Through a volatile pointer so the calls are not elided.
  void (*volatile target)() = causeway_check_probe_target;
  constexpr uint64_t kCalls = 3;
  for (uint64_t i = 0; i < kCalls; ++i) target();
  uint64_t hits = __atomic_load_n(&skel->bss->hits, __ATOMIC_RELAXED);
  if (hits == kCalls) {
    out.push_back(result("uprobe", CheckStatus::Ok, "attached to this binary and fired 3 of 3 times"));
  } else {
    out.push_back(result("uprobe", CheckStatus::Fail,
                         "attached, but fired " + std::to_string(hits) + " of " + std::to_string(kCalls) + " times",
                         "uprobes do not fire on this kernel/VM: check for a seccomp or virtualization limit on int3 traps"));
  }
  return out;
}

namespace {

std::string us(double ns) {
  char b[32];
  std::snprintf(b, sizeof b, ns < 10'000 ? "%.2f us" : "%.1f us", ns / 1000);
  return b;
}

// Calls of these classes come every step: a probe that costs them a
// single-step each is what a user would notice.
bool hot(OpClass c) {
  return c == OpClass::Launch || c == OpClass::Sync || c == OpClass::Copy || c == OpClass::Set ||
         c == OpClass::Collective || c == OpClass::P2P || c == OpClass::Graph;
}

}  // namespace

std::vector<CheckResult> check_trap_costs(const std::vector<discover::LibraryFile>& libraries) {
  using discover::EntryInsn;
  std::string err;
  const auto costs = measure_trap_costs(&err, /*with_pair=*/true);
  if (!costs) return {result("uprobe_cost", CheckStatus::Warn, "not measured: " + err)};
  std::string emulated, stepped;
  for (auto k : {EntryInsn::Push, EntryInsn::Branch, EntryInsn::Nop, EntryInsn::LongNop, EntryInsn::Endbr,
                 EntryInsn::Other}) {
    std::string& into = costs->single_steps(k) ? stepped : emulated;
    into += (into.empty() ? "" : ", ") + std::string(discover::entry_insn_name(k)) + " " + us(costs->of(k));
  }
  std::vector<CheckResult> out;
  out.push_back(result("uprobe_cost", CheckStatus::Ok,
                       "an entry probe adds, by the instruction it replaces: emulated by the kernel " +
                           (emulated.empty() ? std::string("(none)") : emulated) + "; single-stepped " +
                           (stepped.empty() ? std::string("(none)") : stepped) +
                           "; an entry and a return probe together (every traced call): " + us(costs->pair_ns) +
                           " on a push"));
  // Each probed function's first instruction, in every library found.
  size_t functions = 0, files = 0;
  std::string names;
  double worst = 0;
  bool hot_stepped = false;
  std::set<std::string> seen;
  for (const auto& lib : libraries) {
    if (!seen.insert(lib.path).second) continue;
    const auto entries = discover::probed_entries(lib.path, lib.kind);
    if (entries.empty()) continue;
    ++files;
    functions += entries.size();
    std::string here;
    for (const auto& e : entries) {
      if (!costs->single_steps(e.insn)) continue;
      worst = std::max(worst, costs->of(e.insn) - costs->of(EntryInsn::Push));
      hot_stepped = hot_stepped || hot(e.cls);
      here += (here.empty() ? "" : ", ") + e.symbol + " (" + std::string(discover::entry_insn_name(e.insn)) + ")";
    }
    if (!here.empty()) {
      const auto slash = lib.path.rfind('/');
      names += (names.empty() ? "" : "; ") + lib.path.substr(slash == std::string::npos ? 0 : slash + 1) + ": " + here;
    }
  }
  const std::string counted = std::to_string(functions) + " probed functions in " + std::to_string(files) + " files";
  if (names.empty()) {
    out.push_back(result("probe_entries", CheckStatus::Ok, "no probed function is single-stepped (" + counted + ")"));
  } else {
    out.push_back(result("probe_entries", hot_stepped ? CheckStatus::Warn : CheckStatus::Ok,
                         "single-stepped at entry, up to " + us(worst) + " more a call than an emulated probe (of " +
                             counted + "): " + names,
                         hot_stepped ? "calls through these come every step: expect that much more per call "
                                       "while they are traced; launches among them are probed in windows sized "
                                       "for it (trace --launch-duty)"
                                     : ""));
  }
  return out;
}

discover::ReadinessReport run_readiness_checks() {
  discover::ReadinessReport report = discover::run_discovery_checks();
  // After the privilege checks, as `check` prints them.
  auto at = report.checks.begin();
  while (at != report.checks.end() && at->name != "lockdown") ++at;
  if (at != report.checks.end()) ++at;
  auto bpf = check_bpf_load_and_uprobe(current_privileges());
  if (!bpf.empty() && bpf.back().name == "uprobe" && bpf.back().status == CheckStatus::Ok) {
    auto costs = check_trap_costs(report.libraries);
    bpf.insert(bpf.end(), costs.begin(), costs.end());
  }
  report.checks.insert(at, bpf.begin(), bpf.end());
  return report;
}

}  // namespace causeway::attach
