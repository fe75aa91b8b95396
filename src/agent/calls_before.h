// SPDX-License-Identifier: Apache-2.0
#pragma once
// Calls already in flight when the trace attached to a running process: no
// probe saw them enter, so the in-flight map has none of them (a job traced
// after it started hanging). Each thread of a process that began before the
// trace is looked at once (discover/stack_scan.h: its stack's return
// addresses into probed code, its Python stack read from its memory); what
// is found is checked again each second until it returns.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "causeway/consume/python/thread_walker.h"
#include "causeway/consume/stack_resolver.h"
#include "causeway/discover/python_runtime.h"
#include "causeway/model/records.h"

namespace causeway {

// A sleeping thread's Python stack read now from its process's memory (its
// frames do not move while it sleeps), handed to the resolver (its stack
// rows go into b); the stack's hash, or 0 when it has no Python frames.
// mem is opened on first use and kept for the process's other threads.
uint64_t python_stack_now(uint32_t pid, uint32_t tid, const discover::PythonRuntime& rt,
                          consume::StackResolver& resolver, model::Batch& b,
                          std::unique_ptr<consume::python::ProcessMemory>& mem);

class CallsBeforeTrace {
 public:
  struct Call {
    uint32_t pid = 0, tid = 0;
    uint16_t op_id = 0;
    int64_t entered_ns = 0;  // monotonic; the latest it can have begun (its thread's last run, else the look)
    bool aged = false;       // entered_ns is the thread's last run (it sleeps in the call), not the look
    std::optional<int64_t> stack_id;
    uint64_t sp = 0;         // its stack pointer when looked at: a call that returned moves it
    bool running = false;
  };

  // Looks at every thread of pid; the calls found. rt: the process's Python
  // (for the line), or null.
  size_t scan(uint32_t pid, const discover::PythonRuntime* rt, consume::StackResolver* resolver, model::Batch& b,
              int64_t now_ns);
  // Forgets the calls that returned since.
  void recheck();
  const std::vector<Call>& calls() const { return calls_; }

 private:
  std::vector<Call> calls_;
};

}  // namespace causeway
