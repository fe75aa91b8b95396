// SPDX-License-Identifier: Apache-2.0
#pragma once
// The Python stack of one thread of another process, read from its memory
// the way the kernel's walker reads it at a probe (bpf/pystack.bpf.h), for a
// thread no probe fires on: one already inside a call when the trace began.
#include <cstdint>

#include "causeway/consume/python/code_decoder.h"
#include "causeway/discover/python_runtime.h"
#include "causeway/model/stacks.h"

namespace causeway::consume::python {

// Fills e's frames (code, lasti, firstlineno, entry_mask, nframes),
// py_version and hash (never one the kernel gives: its seed differs) for the
// thread whose id CPython stored as `thread_id` (its tid in the process's
// pid namespace). False when the thread has no Python frames or its runtime
// keys threads by pthread_self (3.10), which cannot be read from outside.
bool walk_python_thread(const discover::PythonRuntime& rt, ProcessMemory& mem, uint64_t thread_id,
                        cw_pystack_event& e);

}  // namespace causeway::consume::python
