// SPDX-License-Identifier: Apache-2.0
#pragma once
// Stacks of library calls: CW_EV_PYSTACK records arrive just before the call
// record they belong to (same tid, same entry timestamp). A resolver turns
// them into deduplicated stack ids and frames (store::Batch::stacks).
#include <cstdint>
#include <memory>
#include <optional>

#include "causeway/events.h"
#include "causeway/store/records.h"

namespace causeway::consume {

class StackResolver {
 public:
  virtual ~StackResolver() = default;
  virtual void on_pystack(const cw_pystack_event& e) = 0;
  // The stack id of this call, appending newly seen stacks to batch.stacks;
  // nullopt when the call has none.
  virtual std::optional<int64_t> stack_for_call(const cw_call_event& e, store::Batch& batch) = 0;
  // A process exited: drop its caches.
  virtual void forget_process(uint32_t pid) = 0;
};

struct StackOptions {
  bool python = true;
  bool native = true;
  // Ids are handed out from here: one trace file holds several sessions, so
  // trace starts each session's stacks at session_id << 32.
  int64_t first_stack_id = 1;
};

// nullptr when stacks are off (src/consume/stack_resolver_factory.cpp).
std::unique_ptr<StackResolver> make_stack_resolver(const StackOptions& opts);

}  // namespace causeway::consume
