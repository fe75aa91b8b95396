// SPDX-License-Identifier: Apache-2.0
// Raw CUDA runtime / driver (and HIP, which mirrors them) records -> cuda_calls
// rows. Argument positions come from the op table; the struct layouts read
// here are the public CUDA ABI.
#include "causeway/consume/cuda_decoder.h"

#include <cstdint>
#include <cstring>

namespace causeway::consume {
namespace {

uint64_t arg_or_stack(const cw_call_event& e, int idx) {
  if (idx < 0) return 0;
  if (idx < 6) return e.args[idx];
  return e.stack[(idx - 6) & (CW_STACK_WORDS - 1)];
}

bool has_arg(const cw_call_event& e, int idx) {
  return idx >= 0 && (idx < 6 || (e.flags & CW_CALL_HAS_STACK));
}

template <typename T>
T read_deref(const cw_call_event& e, size_t off) {
  T v{};
  if (off + sizeof(T) <= sizeof(e.deref)) std::memcpy(&v, e.deref + off, sizeof(T));
  return v;
}

// A launch's grid, block and shared memory (and its stream, from a launch
// config) into c; returns the handle that names its kernel.
uint64_t read_launch(const cw_call_event& e, ArgShape shape, model::CudaCall& c) {
  switch (shape) {
    case ArgShape::LaunchRuntime:
      // dim3 (12 bytes) by value: x|y<<32 in one register, z in the next.
      c.grid = model::Dim3{uint32_t(e.args[1]), uint32_t(e.args[1] >> 32), uint32_t(e.args[2])};
      c.block = model::Dim3{uint32_t(e.args[3]), uint32_t(e.args[3] >> 32), uint32_t(e.args[4])};
      if (e.flags & CW_CALL_HAS_STACK) c.shared_mem = uint32_t(e.stack[0]);
      return e.args[0];
    case ArgShape::LaunchRuntimeEx:
      // cudaLaunchConfig_t { dim3 gridDim; dim3 blockDim; size_t dynamicSmemBytes; cudaStream_t stream; ... }
      if (e.flags & CW_CALL_HAS_DEREF) {
        c.grid = model::Dim3{read_deref<uint32_t>(e, 0), read_deref<uint32_t>(e, 4), read_deref<uint32_t>(e, 8)};
        c.block = model::Dim3{read_deref<uint32_t>(e, 12), read_deref<uint32_t>(e, 16), read_deref<uint32_t>(e, 20)};
        c.shared_mem = uint32_t(read_deref<uint64_t>(e, 24));
        c.stream = read_deref<uint64_t>(e, 32);
      }
      return e.args[1];
    case ArgShape::LaunchDriver:
      // cuLaunchKernel(f, gx, gy, gz, bx, by | bz, smem, stream, params, extra)
      c.grid = model::Dim3{uint32_t(e.args[1]), uint32_t(e.args[2]), uint32_t(e.args[3])};
      if (e.flags & CW_CALL_HAS_STACK) {
        c.block = model::Dim3{uint32_t(e.args[4]), uint32_t(e.args[5]), uint32_t(e.stack[0])};
        c.shared_mem = uint32_t(e.stack[1]);
      }
      return e.args[0];
    case ArgShape::LaunchDriverEx:
      // CUlaunchConfig { unsigned gridDimX,Y,Z, blockDimX,Y,Z, sharedMemBytes; CUstream hStream; ... }
      if (e.flags & CW_CALL_HAS_DEREF) {
        c.grid = model::Dim3{read_deref<uint32_t>(e, 0), read_deref<uint32_t>(e, 4), read_deref<uint32_t>(e, 8)};
        c.block = model::Dim3{read_deref<uint32_t>(e, 12), read_deref<uint32_t>(e, 16), read_deref<uint32_t>(e, 20)};
        c.shared_mem = read_deref<uint32_t>(e, 24);
        c.stream = read_deref<uint64_t>(e, 32);
      }
      return e.args[1];
    default:
      return 0;  // not a launch: decode() asks only for the four above
  }
}

}  // namespace

void CudaDecoder::decode(const cw_call_event& e, const OpSpec& op, DecodeContext& ctx) {
  model::CudaCall c;
  c.ts_ns = ctx.ts_ns;
  c.dur_ns = int64_t(e.dur_ns);
  c.pid = e.hdr.pid;
  c.tid = e.hdr.tid;
  c.op_id = op.id;
  c.ret = int64_t(int32_t(e.ret));  // cudaError_t / CUresult are 32-bit
  c.stack_id = ctx.stack_id;
  c.flags = e.flags;
  if (has_arg(e, op.stream_arg)) c.stream = arg_or_stack(e, op.stream_arg);
  const uint32_t pid = e.hdr.pid;
  // Where the last launch lies, for the calls that may wait for the GPU.
  if ((op.cls == OpClass::Sync || op.cls == OpClass::Copy) && e.last_launch_ts) {
    // Subtract unsigned: both are raw record fields, and a torn or hostile
    // record must not overflow a signed subtraction. Another thread's launch
    // may return after this call entered, so the difference can be negative.
    c.since_launch_ns = int64_t(e.hdr.ts_ns - e.last_launch_ts);
    c.launch_seq = int64_t(e.launch_count);
  }

  switch (op.shape) {
    case ArgShape::Alloc:
      c.bytes = int64_t(e.args[op.bytes_arg]);  // asked for; a failed call allocated nothing
      if (e.out_value && c.ret == 0) {
        c.addr = e.out_value;
        if (allocs_.size() > kMaxTrackedAllocs) allocs_.clear();
        allocs_[{pid, e.out_value}] = *c.bytes;
      }
      break;
    case ArgShape::Free: {
      if (e.args[0]) c.addr = e.args[0];  // cudaFree(0) frees nothing (it initialises the context)
      auto it = c.ret == 0 ? allocs_.find({pid, e.args[0]}) : allocs_.end();
      if (it != allocs_.end()) {
        c.bytes = it->second;
        allocs_.erase(it);
      }
      break;
    }
    case ArgShape::Copy:
      c.bytes = int64_t(e.args[op.bytes_arg]);
      if (op.fixed_kind >= 0)
        c.kind = op.fixed_kind;
      else if (op.kind_arg >= 0 && e.args[op.kind_arg] <= 4)
        c.kind = int(e.args[op.kind_arg]);
      break;
    case ArgShape::Set: {
      // Elements times their width (cuMemsetD16/D32); a count no memory could
      // hold is a damaged event: no size rather than a wrapped one.
      int64_t bytes = 0;
      if (!__builtin_mul_overflow(int64_t(e.args[op.bytes_arg]), int64_t(op.bytes_scale), &bytes)) c.bytes = bytes;
      break;
    }
    case ArgShape::Register:
      // The caller's own memory, page-locked in place: the address is an
      // argument, and its unregister frees it.
      c.bytes = int64_t(e.args[op.bytes_arg]);
      c.addr = e.args[0];
      if (c.ret == 0) {
        if (allocs_.size() > kMaxTrackedAllocs) allocs_.clear();
        allocs_[{pid, e.args[0]}] = *c.bytes;
      }
      break;
    case ArgShape::LaunchRuntime:
    case ArgShape::LaunchRuntimeEx:
    case ArgShape::LaunchDriver:
    case ArgShape::LaunchDriverEx:
      c.kernel = launch_kernel(pid, op.shape, read_launch(e, op.shape, c));
      break;
    case ArgShape::RegisterFunction:
      // __cudaRegisterFunction(handle, hostFun, deviceFun, deviceName, ...)
      // The name stays in the resolver: PyTorch registers ~21,000 kernels at
      // import, most never launched; naming these rows would fill the
      // kernels dictionary with tens of MB of template names.
      names_.on_register_function(pid, e.args[1], read_process_string(pid, e.args[3]));
      break;
    case ArgShape::ModuleGetFunction:
      if (c.ret == 0) c.kernel = module_function_name(pid, e);
      break;
    case ArgShape::KernelGetFunction:
      if (c.ret == 0) {
        names_.on_kernel_function(pid, e.args[1], e.out_value);
        c.kernel = names_.for_handle(pid, e.out_value);
      }
      break;
    case ArgShape::TensorAlloc:
      // A method returning nothing: the block came back in *devPtr (a call
      // that threw out of memory never reaches its return site: no record).
      c.ret = 0;
      c.bytes = int64_t(e.args[op.bytes_arg]);
      if (e.out_value) {
        c.addr = e.out_value;
        if (tensors_.size() > kMaxTrackedAllocs) tensors_.clear();
        tensors_[{pid, e.out_value}] = *c.bytes;
      }
      break;
    case ArgShape::TensorFree: {
      c.ret = 0;
      // local_raw_delete(void *ptr), the tensor's deleter.
      if (e.args[0]) c.addr = e.args[0];
      // Blocks live inside the segments: their own map, not the driver's.
      if (auto it = tensors_.find({pid, e.args[0]}); it != tensors_.end()) {
        c.bytes = it->second;
        tensors_.erase(it);
      }
      break;
    }
    case ArgShape::None:
    case ArgShape::Stream:
    case ArgShape::Nccl:
    case ArgShape::Verbs:
      break;
  }
  ctx.batch.add(std::move(c));
}

std::string CudaDecoder::module_function_name(uint32_t pid, const cw_call_event& e) {
  // cuModuleGetFunction(CUfunction*, CUmodule, name) / cuLibraryGetKernel(CUkernel*, CUlibrary, name)
  std::string name = read_symbol_name(pid, e.args[2]);
  // Read after the call, a freed temporary's bytes (or a reused
  // buffer's other name) disagree with the name's first bytes read
  // at entry: the entry's then, whole or cut at CW_DEREF_BYTES.
  if (e.flags & CW_CALL_HAS_DEREF) {
    const auto* d = reinterpret_cast<const char*>(e.deref);
    const std::string at_entry(d, strnlen(d, sizeof e.deref));
    if (!at_entry.empty() && is_symbol_text(at_entry) && name.compare(0, at_entry.size(), at_entry) != 0)
      name = at_entry.size() < sizeof e.deref ? at_entry : at_entry + "...";
  }
  names_.on_handle_name(pid, e.out_value, name);
  return names_.for_handle(pid, e.out_value);
}

std::string CudaDecoder::launch_kernel(uint32_t pid, ArgShape shape, uint64_t handle) {
  return shape == ArgShape::LaunchRuntime || shape == ArgShape::LaunchRuntimeEx
             ? names_.for_host_stub(pid, handle)
             : names_.for_handle(pid, handle);
}

void CudaDecoder::forget_process(uint32_t pid) {
  names_.forget_process(pid);
  allocs_.erase(allocs_.lower_bound({pid, 0}), allocs_.upper_bound({pid, UINT64_MAX}));
  tensors_.erase(tensors_.lower_bound({pid, 0}), tensors_.upper_bound({pid, UINT64_MAX}));
}

void register_cuda_decoder(CallDecoderRegistry& reg, std::shared_ptr<CudaDecoder> d) {
  for (ArgShape s : {ArgShape::None, ArgShape::Alloc, ArgShape::Free, ArgShape::Copy, ArgShape::Set, ArgShape::Register,
                     ArgShape::TensorAlloc, ArgShape::TensorFree,
                     ArgShape::Stream, ArgShape::LaunchRuntime, ArgShape::LaunchRuntimeEx,
                     ArgShape::LaunchDriver, ArgShape::LaunchDriverEx, ArgShape::RegisterFunction,
                     ArgShape::ModuleGetFunction, ArgShape::KernelGetFunction})
    reg.add(s, d);
}

}  // namespace causeway::consume
