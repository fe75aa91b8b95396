// SPDX-License-Identifier: Apache-2.0
#include "causeway/common/op_table.h"

#include <array>

#include "causeway/events.h"

namespace causeway {
namespace {

constexpr uint64_t kStack = CW_COOKIE_STACK_ARGS;
// Once per kernel launch: probed only in the launch windows under
// `trace --launch-duty` (the trap pair is the agent's main cost).
constexpr uint64_t kDuty = CW_COOKIE_DUTY;
constexpr uint64_t kLaunch = CW_COOKIE_LAUNCH | kDuty;
constexpr uint64_t kRare = CW_COOKIE_RARE;
constexpr uint64_t kNaming = CW_COOKIE_NAMING;
constexpr uint64_t kOut0 = CW_COOKIE_OUT0;
constexpr uint64_t kKernel1 = CW_COOKIE_KERNEL_ARG1;  // Ex launches: the kernel is arg1
constexpr uint64_t kOut1 = CW_COOKIE_OUT1;
constexpr uint64_t kTransparent = CW_COOKIE_TRANSPARENT;
constexpr uint64_t kVoid = CW_COOKIE_VOID;
// C++ methods that may throw: no uretprobe (its trampoline stops the
// unwinder), the return seen at the caller's return site, or nothing awaited.
constexpr uint64_t kRetSite = CW_COOKIE_RETSITE;
constexpr uint64_t kEntryOnly = CW_COOKIE_ENTRY_ONLY;
constexpr uint64_t deref(int arg) { return uint64_t(arg + 1) << CW_COOKIE_DEREF_SHIFT; }
// Numbered at entry by the communicator in argument `comm` (and, for
// send/recv, the peer in register `peer`): events.h, CW_COOKIE_SEQ_*.
constexpr uint64_t seq(int comm, int peer = -1) {
  return uint64_t(comm + 1) << CW_COOKIE_SEQ_SHIFT | (peer >= 0 ? uint64_t(peer + 1) << CW_COOKIE_PEER_SHIFT : 0);
}
constexpr uint64_t kSeqReset = CW_COOKIE_SEQ_RESET;

using L = Layer;
using K = LibraryKind;
using S = ArgShape;
using C = OpClass;
constexpr int8_t kStack0 = 6;  // stream_arg index of the first stack word

// Op ids are stored in trace files: append only, never renumber or reuse.
// Ranges: 1-63 CUDA runtime, 64-127 and 224-239 CUDA driver, 128-159 NCCL,
// 160-191 HIP, 192-223 verbs, 240-255 frameworks' allocators.
constexpr std::array kOps = {
    // ---- CUDA runtime (libcudart)
    OpSpec{1, "cudaLaunchKernel", "cudaLaunchKernel", L::Runtime, K::Cudart, S::LaunchRuntime, C::Launch, kStack | kLaunch, -1, kStack0 + 1},
    OpSpec{2, "cudaLaunchKernel_ptsz", "cudaLaunchKernel_ptsz", L::Runtime, K::Cudart, S::LaunchRuntime, C::Launch, kStack | kLaunch, -1, kStack0 + 1},
    OpSpec{3, "cudaLaunchKernelExC", "cudaLaunchKernelExC", L::Runtime, K::Cudart, S::LaunchRuntimeEx, C::Launch, deref(0) | kLaunch | kKernel1},
    OpSpec{4, "cudaLaunchKernelExC_ptsz", "cudaLaunchKernelExC_ptsz", L::Runtime, K::Cudart, S::LaunchRuntimeEx, C::Launch, deref(0) | kLaunch | kKernel1},
    OpSpec{5, "cudaMalloc", "cudaMalloc", L::Runtime, K::Cudart, S::Alloc, C::Alloc, kRare | kOut0, 1},
    OpSpec{6, "cudaMallocAsync", "cudaMallocAsync", L::Runtime, K::Cudart, S::Alloc, C::Alloc, kRare | kOut0, 1, 2},
    OpSpec{7, "cudaMallocHost", "cudaMallocHost", L::Runtime, K::Cudart, S::Alloc, C::Pin, kRare | kOut0, 1},
    OpSpec{8, "cudaMallocManaged", "cudaMallocManaged", L::Runtime, K::Cudart, S::Alloc, C::Alloc, kRare | kOut0, 1},
    OpSpec{9, "cudaFree", "cudaFree", L::Runtime, K::Cudart, S::Free, C::Free, kRare},
    OpSpec{10, "cudaFreeAsync", "cudaFreeAsync", L::Runtime, K::Cudart, S::Free, C::Free, kRare, -1, 1},
    OpSpec{11, "cudaFreeHost", "cudaFreeHost", L::Runtime, K::Cudart, S::Free, C::Pin, kRare},
    OpSpec{12, "cudaMemcpy", "cudaMemcpy", L::Runtime, K::Cudart, S::Copy, C::Copy, kRare, 2, -1, 3},
    OpSpec{13, "cudaMemcpyAsync", "cudaMemcpyAsync", L::Runtime, K::Cudart, S::Copy, C::Copy, kRare, 2, 4, 3},
    OpSpec{14, "cudaMemset", "cudaMemset", L::Runtime, K::Cudart, S::Set, C::Set, kRare, 2},
    OpSpec{15, "cudaMemsetAsync", "cudaMemsetAsync", L::Runtime, K::Cudart, S::Set, C::Set, kRare, 2, 3},
    OpSpec{16, "cudaStreamSynchronize", "cudaStreamSynchronize", L::Runtime, K::Cudart, S::Stream, C::Sync, kRare, -1, 0},
    OpSpec{17, "cudaDeviceSynchronize", "cudaDeviceSynchronize", L::Runtime, K::Cudart, S::None, C::Sync, kRare},
    OpSpec{18, "cudaEventSynchronize", "cudaEventSynchronize", L::Runtime, K::Cudart, S::None, C::Sync, kRare},
    // Orders two streams on the GPU and returns at once: no host sync (DDP
    // makes 16 a step, FSDP2 62; read as syncs they were a "storm").
    OpSpec{19, "cudaStreamWaitEvent", "cudaStreamWaitEvent", L::Runtime, K::Cudart, S::Stream, C::Order, kRare, -1, 0},
    OpSpec{20, "cudaStreamBeginCapture", "cudaStreamBeginCapture", L::Runtime, K::Cudart, S::Stream, C::Capture, kRare, -1, 0},
    OpSpec{21, "cudaStreamEndCapture", "cudaStreamEndCapture", L::Runtime, K::Cudart, S::Stream, C::Capture, kRare, -1, 0},
    OpSpec{22, "cudaGraphInstantiate", "cudaGraphInstantiate", L::Runtime, K::Cudart, S::None, C::Capture, kRare},
    OpSpec{23, "cudaGraphLaunch", "cudaGraphLaunch", L::Runtime, K::Cudart, S::Stream, C::Graph, kRare, -1, 1},
    OpSpec{24, "__cudaRegisterFunction", "__cudaRegisterFunction", L::Runtime, K::Cudart, S::RegisterFunction, C::Naming, kNaming},
    OpSpec{25, "cudaStreamSynchronize_ptsz", "cudaStreamSynchronize_ptsz", L::Runtime, K::Cudart, S::Stream, C::Sync, kRare, -1, 0},
    OpSpec{26, "cudaMemcpyAsync_ptsz", "cudaMemcpyAsync_ptsz", L::Runtime, K::Cudart, S::Copy, C::Copy, kRare, 2, 4, 3},
    OpSpec{27, "cudaGraphLaunch_ptsz", "cudaGraphLaunch_ptsz", L::Runtime, K::Cudart, S::Stream, C::Graph, kRare, -1, 1},
    // Every way a graph is instantiated (PyTorch's CUDAGraph uses WithFlags).
    OpSpec{28, "cudaGraphInstantiateWithFlags", "cudaGraphInstantiateWithFlags", L::Runtime, K::Cudart, S::None, C::Capture, kRare},
    OpSpec{29, "cudaGraphInstantiateWithParams", "cudaGraphInstantiateWithParams", L::Runtime, K::Cudart, S::None, C::Capture, kRare},
    OpSpec{30, "cudaStreamBeginCapture_ptsz", "cudaStreamBeginCapture_ptsz", L::Runtime, K::Cudart, S::Stream, C::Capture, kRare, -1, 0},
    OpSpec{31, "cudaStreamEndCapture_ptsz", "cudaStreamEndCapture_ptsz", L::Runtime, K::Cudart, S::Stream, C::Capture, kRare, -1, 0},
    // Stream-ordered pools: memory a pool hands out is held by the process.
    OpSpec{32, "cudaMallocFromPoolAsync", "cudaMallocFromPoolAsync", L::Runtime, K::Cudart, S::Alloc, C::Alloc, kRare | kOut0, 1, 3},
    // Page-locked host memory: every way to pin it or give it back (pinning
    // per step is a host-side cost of its own; docs/explain.md).
    OpSpec{33, "cudaHostAlloc", "cudaHostAlloc", L::Runtime, K::Cudart, S::Alloc, C::Pin, kRare | kOut0, 1},
    OpSpec{34, "cudaHostRegister", "cudaHostRegister", L::Runtime, K::Cudart, S::Register, C::Pin, kRare, 1},
    OpSpec{35, "cudaHostUnregister", "cudaHostUnregister", L::Runtime, K::Cudart, S::Free, C::Pin, kRare},
    OpSpec{36, "cudaLaunchCooperativeKernel", "cudaLaunchCooperativeKernel", L::Runtime, K::Cudart, S::LaunchRuntime, C::Launch, kStack | kLaunch, -1, kStack0 + 1},

    // ---- CUDA driver (libcuda)
    OpSpec{64, "cuLaunchKernel", "cuLaunchKernel", L::Driver, K::Cuda, S::LaunchDriver, C::Launch, kStack | kLaunch, -1, kStack0 + 2},
    OpSpec{65, "cuLaunchKernel_ptsz", "cuLaunchKernel_ptsz", L::Driver, K::Cuda, S::LaunchDriver, C::Launch, kStack | kLaunch, -1, kStack0 + 2},
    OpSpec{66, "cuLaunchKernelEx", "cuLaunchKernelEx", L::Driver, K::Cuda, S::LaunchDriverEx, C::Launch, deref(0) | kLaunch | kKernel1},
    OpSpec{67, "cuLaunchKernelEx_ptsz", "cuLaunchKernelEx_ptsz", L::Driver, K::Cuda, S::LaunchDriverEx, C::Launch, deref(0) | kLaunch | kKernel1},
    OpSpec{68, "cuMemAlloc", "cuMemAlloc_v2", L::Driver, K::Cuda, S::Alloc, C::Alloc, kRare | kOut0, 1},
    OpSpec{69, "cuMemAllocAsync", "cuMemAllocAsync", L::Driver, K::Cuda, S::Alloc, C::Alloc, kRare | kOut0, 1, 2},
    OpSpec{70, "cuMemFree", "cuMemFree_v2", L::Driver, K::Cuda, S::Free, C::Free, kRare},
    OpSpec{71, "cuMemcpyHtoD", "cuMemcpyHtoD_v2", L::Driver, K::Cuda, S::Copy, C::Copy, kRare, 2, -1, -1, int8_t(CopyKind::HtoD)},
    OpSpec{72, "cuMemcpyDtoH", "cuMemcpyDtoH_v2", L::Driver, K::Cuda, S::Copy, C::Copy, kRare, 2, -1, -1, int8_t(CopyKind::DtoH)},
    OpSpec{73, "cuMemcpyDtoD", "cuMemcpyDtoD_v2", L::Driver, K::Cuda, S::Copy, C::Copy, kRare, 2, -1, -1, int8_t(CopyKind::DtoD)},
    OpSpec{74, "cuMemcpyHtoDAsync", "cuMemcpyHtoDAsync_v2", L::Driver, K::Cuda, S::Copy, C::Copy, kRare, 2, 3, -1, int8_t(CopyKind::HtoD)},
    OpSpec{75, "cuMemcpyDtoHAsync", "cuMemcpyDtoHAsync_v2", L::Driver, K::Cuda, S::Copy, C::Copy, kRare, 2, 3, -1, int8_t(CopyKind::DtoH)},
    OpSpec{76, "cuMemcpyDtoDAsync", "cuMemcpyDtoDAsync_v2", L::Driver, K::Cuda, S::Copy, C::Copy, kRare, 2, 3, -1, int8_t(CopyKind::DtoD)},
    OpSpec{77, "cuMemcpy", "cuMemcpy", L::Driver, K::Cuda, S::Copy, C::Copy, kRare, 2, -1, -1, int8_t(CopyKind::Default)},
    OpSpec{78, "cuMemcpyAsync", "cuMemcpyAsync", L::Driver, K::Cuda, S::Copy, C::Copy, kRare, 2, 3, -1, int8_t(CopyKind::Default)},
    OpSpec{79, "cuCtxSynchronize", "cuCtxSynchronize", L::Driver, K::Cuda, S::None, C::Sync, kRare},
    OpSpec{80, "cuStreamSynchronize", "cuStreamSynchronize", L::Driver, K::Cuda, S::Stream, C::Sync, kRare, -1, 0},
    OpSpec{81, "cuGraphLaunch", "cuGraphLaunch", L::Driver, K::Cuda, S::Stream, C::Graph, kRare, -1, 1},
    // Once per kernel and process, just before its first launch (lazy
    // loading): with a stack, they give a new kernel's line when its launches
    // are only sampled or windowed (a fault's likeliest culprit).
    // The name's first bytes are read at entry (deref(2)): a JIT's name
    // (CuPy's RawKernel, nvrtc) is a temporary freed once the call returns.
    OpSpec{82, "cuModuleGetFunction", "cuModuleGetFunction", L::Driver, K::Cuda, S::ModuleGetFunction, C::Naming, kNaming | kOut0 | kRare | deref(2)},
    OpSpec{83, "cuLibraryGetKernel", "cuLibraryGetKernel", L::Driver, K::Cuda, S::ModuleGetFunction, C::Naming, kNaming | kOut0 | kRare | deref(2)},
    OpSpec{84, "cuKernelGetFunction", "cuKernelGetFunction", L::Driver, K::Cuda, S::KernelGetFunction, C::Naming, kNaming | kOut0 | kDuty},  // cuBLAS: one per GEMM
    // Graph capture at the driver (code that skips the runtime, e.g. Triton's launcher).
    OpSpec{85, "cuStreamBeginCapture", "cuStreamBeginCapture_v2", L::Driver, K::Cuda, S::Stream, C::Capture, kRare, -1, 0},
    OpSpec{86, "cuStreamEndCapture", "cuStreamEndCapture", L::Driver, K::Cuda, S::Stream, C::Capture, kRare, -1, 0},
    OpSpec{87, "cuGraphInstantiateWithFlags", "cuGraphInstantiateWithFlags", L::Driver, K::Cuda, S::None, C::Capture, kRare},
    OpSpec{88, "cuGraphInstantiateWithParams", "cuGraphInstantiateWithParams", L::Driver, K::Cuda, S::None, C::Capture, kRare},
    // Every other way the driver hands out or takes back memory. cuMemCreate /
    // cuMemRelease are physical allocations by handle (PyTorch's expandable
    // segments map them into reserved address space with cuMemMap).
    OpSpec{89, "cuMemFreeAsync", "cuMemFreeAsync", L::Driver, K::Cuda, S::Free, C::Free, kRare, -1, 1},
    OpSpec{90, "cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync", L::Driver, K::Cuda, S::Alloc, C::Alloc, kRare | kOut0, 1, 3},
    OpSpec{91, "cuMemCreate", "cuMemCreate", L::Driver, K::Cuda, S::Alloc, C::Alloc, kRare | kOut0, 1},
    OpSpec{92, "cuMemRelease", "cuMemRelease", L::Driver, K::Cuda, S::Free, C::Free, kRare},
    OpSpec{93, "cuMemAllocManaged", "cuMemAllocManaged", L::Driver, K::Cuda, S::Alloc, C::Alloc, kRare | kOut0, 1},
    OpSpec{94, "cuMemAllocHost", "cuMemAllocHost_v2", L::Driver, K::Cuda, S::Alloc, C::Pin, kRare | kOut0, 1},
    OpSpec{95, "cuMemFreeHost", "cuMemFreeHost", L::Driver, K::Cuda, S::Free, C::Pin, kRare},
    // What a runtime linked statically (nvcc's default, CuPy) reaches for,
    // found by cuGetProcAddress: the per-thread-default-stream variants
    // (_ptsz, _ptds) and CUDA 13's cuCtxSynchronize_v2 are entry points of
    // their own. With no runtime symbols to probe in such a process, these
    // are its view: the same op classes, so the account and rules hold.
    OpSpec{96, "cuCtxSynchronize_v2", "cuCtxSynchronize_v2", L::Driver, K::Cuda, S::None, C::Sync, kRare},
    OpSpec{97, "cuEventSynchronize", "cuEventSynchronize", L::Driver, K::Cuda, S::None, C::Sync, kRare},
    OpSpec{98, "cuStreamSynchronize_ptsz", "cuStreamSynchronize_ptsz", L::Driver, K::Cuda, S::Stream, C::Sync, kRare, -1, 0},
    OpSpec{99, "cuMemcpy_ptds", "cuMemcpy_ptds", L::Driver, K::Cuda, S::Copy, C::Copy, kRare, 2, -1, -1, int8_t(CopyKind::Default)},
    OpSpec{100, "cuMemcpyAsync_ptsz", "cuMemcpyAsync_ptsz", L::Driver, K::Cuda, S::Copy, C::Copy, kRare, 2, 3, -1, int8_t(CopyKind::Default)},
    OpSpec{101, "cuMemcpyHtoD_ptds", "cuMemcpyHtoD_v2_ptds", L::Driver, K::Cuda, S::Copy, C::Copy, kRare, 2, -1, -1, int8_t(CopyKind::HtoD)},
    OpSpec{102, "cuMemcpyDtoH_ptds", "cuMemcpyDtoH_v2_ptds", L::Driver, K::Cuda, S::Copy, C::Copy, kRare, 2, -1, -1, int8_t(CopyKind::DtoH)},
    OpSpec{103, "cuMemcpyDtoD_ptds", "cuMemcpyDtoD_v2_ptds", L::Driver, K::Cuda, S::Copy, C::Copy, kRare, 2, -1, -1, int8_t(CopyKind::DtoD)},
    OpSpec{104, "cuMemcpyHtoDAsync_ptsz", "cuMemcpyHtoDAsync_v2_ptsz", L::Driver, K::Cuda, S::Copy, C::Copy, kRare, 2, 3, -1, int8_t(CopyKind::HtoD)},
    OpSpec{105, "cuMemcpyDtoHAsync_ptsz", "cuMemcpyDtoHAsync_v2_ptsz", L::Driver, K::Cuda, S::Copy, C::Copy, kRare, 2, 3, -1, int8_t(CopyKind::DtoH)},
    OpSpec{106, "cuMemcpyDtoDAsync_ptsz", "cuMemcpyDtoDAsync_v2_ptsz", L::Driver, K::Cuda, S::Copy, C::Copy, kRare, 2, 3, -1, int8_t(CopyKind::DtoD)},
    OpSpec{107, "cuMemsetD8", "cuMemsetD8_v2", L::Driver, K::Cuda, S::Set, C::Set, kRare, 2},
    OpSpec{108, "cuMemsetD8Async", "cuMemsetD8Async", L::Driver, K::Cuda, S::Set, C::Set, kRare, 2, 3},
    OpSpec{109, "cuMemsetD32", "cuMemsetD32_v2", L::Driver, K::Cuda, S::Set, C::Set, kRare, 2, -1, -1, -1, true, 4},
    OpSpec{110, "cuMemsetD32Async", "cuMemsetD32Async", L::Driver, K::Cuda, S::Set, C::Set, kRare, 2, 3, -1, -1, true, 4},
    OpSpec{111, "cuMemAllocAsync_ptsz", "cuMemAllocAsync_ptsz", L::Driver, K::Cuda, S::Alloc, C::Alloc, kRare | kOut0, 1, 2},
    OpSpec{112, "cuMemFreeAsync_ptsz", "cuMemFreeAsync_ptsz", L::Driver, K::Cuda, S::Free, C::Free, kRare, -1, 1},
    OpSpec{113, "cuGraphLaunch_ptsz", "cuGraphLaunch_ptsz", L::Driver, K::Cuda, S::Stream, C::Graph, kRare, -1, 1},
    OpSpec{114, "cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel", L::Driver, K::Cuda, S::LaunchDriver, C::Launch, kStack | kLaunch, -1, kStack0 + 2},
    // Modules: loaded when a kernel is first needed (lazy loading, a JIT
    // compile), unloaded at teardown, where a fault's sticky error shows.
    OpSpec{115, "cuModuleLoadData", "cuModuleLoadData", L::Driver, K::Cuda, S::None, C::Module, kRare},
    OpSpec{116, "cuModuleLoadDataEx", "cuModuleLoadDataEx", L::Driver, K::Cuda, S::None, C::Module, kRare},
    OpSpec{117, "cuModuleLoadFatBinary", "cuModuleLoadFatBinary", L::Driver, K::Cuda, S::None, C::Module, kRare},
    OpSpec{118, "cuModuleUnload", "cuModuleUnload", L::Driver, K::Cuda, S::None, C::Module, kRare},
    OpSpec{119, "cuLibraryLoadData", "cuLibraryLoadData", L::Driver, K::Cuda, S::None, C::Module, kRare},
    OpSpec{120, "cuLibraryUnload", "cuLibraryUnload", L::Driver, K::Cuda, S::None, C::Module, kRare},
    OpSpec{121, "cuMemHostAlloc", "cuMemHostAlloc", L::Driver, K::Cuda, S::Alloc, C::Pin, kRare | kOut0, 1},
    OpSpec{122, "cuMemHostRegister", "cuMemHostRegister_v2", L::Driver, K::Cuda, S::Register, C::Pin, kRare, 1},
    OpSpec{123, "cuMemHostUnregister", "cuMemHostUnregister", L::Driver, K::Cuda, S::Free, C::Pin, kRare},
    OpSpec{124, "cuModuleLoad", "cuModuleLoad", L::Driver, K::Cuda, S::None, C::Module, kRare},
    OpSpec{125, "cuLaunchCooperativeKernel_ptsz", "cuLaunchCooperativeKernel_ptsz", L::Driver, K::Cuda, S::LaunchDriver, C::Launch, kStack | kLaunch, -1, kStack0 + 2},
    OpSpec{126, "cuMemsetD8Async_ptsz", "cuMemsetD8Async_ptsz", L::Driver, K::Cuda, S::Set, C::Set, kRare, 2, 3},
    OpSpec{127, "cuMemsetD32Async_ptsz", "cuMemsetD32Async_ptsz", L::Driver, K::Cuda, S::Set, C::Set, kRare, 2, 3, -1, -1, true, 4},

    // ---- NCCL (libnccl.so.2, or NCCL linked into libtorch_cuda.so). ncclX and
    // pncclX are aliases at one address: only ncclX is attached. The nccl
    // decoder knows each function's argument layout; stream_arg documents it.
    OpSpec{128, "ncclAllReduce", "ncclAllReduce", L::Nccl, K::Nccl, S::Nccl, C::Collective, kStack | kRare | seq(5), -1, kStack0},
    OpSpec{129, "ncclAllGather", "ncclAllGather", L::Nccl, K::Nccl, S::Nccl, C::Collective, kRare | seq(4), -1, 5},
    OpSpec{130, "ncclReduceScatter", "ncclReduceScatter", L::Nccl, K::Nccl, S::Nccl, C::Collective, kStack | kRare | seq(5), -1, kStack0},
    OpSpec{131, "ncclBroadcast", "ncclBroadcast", L::Nccl, K::Nccl, S::Nccl, C::Collective, kStack | kRare | seq(5), -1, kStack0},
    OpSpec{132, "ncclBcast", "ncclBcast", L::Nccl, K::Nccl, S::Nccl, C::Collective, kRare | seq(4), -1, 5},
    OpSpec{133, "ncclReduce", "ncclReduce", L::Nccl, K::Nccl, S::Nccl, C::Collective, kStack | kRare | seq(kStack0), -1, kStack0 + 1},
    OpSpec{134, "ncclSend", "ncclSend", L::Nccl, K::Nccl, S::Nccl, C::P2P, kRare | seq(4, 3), -1, 5},
    OpSpec{135, "ncclRecv", "ncclRecv", L::Nccl, K::Nccl, S::Nccl, C::P2P, kRare | seq(4, 3), -1, 5},
    OpSpec{136, "ncclGroupStart", "ncclGroupStart", L::Nccl, K::Nccl, S::Nccl, C::Group, 0},
    OpSpec{137, "ncclGroupEnd", "ncclGroupEnd", L::Nccl, K::Nccl, S::Nccl, C::Group, 0},
    // The ncclUniqueId (128 B by value) goes on the stack and takes no
    // register: rdi=comm*, rsi=nranks, rdx=rank. Its hash names the
    // communicator on every rank; *comm at return is the handle.
    OpSpec{138, "ncclCommInitRank", "ncclCommInitRank", L::Nccl, K::Nccl, S::Nccl, C::CommInit, kRare | kOut0 | CW_COOKIE_HASH_STACK},
    OpSpec{139, "ncclCommInitRankConfig", "ncclCommInitRankConfig", L::Nccl, K::Nccl, S::Nccl, C::CommInit, kRare | kOut0 | CW_COOKIE_HASH_STACK},
    OpSpec{140, "ncclCommInitAll", "ncclCommInitAll", L::Nccl, K::Nccl, S::Nccl, C::CommInit, kRare | kOut0},
    OpSpec{141, "ncclCommSplit", "ncclCommSplit", L::Nccl, K::Nccl, S::Nccl, C::CommInit, kRare},
    OpSpec{142, "ncclCommDestroy", "ncclCommDestroy", L::Nccl, K::Nccl, S::Nccl, C::CommEnd, kRare | kSeqReset},
    OpSpec{143, "ncclCommAbort", "ncclCommAbort", L::Nccl, K::Nccl, S::Nccl, C::CommEnd, kRare | kSeqReset},

    // ---- HIP (libamdhip64): same ABIs as their CUDA twins, so the same shapes;
    // hipMemcpyKind has cudaMemcpyKind's values.
    OpSpec{160, "hipLaunchKernel", "hipLaunchKernel", L::Hip, K::Hip, S::LaunchRuntime, C::Launch, kStack | kLaunch, -1, kStack0 + 1},
    OpSpec{161, "hipModuleLaunchKernel", "hipModuleLaunchKernel", L::Hip, K::Hip, S::LaunchDriver, C::Launch, kStack | kLaunch, -1, kStack0 + 2},
    OpSpec{162, "hipMalloc", "hipMalloc", L::Hip, K::Hip, S::Alloc, C::Alloc, kRare | kOut0, 1},
    OpSpec{163, "hipFree", "hipFree", L::Hip, K::Hip, S::Free, C::Free, kRare},
    OpSpec{164, "hipMemcpy", "hipMemcpy", L::Hip, K::Hip, S::Copy, C::Copy, kRare, 2, -1, 3},
    OpSpec{165, "hipMemcpyAsync", "hipMemcpyAsync", L::Hip, K::Hip, S::Copy, C::Copy, kRare, 2, 4, 3},
    OpSpec{166, "hipMemset", "hipMemset", L::Hip, K::Hip, S::Set, C::Set, kRare, 2},
    OpSpec{167, "hipMemsetAsync", "hipMemsetAsync", L::Hip, K::Hip, S::Set, C::Set, kRare, 2, 3},
    OpSpec{168, "hipDeviceSynchronize", "hipDeviceSynchronize", L::Hip, K::Hip, S::None, C::Sync, kRare},
    OpSpec{169, "hipStreamSynchronize", "hipStreamSynchronize", L::Hip, K::Hip, S::Stream, C::Sync, kRare, -1, 0},
    OpSpec{170, "hipGraphLaunch", "hipGraphLaunch", L::Hip, K::Hip, S::Stream, C::Graph, kRare, -1, 1},
    OpSpec{171, "hipMallocAsync", "hipMallocAsync", L::Hip, K::Hip, S::Alloc, C::Alloc, kRare | kOut0, 1, 2},
    OpSpec{172, "hipFreeAsync", "hipFreeAsync", L::Hip, K::Hip, S::Free, C::Free, kRare, -1, 1},
    OpSpec{173, "hipMallocManaged", "hipMallocManaged", L::Hip, K::Hip, S::Alloc, C::Alloc, kRare | kOut0, 1},
    OpSpec{174, "hipHostMalloc", "hipHostMalloc", L::Hip, K::Hip, S::Alloc, C::Pin, kRare | kOut0, 1},
    OpSpec{175, "hipHostFree", "hipHostFree", L::Hip, K::Hip, S::Free, C::Pin, kRare},

    // ---- ibverbs (libibverbs.so.1). Without an extra out-parameter read, the
    // event type of ibv_get_async_event is taken from ibv_ack_async_event (every
    // event must be acked), whose argument is the filled-in event.
    OpSpec{192, "ibv_get_async_event", "ibv_get_async_event", L::Verbs, K::Verbs, S::Verbs, C::Verbs, 0},
    OpSpec{193, "ibv_ack_async_event", "ibv_ack_async_event", L::Verbs, K::Verbs, S::Verbs, C::Verbs, deref(0)},
    OpSpec{194, "ibv_modify_qp", "ibv_modify_qp", L::Verbs, K::Verbs, S::Verbs, C::Verbs, deref(1)},
    OpSpec{195, "ibv_create_qp", "ibv_create_qp", L::Verbs, K::Verbs, S::Verbs, C::Verbs, deref(1) | CW_COOKIE_RET_PTR},
    OpSpec{196, "ibv_destroy_qp", "ibv_destroy_qp", L::Verbs, K::Verbs, S::Verbs, C::Verbs, deref(0)},

    // ---- CUDA driver, continued (64-127 is full)
    OpSpec{224, "cuMemAllocFromPoolAsync_ptsz", "cuMemAllocFromPoolAsync_ptsz", L::Driver, K::Cuda, S::Alloc, C::Alloc, kRare | kOut0, 1, 3},
    OpSpec{225, "cuLibraryLoadFromFile", "cuLibraryLoadFromFile", L::Driver, K::Cuda, S::None, C::Module, kRare},
    OpSpec{226, "cuStreamBeginCapture_ptsz", "cuStreamBeginCapture_v2_ptsz", L::Driver, K::Cuda, S::Stream, C::Capture, kRare, -1, 0},
    OpSpec{227, "cuStreamEndCapture_ptsz", "cuStreamEndCapture_ptsz", L::Driver, K::Cuda, S::Stream, C::Capture, kRare, -1, 0},

    // ---- PyTorch's CUDA caching allocator (libc10_cuda.so): every tensor's
    // block, handed out or taken back, so that memory is known by the line
    // that keeps a tensor, not only by the segments the pool asked the driver
    // for. PyTorch marks both with USDT probes (pytorch:malloc once the block
    // is handed out, pytorch:free in the tensor's deleter): those are used
    // where the file has them (bpf/libcall.bpf.c cw_torch_malloc/free fill
    // these ops' argument layout), else these symbols (local, in .symtab).
    // Hundreds a step: probed in the launch windows, as launches are
    // (--launch-duty; exact with `always`). Transparent: the cudaMalloc a
    // tensor's allocation makes to grow the pool is recorded as itself. Both
    // throw (OutOfMemoryError, an invalid pointer): malloc's return is probed
    // at its callers' return sites, the deleter is recorded at entry.
    // docs/memory.md.
    OpSpec{240, "CachingAllocator::malloc",
           "_ZN3c104cuda20CUDACachingAllocator6Native22NativeCachingAllocator6mallocEPPvamP11CUstream_st",
           L::Torch, K::C10Cuda, S::TensorAlloc, C::Tensor, kRare | kDuty | kOut1 | kTransparent | kVoid | kRetSite, 3, 4},
    OpSpec{241, "CachingAllocator::free", "_ZN3c104cuda20CUDACachingAllocator6NativeL16local_raw_deleteEPv",
           L::Torch, K::C10Cuda, S::TensorFree, C::Tensor, kDuty | kVoid | kEntryOnly},
};

}  // namespace

std::span<const OpSpec> all_ops() { return kOps; }

const OpSpec* find_op(uint16_t id) {
  for (const auto& op : kOps)
    if (op.id == id) return &op;
  return nullptr;
}

const OpSpec* find_op(std::string_view name) {
  for (const auto& op : kOps)
    if (op.name == name) return &op;
  return nullptr;
}

std::string op_ids_sql_list(OpClass c) {
  std::string out;
  for (const auto& op : kOps) {
    if (op.cls != c) continue;
    if (!out.empty()) out += ',';
    out += std::to_string(op.id);
  }
  return out.empty() ? "-1" : out;
}

bool is_readback(const OpSpec& op, int kind, int64_t bytes) {
  // A copy without a stream argument blocks until it is done.
  return op.cls == OpClass::Copy && op.stream_arg < 0 && kind == int(CopyKind::DtoH) && bytes >= 0 &&
         bytes <= kReadbackMaxBytes;
}

std::string blocking_copy_ids_sql_list() {
  std::string ids;
  for (const auto& op : kOps)
    if (op.cls == OpClass::Copy && op.stream_arg < 0) ids += (ids.empty() ? "" : ",") + std::to_string(op.id);
  return ids.empty() ? "-1" : ids;
}

std::string readback_sql(const std::string& prefix) {
  return "(" + prefix + "op_id IN (" + blocking_copy_ids_sql_list() + ") AND " + prefix +
         "kind = " + std::to_string(int(CopyKind::DtoH)) + " AND coalesce(" + prefix + "bytes, -1) BETWEEN 0 AND " +
         std::to_string(kReadbackMaxBytes) + ")";
}

MemoryKind memory_kind(const OpSpec& op) {
  if (op.cls != OpClass::Alloc && op.cls != OpClass::Free && op.cls != OpClass::Pin) return MemoryKind::None;
  switch (op.id) {
    case 7: case 11: case 94: case 95: case 174: case 175: case 33: case 34: case 35: case 121: case 122: case 123:
      return MemoryKind::Host;
    case 8: case 93: case 173: return MemoryKind::Managed;
    // cudaFree, cuMemFree and hipFree take device or managed memory: the
    // allocation they free says which.
    case 9: case 10: case 70: case 89: case 163: case 172: return MemoryKind::Any;
    default: return MemoryKind::Device;
  }
}

std::string_view memory_kind_name(MemoryKind k) {
  switch (k) {
    case MemoryKind::None: return "";
    case MemoryKind::Device: return "device";
    case MemoryKind::Host: return "host";
    case MemoryKind::Managed: return "managed";
    case MemoryKind::Any: return "any";
  }
  return "?";
}

std::string_view layer_name(Layer l) {
  switch (l) {
    case Layer::Runtime: return "runtime";
    case Layer::Driver: return "driver";
    case Layer::Nccl: return "nccl";
    case Layer::Hip: return "hip";
    case Layer::Verbs: return "verbs";
    case Layer::Torch: return "torch";
  }
  return "?";
}

std::string_view library_kind_name(LibraryKind k) {
  switch (k) {
    case LibraryKind::Cudart: return "libcudart";
    case LibraryKind::Cuda: return "libcuda";
    case LibraryKind::Nccl: return "libnccl";
    case LibraryKind::Hip: return "libamdhip64";
    case LibraryKind::Verbs: return "libibverbs";
    case LibraryKind::C10Cuda: return "libc10_cuda";
  }
  return "?";
}

std::string_view copy_kind_name(CopyKind k) {
  switch (k) {
    case CopyKind::HtoH: return "HtoH";
    case CopyKind::HtoD: return "HtoD";
    case CopyKind::DtoH: return "DtoH";
    case CopyKind::DtoD: return "DtoD";
    case CopyKind::Default: return "default";
  }
  return "?";
}

std::string_view op_class_name(OpClass c) {
  switch (c) {
    case OpClass::Launch: return "launch";
    case OpClass::Alloc: return "alloc";
    case OpClass::Free: return "free";
    case OpClass::Copy: return "copy";
    case OpClass::Set: return "set";
    case OpClass::Sync: return "sync";
    case OpClass::Graph: return "graph";
    case OpClass::Capture: return "capture";
    case OpClass::Naming: return "naming";
    case OpClass::Collective: return "collective";
    case OpClass::P2P: return "p2p";
    case OpClass::Group: return "group";
    case OpClass::CommInit: return "comm_init";
    case OpClass::CommEnd: return "comm_end";
    case OpClass::Verbs: return "verbs";
    case OpClass::Pin: return "pin";
    case OpClass::Module: return "module";
    case OpClass::Tensor: return "tensor";
    case OpClass::Order: return "order";
  }
  return "?";
}

}  // namespace causeway
