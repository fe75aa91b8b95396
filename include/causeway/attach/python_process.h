// SPDX-License-Identifier: Apache-2.0
#pragma once
// Telling the BPF Python walker about a process (bpf/pystack.bpf.h, map
// py_procs): call when a traced process is discovered (exec, first call, a
// --pid at start). Safe to call again for the same pid.
#include <cstdint>
#include <optional>
#include <string>

#include "causeway/discover/python_runtime.h"

namespace causeway::attach {

// The runtime when pid runs a supported CPython and its entry is in the map
// (the stack resolver decodes that process's frames with it). Unsupported or
// unknown versions log one warning per interpreter file and return nullopt:
// the process is still traced, without Python frames. Not Python at all:
// nullopt, silently.
std::optional<discover::PythonRuntime> register_python_process(int py_procs_map_fd, uint32_t pid,
                                                               const std::string& proc_root = "/proc");
void unregister_python_process(int py_procs_map_fd, uint32_t pid);

}  // namespace causeway::attach
