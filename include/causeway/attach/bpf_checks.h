// SPDX-License-Identifier: Apache-2.0
#pragma once
// The checks of `causeway check` that load BPF, and the whole report: the
// discovery checks (src/discover/readiness.cpp) plus these.
#include <vector>

#include "causeway/discover/libraries.h"
#include "causeway/discover/readiness.h"

namespace causeway::attach {

// Loads the probe_check program, attaches a uprobe to a function of this
// binary, calls it 3 times and expects 3 hits: results "bpf_load" and "uprobe".
// Without privileges both say what could not be checked.
std::vector<discover::CheckResult> check_bpf_load_and_uprobe(const Privileges& p);

// What an entry probe costs here by the instruction it replaces
// ("uprobe_cost"), and which functions causeway probes in `libraries` the
// kernel single-steps ("probe_entries"; warn where calls come every step).
std::vector<discover::CheckResult> check_trap_costs(const std::vector<discover::LibraryFile>& libraries);

discover::ReadinessReport run_readiness_checks();

}  // namespace causeway::attach

// The function the uprobe check attaches to (in this binary, so the check
// needs nothing but itself).
extern "C" void causeway_check_probe_target();
