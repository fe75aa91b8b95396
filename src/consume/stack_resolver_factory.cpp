// SPDX-License-Identifier: Apache-2.0
#include "causeway/consume/stack_resolver.h"

#include "causeway/consume/python/call_stack_resolver.h"

namespace causeway::consume {

std::unique_ptr<StackResolver> make_stack_resolver(const StackOptions& opts) {
  if (!opts.python && !opts.native) return nullptr;
  return std::make_unique<python::CallStackResolver>(opts);
}

}  // namespace causeway::consume
