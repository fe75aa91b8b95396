// SPDX-License-Identifier: Apache-2.0
#pragma once
// Stacks of library calls. The kernel sends each (process, stack) once, as a
// CW_EV_PYSTACK record (after the CW_EV_PYCODE records of code objects it
// holds that were not sent before); every call from that stack carries its
// hash. A resolver turns stacks into deduplicated ids and frames
// (model::Batch::stacks, table stack_frames) and calls into ids.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "causeway/discover/python_runtime.h"
#include "causeway/model/records.h"
#include "causeway/model/records.h"

namespace causeway::consume {

struct StackCounters {
  int64_t stacks = 0;         // distinct (process, stack) records received
  int64_t codes = 0;          // code objects received from the kernel
  int64_t codes_invalid = 0;  // ... that did not validate (dropped)
  int64_t unresolved = 0;     // calls whose stack hash was unknown here (asked again)
};

class StackResolver {
 public:
  virtual ~StackResolver() = default;
  virtual void on_pycode(const cw_pycode_event& e) = 0;
  // A new stack: resolved now, new frames appended to batch.stacks.
  virtual void on_pystack(const cw_pystack_event& e, model::Batch& batch) = 0;
  // The stack id of this call; nullopt when it has none, or its hash is
  // unknown (then the kernel is asked to send that stack again).
  virtual std::optional<int64_t> stack_for_call(const cw_call_event& e, model::Batch& batch) = 0;
  // The stack id of a hash the kernel sent for this process (a CPU sample's);
  // nullopt as stack_for_call.
  virtual std::optional<int64_t> stack_for(uint32_t pid, uint64_t hash) = 0;
  // The agent found this process's Python runtime (it registered it with the walker).
  virtual void add_python_process(const discover::PythonRuntime& rt) = 0;
  // Files of a live process / a probed library: findable after the process is gone.
  virtual void remember_process(uint32_t pid) = 0;
  virtual void remember_file(const std::string& path) = 0;
  // A process is gone and its records are in: drop its caches.
  virtual void forget_process(uint32_t pid) = 0;
  virtual const StackCounters& counters() const = 0;
};

struct StackOptions {
  bool python = true;
  bool native = true;
  // Ids are handed out from here: one trace file holds several sessions, so
  // trace starts each session's stacks at session_id << 32.
  int64_t first_stack_id = 1;
  // Forget a key of the kernel's stack_seen (code = false) or code_seen
  // (code = true) set, so that it is sent again: what it stands for could not
  // be resolved here. Empty: nothing to tell (tests).
  std::function<void(bool code, const cw_seen_key& key)> resend;
};

// nullptr when stacks are off (src/consume/stack_resolver_factory.cpp).
std::unique_ptr<StackResolver> make_stack_resolver(const StackOptions& opts);

}  // namespace causeway::consume
