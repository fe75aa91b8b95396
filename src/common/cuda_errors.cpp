// SPDX-License-Identifier: Apache-2.0
// Values from CUDA 13's driver_types.h (cudaError_t) and cuda.h (CUresult),
// HIP's hip_runtime_api.h (hipError_t, which reuses CUDA's numbers) and
// nccl.h (ncclResult_t).
#include "causeway/common/cuda_errors.h"

#include <array>

namespace causeway {
namespace {

using K = ErrorKind;

struct Entry {
  int code;
  const char* runtime;  // cudaError_t name
  const char* driver;   // CUresult name
  const char* hip;      // hipError_t name (nullptr: HIP has no such code)
  const char* meaning;
  K kind;
  const char* fix;
};

constexpr const char* kDriverFix =
    "install an NVIDIA driver that supports this CUDA runtime (CUDA 13 needs driver >= 580, CUDA 12 >= 525) "
    "and check `nvidia-smi`; in a container, run it with the GPUs (--gpus all, the NVIDIA container toolkit)";
constexpr const char* kStickyFix =
    "a kernel faulted: the failing sync only reports it. Rerun with CUDA_LAUNCH_BLOCKING=1 (or "
    "compute-sanitizer) to stop at the faulting kernel; check its indices against its buffer sizes";

constexpr std::array kEntries = {
    Entry{1, "cudaErrorInvalidValue", "CUDA_ERROR_INVALID_VALUE", "hipErrorInvalidValue",
          "an argument is out of range", K::Usage, "check the arguments of the failing call at the line shown"},
    Entry{2, "cudaErrorMemoryAllocation", "CUDA_ERROR_OUT_OF_MEMORY", "hipErrorOutOfMemory",
          "out of device memory", K::OutOfMemory,
          "free what the largest holders keep, a smaller batch, activation checkpointing"},
    Entry{3, "cudaErrorInitializationError", "CUDA_ERROR_NOT_INITIALIZED", "hipErrorNotInitialized",
          "the CUDA driver could not be initialised", K::NoDriver, kDriverFix},
    Entry{4, "cudaErrorCudartUnloading", "CUDA_ERROR_DEINITIALIZED", "hipErrorDeinitialized",
          "called while the runtime unloads (at process exit)", K::Shutdown,
          "harmless at exit; free GPU memory before interpreter shutdown to silence it"},
    Entry{9, "cudaErrorInvalidConfiguration", nullptr, "hipErrorInvalidConfiguration",
          "launch configuration invalid (grid, block or shared memory)", K::Launch,
          "the kernel's block size or dynamic shared memory exceeds the device limit"},
    Entry{17, "cudaErrorInvalidDevicePointer", nullptr, "hipErrorInvalidDevicePointer",
          "not a device pointer", K::Usage, "the pointer was freed already or belongs to another device"},
    Entry{34, "cudaErrorStubLibrary", "CUDA_ERROR_STUB_LIBRARY", nullptr,
          "the CUDA stub library was loaded instead of the driver", K::NoDriver,
          "remove the toolkit's stubs/ directory from LD_LIBRARY_PATH so the driver's libcuda.so.1 loads"},
    Entry{35, "cudaErrorInsufficientDriver", nullptr, "hipErrorInsufficientDriver",
          "no NVIDIA driver, or one older than this CUDA runtime", K::NoDriver, kDriverFix},
    Entry{36, "cudaErrorCallRequiresNewerDriver", "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER", nullptr,
          "this call needs a newer driver", K::NoDriver, kDriverFix},
    Entry{46, "cudaErrorDevicesUnavailable", "CUDA_ERROR_DEVICE_UNAVAILABLE", nullptr,
          "the GPU is busy or unavailable (exclusive-process mode, or held by another process)", K::NoDriver,
          "check `nvidia-smi -q -d COMPUTE` for exclusive mode and which process holds the GPU"},
    Entry{98, "cudaErrorInvalidDeviceFunction", nullptr, "hipErrorInvalidDeviceFunction",
          "the kernel is not compiled for this GPU", K::Launch,
          "rebuild for this GPU's architecture (TORCH_CUDA_ARCH_LIST, -gencode)"},
    Entry{100, "cudaErrorNoDevice", "CUDA_ERROR_NO_DEVICE", "hipErrorNoDevice", "no CUDA-capable GPU is visible",
          K::NoDriver, "check CUDA_VISIBLE_DEVICES and that the container sees the GPUs (`nvidia-smi`)"},
    Entry{101, "cudaErrorInvalidDevice", "CUDA_ERROR_INVALID_DEVICE", "hipErrorInvalidDevice",
          "no such device ordinal", K::Usage, "the device index exceeds the visible GPUs (CUDA_VISIBLE_DEVICES)"},
    Entry{200, "cudaErrorInvalidKernelImage", "CUDA_ERROR_INVALID_IMAGE", "hipErrorInvalidImage",
          "the kernel image is invalid", K::Launch, "rebuild the extension for this CUDA version"},
    Entry{201, "cudaErrorDeviceUninitialized", "CUDA_ERROR_INVALID_CONTEXT", "hipErrorInvalidContext",
          "no valid context (often after a fork: CUDA does not survive fork)", K::Usage,
          "use the spawn start method for workers that touch CUDA (multiprocessing.set_start_method('spawn'))"},
    Entry{209, "cudaErrorNoKernelImageForDevice", "CUDA_ERROR_NO_BINARY_FOR_GPU", "hipErrorNoBinaryForGpu",
          "no kernel image for this GPU's architecture", K::Launch,
          "install a build that includes this GPU's architecture (sm_XX) or PTX for it"},
    Entry{214, "cudaErrorECCUncorrectable", "CUDA_ERROR_ECC_UNCORRECTABLE", "hipErrorECCNotCorrectable",
          "an uncorrectable ECC error: GPU memory is faulty", K::Hardware,
          "drain the node and have the GPU checked (nvidia-smi -q -d ECC, page retirement/row remapping)"},
    Entry{220, "cudaErrorNvlinkUncorrectable", "CUDA_ERROR_NVLINK_UNCORRECTABLE", nullptr,
          "an uncorrectable NVLink error", K::Hardware, "drain the node; check `nvidia-smi nvlink -s`"},
    Entry{222, "cudaErrorUnsupportedPtxVersion", "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", nullptr,
          "PTX built by a newer toolkit than the driver supports", K::NoDriver, kDriverFix},
    Entry{400, "cudaErrorInvalidResourceHandle", "CUDA_ERROR_INVALID_HANDLE", "hipErrorInvalidHandle",
          "a stream, event or graph handle that is not valid", K::Usage,
          "a handle used after it was destroyed, or from another context"},
    Entry{600, "cudaErrorNotReady", "CUDA_ERROR_NOT_READY", "hipErrorNotReady", "not finished yet (a query)",
          K::Benign, ""},
    Entry{700, "cudaErrorIllegalAddress", "CUDA_ERROR_ILLEGAL_ADDRESS", "hipErrorIllegalAddress",
          "a kernel read or wrote an illegal address", K::Sticky, kStickyFix},
    Entry{701, "cudaErrorLaunchOutOfResources", "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "hipErrorLaunchOutOfResources",
          "too many registers or threads for the launch", K::Launch,
          "a smaller block size, or fewer registers (__launch_bounds__, -maxrregcount)"},
    Entry{702, "cudaErrorLaunchTimeout", "CUDA_ERROR_LAUNCH_TIMEOUT", "hipErrorLaunchTimeOut",
          "a kernel ran past the watchdog", K::Sticky, "a kernel ran too long: split it, or disable the display watchdog"},
    Entry{704, "cudaErrorPeerAccessAlreadyEnabled", "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
          "hipErrorPeerAccessAlreadyEnabled", "peer access already enabled", K::Benign, ""},
    Entry{709, "cudaErrorContextIsDestroyed", "CUDA_ERROR_CONTEXT_IS_DESTROYED", nullptr,
          "the context was destroyed", K::Usage, "calls after the context was torn down"},
    Entry{710, "cudaErrorAssert", "CUDA_ERROR_ASSERT", "hipErrorAssert",
          "a device-side assert failed (e.g. an index out of range in a kernel)", K::Sticky,
          "rerun with CUDA_LAUNCH_BLOCKING=1: the assert's message names the kernel and the condition"},
    Entry{714, "cudaErrorHardwareStackError", "CUDA_ERROR_HARDWARE_STACK_ERROR", nullptr,
          "stack corruption or overflow in a kernel", K::Sticky, kStickyFix},
    Entry{715, "cudaErrorIllegalInstruction", "CUDA_ERROR_ILLEGAL_INSTRUCTION", nullptr,
          "a kernel executed an illegal instruction", K::Sticky, kStickyFix},
    Entry{716, "cudaErrorMisalignedAddress", "CUDA_ERROR_MISALIGNED_ADDRESS", nullptr,
          "a kernel made a misaligned memory access", K::Sticky, kStickyFix},
    Entry{717, "cudaErrorInvalidAddressSpace", "CUDA_ERROR_INVALID_ADDRESS_SPACE", nullptr,
          "a kernel used an address in the wrong address space", K::Sticky, kStickyFix},
    Entry{718, "cudaErrorInvalidPc", "CUDA_ERROR_INVALID_PC", nullptr,
          "a kernel's program counter went invalid", K::Sticky, kStickyFix},
    Entry{719, "cudaErrorLaunchFailure", "CUDA_ERROR_LAUNCH_FAILED", "hipErrorLaunchFailure",
          "a kernel failed (an exception on the device)", K::Sticky, kStickyFix},
    Entry{720, "cudaErrorCooperativeLaunchTooLarge", "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE", nullptr,
          "a cooperative launch larger than the device can hold", K::Launch, "launch fewer blocks"},
    Entry{801, "cudaErrorNotSupported", "CUDA_ERROR_NOT_SUPPORTED", "hipErrorNotSupported",
          "not supported on this device or platform", K::Usage, "the feature needs another GPU or driver"},
    Entry{802, "cudaErrorSystemNotReady", "CUDA_ERROR_SYSTEM_NOT_READY", nullptr,
          "the system is not ready (fabric manager not running on an NVSwitch system)", K::NoDriver,
          "start nvidia-fabricmanager (same version as the driver)"},
    Entry{803, "cudaErrorSystemDriverMismatch", "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", nullptr,
          "the driver's user-space library and kernel module versions differ", K::NoDriver,
          "reboot or reload the nvidia module after a driver upgrade; in a container, match the host's libcuda"},
    Entry{804, "cudaErrorCompatNotSupportedOnDevice", "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", nullptr,
          "the forward-compatibility package does not support this GPU", K::NoDriver, kDriverFix},
    Entry{901, "cudaErrorStreamCaptureInvalidated", "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", nullptr,
          "a graph capture was invalidated by an illegal call during capture", K::Usage,
          "no syncs, allocations or host reads inside a captured region"},
    Entry{999, "cudaErrorUnknown", "CUDA_ERROR_UNKNOWN", "hipErrorUnknown", "an unknown error", K::Other,
          "check `dmesg` for an Xid from the NVIDIA driver"},
};

struct NcclEntry {
  int code;
  const char* name;
  const char* meaning;
  const char* fix;
};
constexpr std::array kNccl = {
    NcclEntry{1, "ncclUnhandledCudaError", "a CUDA call inside NCCL failed",
              "look for the CUDA failure beside it; NCCL_DEBUG=WARN names the call"},
    NcclEntry{2, "ncclSystemError", "a system call or the network failed",
              "check the network interface (NCCL_SOCKET_IFNAME), shared memory (/dev/shm size) and NCCL_DEBUG=WARN"},
    NcclEntry{3, "ncclInternalError", "NCCL hit an internal error", "NCCL_DEBUG=INFO; upgrade NCCL"},
    NcclEntry{4, "ncclInvalidArgument", "an invalid argument (buffer, count, datatype)",
              "check the tensors passed to the collective"},
    NcclEntry{5, "ncclInvalidUsage", "a call order NCCL does not allow (e.g. mismatched collectives across ranks)",
              "every rank must call the same collectives in the same order"},
    NcclEntry{6, "ncclRemoteError", "a remote rank failed or the connection broke",
              "look at the other ranks' logs and the link between the hosts"},
    NcclEntry{7, "ncclInProgress", "a non-blocking operation is still in progress", ""},
};

}  // namespace

std::string_view error_kind_name(ErrorKind k) {
  switch (k) {
    case K::NoDriver: return "no_driver";
    case K::OutOfMemory: return "out_of_memory";
    case K::Sticky: return "sticky";
    case K::Launch: return "launch";
    case K::Usage: return "usage";
    case K::Hardware: return "hardware";
    case K::Shutdown: return "shutdown";
    case K::Benign: return "benign";
    case K::Collective: return "collective";
    case K::Other: return "other";
  }
  return "?";
}

ErrorInfo describe_error(Layer layer, int64_t code) {
  if (layer == Layer::Nccl) {
    for (const auto& e : kNccl)
      if (e.code == code)
        return {e.name, e.meaning, code == 7 ? K::Benign : K::Collective, e.fix};
    return {"nccl error " + std::to_string(code), "", K::Collective, ""};
  }
  for (const auto& e : kEntries) {
    if (e.code != code) continue;
    const char* name = layer == Layer::Driver ? e.driver : layer == Layer::Hip ? e.hip : e.runtime;
    if (!name) break;
    return {name, e.meaning, e.kind, e.fix};
  }
  return {std::string(layer_name(layer)) + " error " + std::to_string(code), "", K::Other, ""};
}

}  // namespace causeway
