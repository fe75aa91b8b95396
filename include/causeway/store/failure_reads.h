// SPDX-License-Identifier: Apache-2.0
#pragma once
// The reads behind explain's call_failures rule: CUDA/HIP and NCCL calls that
// returned an error, what the failing process called, and the kernels it
// launched before its first failure. Kernel lookups (OpClass::Naming) are
// left out of the failures, counts and sequences; kernels_launched takes them
// for the launches they precede. Times are wall-clock ns.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "causeway/store/sqlite.h"
#include "causeway/store/window.h"

namespace causeway::store {

// A call that returned an error. flags: the CUDA call's (0 for NCCL).
struct CallFailure {
  int64_t ts_ns = 0, session = 0, pid = 0, tid = 0, op_id = 0, ret = 0;
  int64_t stack_id = -1;  // -1: none
  int64_t flags = 0;
};
// Every one in the window, CUDA's then NCCL's merged in time order.
void each_call_failure(Connection& db, const Window& w, const std::function<void(const CallFailure&)>& f);

// A process's calls in the window, launches counted in the kernel
// (--launch-sampling) included.
struct ProcessCallCounts {
  int64_t calls = 0;            // made (the sampled launch rows left out: the counts have them)
  int64_t failed_launches = 0;  // launches counted in the kernel that failed
  int64_t succeeded = 0;
};
ProcessCallCounts process_call_counts(Connection& db, const Window& w, uint32_t pid);

// A CUDA call's op and what it returned.
struct OpReturn {
  int64_t op_id = 0, ret = 0;
};
// The process's last `limit` CUDA calls in [from_ns, to_ns], the latest first.
std::vector<OpReturn> last_cuda_calls(Connection& db, int64_t session, uint32_t pid, int64_t from_ns,
                                      int64_t to_ns, int limit);

// The kernel of the thread's CUDA call at ts_ns; "" when it has none.
std::string call_kernel(Connection& db, int64_t session, uint32_t pid, uint32_t tid, int64_t ts_ns);

// When the process's last successful synchronising call (or blocking copy)
// before `before_ns` ended; 0 when none. (An asynchronous copy returns
// success with a fault still pending.)
int64_t last_good_sync_end(Connection& db, int64_t session, uint32_t pid, int64_t before_ns);

// A kernel the process launched (or looked up: CUDA's lazy loading names each
// kernel just before its first launch, and that call is always traced, with
// its line, where launches are only sampled) successfully in a range.
struct LaunchedKernel {
  std::string kernel;      // "" when unnamed
  int64_t launches = 0;    // at least 1: a lookup stands for its launch
  int64_t last_ts_ns = 0;
  int64_t stack_id = -1;   // -1: none
  int64_t launched_before = 0;  // its calls before the range
};
// In [from_ns, to_ns]: those never launched before first, in launch order,
// then the rest by how often they ran before, the latest first.
std::vector<LaunchedKernel> kernels_launched(Connection& db, int64_t session, uint32_t pid, int64_t from_ns,
                                             int64_t to_ns);

// The stack of the process's last successful module load (OpClass::Module)
// in [from_ns, to_ns] that has one.
std::optional<int64_t> last_module_load_stack(Connection& db, int64_t session, uint32_t pid, int64_t from_ns,
                                              int64_t to_ns);

}  // namespace causeway::store
