// SPDX-License-Identifier: Apache-2.0
#include "causeway/attach/trap_cost.h"

#include <bpf/libbpf.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <memory>
#include <thread>
#include <vector>

#include "causeway/attach/libbpf_log.h"
#include "causeway/attach/probes.h"
#include "causeway/discover/proc_maps.h"
#include "probe_check.skel.h"

#if defined(__x86_64__)
// One function per class of first instruction, each with an unprobed twin of
// the same code: the difference in a call's time is the probe's.
#define CW_TRAP_FN(name, body)                   \
  ".globl " #name "\n.type " #name ",@function\n" \
  ".p2align 4\n" #name ":\n" body "\n.size " #name ", .-" #name "\n"
asm(".text\n"
    CW_TRAP_FN(causeway_trap_push, "push %rbp\npop %rbp\nret")
    CW_TRAP_FN(causeway_twin_push, "push %rbp\npop %rbp\nret")
    CW_TRAP_FN(causeway_trap_branch, ".byte 0xeb, 0x00\nret")
    CW_TRAP_FN(causeway_twin_branch, ".byte 0xeb, 0x00\nret")
    CW_TRAP_FN(causeway_trap_nop, "nop\nret")
    CW_TRAP_FN(causeway_twin_nop, "nop\nret")
    CW_TRAP_FN(causeway_trap_nopl, ".byte 0x0f, 0x1f, 0x44, 0x00, 0x00\nret")
    CW_TRAP_FN(causeway_twin_nopl, ".byte 0x0f, 0x1f, 0x44, 0x00, 0x00\nret")
    CW_TRAP_FN(causeway_trap_endbr, ".byte 0xf3, 0x0f, 0x1e, 0xfa\nret")
    CW_TRAP_FN(causeway_twin_endbr, ".byte 0xf3, 0x0f, 0x1e, 0xfa\nret")
    CW_TRAP_FN(causeway_trap_other, "mov %rdi, %rax\nret")
    CW_TRAP_FN(causeway_twin_other, "mov %rdi, %rax\nret")
    CW_TRAP_FN(causeway_trap_pair, "push %rbp\npop %rbp\nret")
    CW_TRAP_FN(causeway_twin_pair, "push %rbp\npop %rbp\nret"));
extern "C" {
void causeway_trap_push();
void causeway_twin_push();
void causeway_trap_branch();
void causeway_twin_branch();
void causeway_trap_nop();
void causeway_twin_nop();
void causeway_trap_nopl();
void causeway_twin_nopl();
void causeway_trap_endbr();
void causeway_twin_endbr();
void causeway_trap_other();
void causeway_twin_other();
void causeway_trap_pair();
void causeway_twin_pair();
}
#endif

namespace causeway::attach {

using discover::EntryInsn;

std::vector<uint64_t> offsets_in_self(const std::vector<uint64_t>& addrs) {
  std::vector<uint64_t> out(addrs.size(), 0);
  for (const auto& m : discover::read_proc_maps(uint32_t(::getpid())))
    for (size_t i = 0; i < addrs.size(); i++)
      if (addrs[i] >= m.start && addrs[i] < m.end) out[i] = addrs[i] - m.start + m.offset;
  return out;
}

bool TrapCosts::single_steps(EntryInsn k) const {
  const double base = of(EntryInsn::Nop), c = of(k);
  return c >= 2 * base && c - base >= 200;
}

#if defined(__x86_64__)
namespace {

struct Target {
  EntryInsn cls;
  void (*probed)();
  void (*twin)();
};

int64_t now_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

int64_t time_calls(void (*f)(), int n) {
  void (*volatile call)() = f;  // not inlined, not elided
  const int64_t t0 = now_ns();
  for (int i = 0; i < n; i++) call();
  return now_ns() - t0;
}

}  // namespace

std::optional<TrapCosts> measure_trap_costs(std::string* error, bool with_pair) {
  const std::array<Target, 6> targets = {{
      {EntryInsn::Push, causeway_trap_push, causeway_twin_push},
      {EntryInsn::Branch, causeway_trap_branch, causeway_twin_branch},
      {EntryInsn::Nop, causeway_trap_nop, causeway_twin_nop},
      {EntryInsn::LongNop, causeway_trap_nopl, causeway_twin_nopl},
      {EntryInsn::Endbr, causeway_trap_endbr, causeway_twin_endbr},
      {EntryInsn::Other, causeway_trap_other, causeway_twin_other},
  }};
  route_libbpf_log();
  std::unique_ptr<probe_check_bpf, SkeletonDeleter> skel(probe_check_bpf__open_and_load());
  if (!skel) {
    *error = std::string("loading the probe_check program failed: ") + std::strerror(errno);
    return std::nullopt;
  }
  std::vector<uint64_t> addrs;
  for (const auto& t : targets) addrs.push_back(reinterpret_cast<uint64_t>(t.probed));
  // The pair: an entry and a return probe on one function, as every traced
  // call has (the return probe's trampoline traps a second time).
  addrs.push_back(reinterpret_cast<uint64_t>(causeway_trap_pair));
  const auto offsets = offsets_in_self(addrs);
  const uint64_t pair_offset = offsets.back();
  std::vector<Link> links;
  auto attach = [&](uint64_t offset, bool retprobe) {
    LIBBPF_OPTS(bpf_uprobe_opts, opts, .retprobe = retprobe);
    Link l(offset ? bpf_program__attach_uprobe_opts(skel->progs.cw_check_uprobe, ::getpid(), "/proc/self/exe",
                                                       offset, &opts)
                     : nullptr);
    if (!l) return false;
    links.push_back(std::move(l));
    return true;
  };
  bool attached = !with_pair || (attach(pair_offset, false) && attach(pair_offset, true));
  for (size_t i = 0; attached && i < targets.size(); i++) attached = attach(offsets[i], false);
  if (!attached) {
    *error = std::string("attaching a uprobe to this binary failed: ") + std::strerror(errno);
    return std::nullopt;
  }
  // Rounds interleave the classes and the twins, so drift hits all alike;
  // a single-stepped class costs ~15 us a call on a VM: 5 x 50 calls each
  // (~11 ms of this thread's CPU for the three such classes). An interrupt
  // in one round moves that round only; the median is kept.
  constexpr int kRounds = 5, kCalls = 50;
  std::array<std::vector<double>, targets.size()> per_call;
  std::vector<double> pair_per_call;
  for (int r = 0; r < kRounds; r++) {
    for (size_t i = 0; i < targets.size(); i++) {
      const int64_t probed = time_calls(targets[i].probed, kCalls);
      const int64_t twin = time_calls(targets[i].twin, kCalls);
      per_call[i].push_back(double(probed - twin) / kCalls);
    }
    if (!with_pair) continue;
    const int64_t probed = time_calls(causeway_trap_pair, kCalls);
    const int64_t twin = time_calls(causeway_twin_pair, kCalls);
    pair_per_call.push_back(double(probed - twin) / kCalls);
  }
  const uint64_t hits = __atomic_load_n(&skel->bss->hits, __ATOMIC_RELAXED);
  // Each link waits out a grace period when it goes: side by side.
  std::vector<std::thread> releasers;
  for (auto& l : links) {
    try {
      releasers.emplace_back([l = std::move(l)]() mutable { l.reset(); });
    } catch (const std::system_error&) {
      l.reset();
    }
  }
  for (auto& t : releasers) t.join();
  const uint64_t want = uint64_t(kRounds) * kCalls * (targets.size() + (with_pair ? 2 : 0));
  if (hits != want) {
    *error = "the calibration probes fired " + std::to_string(hits) + " times of " + std::to_string(want);
    return std::nullopt;
  }
  TrapCosts out;
  for (size_t i = 0; i < targets.size(); i++) {
    auto& v = per_call[i];
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    out.ns[targets[i].cls] = std::max(0.0, v[v.size() / 2]);
  }
  if (with_pair) {
    std::nth_element(pair_per_call.begin(), pair_per_call.begin() + kRounds / 2, pair_per_call.end());
    out.pair_ns = std::max(0.0, pair_per_call[kRounds / 2]);
  }
  return out;
}
#else
std::optional<TrapCosts> measure_trap_costs(std::string* error, bool) {
  *error = "measured on x86-64 only";
  return std::nullopt;
}
#endif

}  // namespace causeway::attach
