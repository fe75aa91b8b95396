// SPDX-License-Identifier: Apache-2.0
#pragma once
// Turning one raw library-call record into store rows. The CUDA/HIP decoder
// lives in src/consume/cuda_decoder.cpp; other families (NCCL, verbs) plug in
// through register_family_decoders() without touching the consumer.
#include <cstdint>
#include <memory>
#include <optional>

#include "causeway/common/op_table.h"
#include "causeway/events.h"
#include "causeway/model/records.h"

namespace causeway::consume {

struct DecodeContext {
  int64_t ts_ns = 0;                 // wall-clock entry time of the call
  std::optional<int64_t> stack_id;   // set when the call carried a stack
  model::Batch& batch;               // append rows here
};

class CallDecoder {
 public:
  virtual ~CallDecoder() = default;
  // Decode one record of an op whose ArgShape this decoder was registered for.
  virtual void decode(const cw_call_event& e, const OpSpec& op, DecodeContext& ctx) = 0;
};

class CallDecoderRegistry {
 public:
  void add(ArgShape shape, std::shared_ptr<CallDecoder> d);
  CallDecoder* find(ArgShape shape) const;

 private:
  std::shared_ptr<CallDecoder> by_shape_[32];
};

// Registers the decoders of the non-CUDA families (src/consume/family_decoders.cpp).
void register_family_decoders(CallDecoderRegistry& reg);

}  // namespace causeway::consume
