// SPDX-License-Identifier: Apache-2.0
#pragma once
// What an entry uprobe costs on this host, by the class of the instruction it
// replaces (discover/entry_insn.h): measured, not assumed, because whether
// the kernel emulates an instruction or single-steps it, and what a
// single-step costs (a VM may intercept the debug exception), differ between
// kernels and hosts. Needs CAP_BPF and CAP_PERFMON; takes ~20-60 ms.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "causeway/discover/entry_insn.h"

namespace causeway::attach {

struct TrapCosts {
  // Nanoseconds an entry uprobe with a trivial program adds to one call, by
  // the class of the probed instruction (every class is measured).
  std::map<discover::EntryInsn, double> ns;
  // Nanoseconds an entry and a return probe together add to a call whose
  // first instruction is emulated (a push): what every traced call pays here
  // at the least, its programs aside. 0 unless asked for (check reports it;
  // the agent does not use it).
  double pair_ns = 0;
  double of(discover::EntryInsn k) const {
    auto it = ns.find(k);
    return it == ns.end() ? 0.0 : it->second;
  }
  // Whether the kernel single-steps this class: a probe on it costs at least
  // twice what one on a one-byte nop costs (emulated by every kernel with
  // uprobes) and 200 ns more.
  bool single_steps(discover::EntryInsn k) const;
};

// The file offsets of code at `addrs` in this process's executable, from
// where it is mapped (a stripped binary has no symbols to look them up by),
// one read of the maps; 0 where no mapping holds the address.
std::vector<uint64_t> offsets_in_self(const std::vector<uint64_t>& addrs);
inline uint64_t offset_in_self(uint64_t addr) { return offsets_in_self({addr})[0]; }

// Probes functions of this binary that begin with each class of instruction
// and times calls with and without the probe, interleaved (the median of
// several rounds); with_pair: also an entry and a return probe on one
// function (pair_ns). nullopt, with *error set, where a probe cannot be
// attached or does not fire on every call.
std::optional<TrapCosts> measure_trap_costs(std::string* error, bool with_pair = false);

}  // namespace causeway::attach
