// SPDX-License-Identifier: Apache-2.0
#include "causeway/consume/call_decoder.h"

namespace causeway::consume {

void CallDecoderRegistry::add(ArgShape shape, std::shared_ptr<CallDecoder> d) {
  by_shape_[size_t(shape)] = std::move(d);
}

CallDecoder* CallDecoderRegistry::find(ArgShape shape) const {
  return by_shape_[size_t(shape)].get();
}

void register_family_decoders(CallDecoderRegistry& /*reg*/) {
  // NCCL and verbs decoders register here as they land.
}

}  // namespace causeway::consume
