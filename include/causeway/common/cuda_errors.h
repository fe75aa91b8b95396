// SPDX-License-Identifier: Apache-2.0
#pragma once
// What a CUDA runtime / driver / HIP / NCCL return code means, and what to do
// about it: the failures diagnosis names errors, not numbers.
#include <cstdint>
#include <string>
#include <string_view>

#include "causeway/common/op_table.h"

namespace causeway {

enum class ErrorKind : uint8_t {
  NoDriver,     // no usable driver or device: nothing ran
  OutOfMemory,  // an allocation (or a launch's resources) did not fit
  Sticky,       // the context is corrupted: every later call fails too
  Launch,       // a launch that cannot run as configured
  Usage,        // a wrong argument or call order: a programming error
  Hardware,     // ECC, NVLink, hardware stack: the device is at fault
  Shutdown,     // calls made while the runtime unloads (at exit)
  Benign,       // not a failure (not ready yet, already enabled)
  Collective,   // NCCL: a failing collective
  Other,
};
std::string_view error_kind_name(ErrorKind k);

struct ErrorInfo {
  std::string name;         // cudaErrorIllegalAddress, CUDA_ERROR_OUT_OF_MEMORY, hipErrorNoDevice, ...
  std::string_view meaning; // one line, for people
  ErrorKind kind = ErrorKind::Other;
  std::string_view fix;     // what to do, one line
};

// The code as the layer's API returns it (cudaError_t, CUresult, hipError_t,
// ncclResult_t). Unknown codes get "<layer> error N" and kind Other.
ErrorInfo describe_error(Layer layer, int64_t code);

}  // namespace causeway
