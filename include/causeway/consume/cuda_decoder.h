// SPDX-License-Identifier: Apache-2.0
#pragma once
#include <map>
#include <memory>
#include <utility>

#include "causeway/consume/call_decoder.h"
#include "causeway/consume/kernel_names.h"

namespace causeway::consume {

// CUDA runtime/driver and HIP shapes -> model::CudaCall.
class CudaDecoder : public CallDecoder {
 public:
  void decode(const cw_call_event& e, const OpSpec& op, DecodeContext& ctx) override;
  void forget_process(uint32_t pid);
  // The kernel a launch of this shape names with `handle`: a runtime host
  // stub, or a driver CUfunction/CUkernel.
  std::string launch_kernel(uint32_t pid, ArgShape shape, uint64_t handle);
  KernelNameResolver& names() { return names_; }

 private:
  // The kernel name a successful cuModuleGetFunction/cuLibraryGetKernel gave
  // its handle, remembered for the launches through it.
  std::string module_function_name(uint32_t pid, const cw_call_event& e);
  // Live allocations (pid, pointer) -> bytes, so a free reports its size.
  static constexpr size_t kMaxTrackedAllocs = 1 << 20;
  std::map<std::pair<uint32_t, uint64_t>, int64_t> allocs_;
  // Tensor blocks of a framework's allocator (inside the segments above).
  std::map<std::pair<uint32_t, uint64_t>, int64_t> tensors_;
  KernelNameResolver names_;
};

void register_cuda_decoder(CallDecoderRegistry& reg, std::shared_ptr<CudaDecoder> d);

}  // namespace causeway::consume
