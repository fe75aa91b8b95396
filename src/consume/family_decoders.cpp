// SPDX-License-Identifier: Apache-2.0
#include "causeway/consume/call_decoder.h"

#include "causeway/consume/nccl_decoder.h"
#include "causeway/consume/verbs_decoder.h"

namespace causeway::consume {

void CallDecoderRegistry::add(ArgShape shape, std::shared_ptr<CallDecoder> d) {
  by_shape_[size_t(shape)] = std::move(d);
}

CallDecoder* CallDecoderRegistry::find(ArgShape shape) const {
  return by_shape_[size_t(shape)].get();
}

void register_family_decoders(CallDecoderRegistry& reg) {
  // Each decoder keeps per-process state (communicators, QPs): one instance
  // per registry, i.e. per trace.
  reg.add(ArgShape::Nccl, std::make_shared<NcclDecoder>());
  reg.add(ArgShape::Verbs, std::make_shared<VerbsDecoder>());
}

}  // namespace causeway::consume
