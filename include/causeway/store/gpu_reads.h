// SPDX-License-Identifier: Apache-2.0
#pragma once
// The reads behind explain's GPU rules (gpu_fault, gpu_health, gpu_throttled,
// gpu_shared): the GPU's own events and samples (NVML, the kernel log), its
// devices, and the calls they are tied to. Times are wall-clock ns; a range
// is [from_ns, to_ns).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "causeway/store/sqlite.h"
#include "causeway/store/window.h"

namespace causeway::store {

// An XID the kernel log tied to a traced process (one the session recorded,
// or whose CUDA calls it recorded). `gpu` is NVML's index: the event's, else
// the device at the event's PCI address, else the session's only GPU, else -1.
struct ProcessXid {
  int64_t session = 0, gpu = -1, ts_ns = 0, code = 0, pid = 0;
  std::string process, pci, detail;  // "" when not logged
};
// In time order.
void each_process_xid(Connection& db, int64_t from_ns, int64_t to_ns,
                      const std::function<void(const ProcessXid&)>& f);

// Any GPU event (an XID, an uncorrectable ECC error, ...), `gpu` as above.
struct GpuEvent {
  int64_t session = 0, gpu = -1, ts_ns = 0;
  std::string event;
  int64_t code = 0;
  std::optional<int64_t> pid;  // the process the kernel log named
  std::string pci, process;    // "" when not logged
};
// In time order.
void each_gpu_event(Connection& db, int64_t from_ns, int64_t to_ns,
                    const std::function<void(const GpuEvent&)>& f);

// A GPU's memory health counters' growth over its samples in the range.
struct GpuCounterGrowth {
  int64_t session = 0, gpu = 0;
  int64_t ecc_uncorrected = 0;  // max - min
  int64_t remap_pending = 0;    // max
  int64_t retired_pages = 0;    // max - min
  std::optional<int64_t> first_remap_pending_ns;
};
// One per (session, GPU) sampled, by both.
std::vector<GpuCounterGrowth> gpu_counter_growth(Connection& db, int64_t from_ns, int64_t to_ns);

// An NVML sample's clock state: the clocks-event reason bits and the SM
// clock (MHz), 0 when not sampled.
struct GpuClockSample {
  int64_t session = 0, gpu = 0, ts_ns = 0, throttle = 0, sm_clock = 0;
};
// Ordered by session, GPU, time.
void each_gpu_clock_sample(Connection& db, int64_t from_ns, int64_t to_ns,
                           const std::function<void(const GpuClockSample&)>& f);

// The device's name as NVML gives it; "" when unknown.
std::string gpu_device_name(Connection& db, int64_t session, int64_t gpu);

// The device's top SM clock (MHz) and power limits (mW); 0 when unknown
// (power_default_mw: schema 19; a trace written before has none).
struct GpuDeviceLimits {
  int64_t sm_clock_max = 0, power_limit_mw = 0, power_default_mw = 0;
};
GpuDeviceLimits gpu_device_limits(Connection& db, int64_t session, int64_t gpu);

// The GPUs NVML described in the session.
int64_t gpu_device_count(Connection& db, int64_t session);

// The processes NVML sampled on the GPU, in the window.
std::vector<int64_t> gpu_process_pids(Connection& db, int64_t session, int64_t gpu, const Window& w);
// The processes with CUDA calls in the session, in the window.
std::vector<int64_t> cuda_call_pids(Connection& db, int64_t session, const Window& w);

// The last successful launch, or first lookup of a kernel (CUDA's lazy
// loading names each kernel just before its first launch), at or before `at_ns`.
struct KernelLaunch {
  int64_t ts_ns = 0;
  std::string kernel;
  std::optional<int64_t> stack_id;
  bool lookup = false;  // the kernel's lookup, not a launch
};
std::optional<KernelLaunch> last_kernel_launch(Connection& db, int64_t session, int64_t pid, int64_t at_ns);

// A CUDA call that returned an error.
struct FailedCall {
  int64_t ts_ns = 0, pid = 0, op_id = 0, ret = 0;
};
// The process's first one from `from_ns` on.
std::optional<FailedCall> first_failed_call(Connection& db, int64_t session, int64_t pid, int64_t from_ns);
// The session's first one in the range, of any process.
std::optional<FailedCall> first_failed_call_in(Connection& db, int64_t session, int64_t from_ns,
                                               int64_t to_ns);

// A process's successful synchronising CUDA calls and its NCCL collectives
// (what the host waits for the GPU on), in the window, in no set order.
struct TimedCall {
  int64_t ts_ns = 0, dur_ns = 0, op_id = 0;
};
void each_gpu_wait(Connection& db, int64_t session, int64_t pid, const Window& w,
                   const std::function<void(const TimedCall&)>& f);

// A SELECT of the stack ids of the process's CUDA calls of one op in the
// window, for analyze's frame lookup (it takes the stacks as SQL).
std::string op_stack_ids_sql(const Window& w, int64_t pid, int64_t op_id);

// gpu_shared: the 100 ms buckets (temp.gpu_slots, explain_tables.h) in which
// two or more processes gave the GPU work, ranks of an NCCL job left out (they
// launch together by design), kept as temp.shared_buckets.
constexpr int64_t kGpuSlotNs = 100'000'000;
// Creates the table; returns its buckets.
int64_t create_shared_buckets(Connection& db);
// The GPUs NVML saw each candidate process on in the window: (pid, gpu).
std::vector<std::pair<uint32_t, int64_t>> gpus_of_candidates(Connection& db, const Window& w);
// Keeps only the buckets still shared by two without the processes `apart`
// (seen on GPUs no other used); returns the buckets left.
int64_t drop_buckets_of_apart(Connection& db, const std::vector<uint32_t>& apart);
// The candidates' GPU work in shared buckets: (pid, calls), most first.
std::vector<std::pair<uint32_t, int64_t>> work_in_shared_buckets(Connection& db);
// A process's sync durations in the window: mean outside shared buckets and
// inside (none: no such sync), and how many inside.
struct SyncSharing {
  std::optional<double> alone_ns, shared_ns;
  int64_t shared_calls = 0;
};
SyncSharing sync_sharing(Connection& db, const Window& w, uint32_t pid);
// The sync op with the most time in the process's baselines (0: none).
int64_t busiest_sync_op(Connection& db, uint32_t pid);
// The process's mean SM share per GPU in shared buckets (NVML): (gpu, sm_util).
std::vector<std::pair<int64_t, double>> sm_util_when_shared(Connection& db, const Window& w, uint32_t pid);

}  // namespace causeway::store
