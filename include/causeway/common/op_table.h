// SPDX-License-Identifier: Apache-2.0
#pragma once
// The one table of every traced library function: its op id (stored in
// traces: never renumber, only append), symbol, layer, attach cookie flags and
// how its raw arguments decode. The BPF side is generic; this table is what a
// probe family *is* (see docs/architecture.md).
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace causeway {

enum class Layer : uint8_t { Runtime, Driver, Nccl, Hip, Verbs, Torch };
std::string_view layer_name(Layer l);

// Which library file a layer's symbols live in (matched on the file name).
enum class LibraryKind : uint8_t { Cudart, Cuda, Nccl, Hip, Verbs, C10Cuda };
std::string_view library_kind_name(LibraryKind k);

// How to turn raw registers/stack/deref bytes into fields.
enum class ArgShape : uint8_t {
  None,              // no fields beyond duration/ret (syncs without a stream)
  Alloc,             // bytes = arg[bytes_arg]; out ptr in out_value
  Free,              // ptr = arg0; bytes from the matching alloc, when seen
  Copy,              // bytes, kind (fixed or from arg[kind_arg]), stream
  Set,               // bytes, stream
  Stream,            // stream = arg[stream_arg] (syncs, graph launch, capture)
  LaunchRuntime,     // cudaLaunchKernel: func, dim3 grid/block in regs, smem+stream on stack
  LaunchRuntimeEx,   // cudaLaunchKernelExC: cudaLaunchConfig_t at arg0
  LaunchDriver,      // cuLaunchKernel: 6 dims in regs+stack, smem, stream on stack
  LaunchDriverEx,    // cuLaunchKernelEx: CUlaunchConfig at arg0
  RegisterFunction,  // __cudaRegisterFunction: host stub -> device name string
  ModuleGetFunction, // cuModuleGetFunction / cuLibraryGetKernel: out handle, name string arg2
  KernelGetFunction, // cuKernelGetFunction: out CUfunction from a CUkernel
  Register,          // cudaHostRegister: addr = arg0, bytes = arg[bytes_arg]
  TensorAlloc,       // a framework's allocation: bytes = arg[bytes_arg], the block at *arg1 (out_value)
  TensorFree,        // its free: addr = arg1 (a C++ method: arg0 is `this`)
  Nccl,              // NCCL: decoded by the nccl family (see nccl_decode)
  Verbs,             // ibverbs: decoded by the verbs family
};

// cudaMemcpyKind values, as CUDA defines them.
enum class CopyKind : int8_t { HtoH = 0, HtoD = 1, DtoH = 2, DtoD = 3, Default = 4 };
std::string_view copy_kind_name(CopyKind k);

// What kind of operation it is, for analysis (independent of layer).
enum class OpClass : uint8_t {
  Launch, Alloc, Free, Copy, Set, Sync, Graph, Capture, Naming,
  Collective, P2P, Group, CommInit, CommEnd, Verbs,
  Pin,     // page-locked host memory: pinned, registered, given back
  Module,  // module / library load and unload (start-up, JIT, teardown)
  Tensor,  // a framework's allocator handing memory to tensors, or taking it back
  Order,   // a stream made to wait for an event on the GPU: the host goes on (not a sync)
};
std::string_view op_class_name(OpClass c);

struct OpSpec {
  uint16_t id;
  std::string_view name;    // the API name users see in SQL
  std::string_view symbol;  // the ELF symbol probed (usually == name)
  Layer layer;
  LibraryKind library;
  ArgShape shape;
  OpClass cls;
  uint64_t cookie_flags;    // CW_COOKIE_* beyond the op id
  int8_t bytes_arg = -1;
  int8_t stream_arg = -1;   // 0..5 registers, 6.. stack words (6 = first stack word)
  int8_t kind_arg = -1;     // Copy: register holding cudaMemcpyKind
  int8_t fixed_kind = -1;   // Copy: a CopyKind implied by the function
  bool in_default_set = true;  // attached unless --probes says otherwise
  uint8_t bytes_scale = 1;     // bytes = arg[bytes_arg] * this (cuMemsetD32 counts words)
};

std::span<const OpSpec> all_ops();

// Which memory an allocation or free is about: device memory is what runs
// out; pinned host memory is not GPU memory; managed memory migrates.
enum class MemoryKind : uint8_t { None, Device, Host, Managed, Any };
MemoryKind memory_kind(const OpSpec& op);
std::string_view memory_kind_name(MemoryKind k);
const OpSpec* find_op(uint16_t id);
const OpSpec* find_op(std::string_view name);

// Op ids by class, e.g. for SQL `op_id IN (...)` in analysis.
std::string op_ids_sql_list(OpClass c);

// Copies that block until done (no stream argument): their success says the
// work queued before them ran; an asynchronous copy's says nothing.
std::string blocking_copy_ids_sql_list();

// A read-back: a blocking copy to the host of at most this many bytes
// (.item(), a scalar cudaMemcpy). It waits for the GPU's queue to drain
// first and moves next to nothing: a synchronisation, not a transfer.
constexpr int64_t kReadbackMaxBytes = 64 << 10;
bool is_readback(const OpSpec& op, int kind, int64_t bytes);
// The same as SQL over cuda_call_events columns (`prefix` is "" or "c.").
std::string readback_sql(const std::string& prefix = "");

}  // namespace causeway
