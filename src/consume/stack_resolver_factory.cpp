// SPDX-License-Identifier: Apache-2.0
#include "causeway/consume/stack_resolver.h"

namespace causeway::consume {

std::unique_ptr<StackResolver> make_stack_resolver(const StackOptions& /*opts*/) {
  return nullptr;  // Python/native stack capture plugs in here.
}

}  // namespace causeway::consume
