// SPDX-License-Identifier: Apache-2.0
#pragma once
// Draining the ring buffers: raw records -> decoded, enriched store rows in
// the current Batch. Called on a timer (the BPF side never wakes us).
#include <bpf/libbpf.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "causeway/consume/call_decoder.h"
#include "causeway/consume/cuda_decoder.h"
#include "causeway/consume/http_requests.h"
#include "causeway/consume/live_stats.h"
#include "causeway/consume/stack_resolver.h"
#include "causeway/model/cpu_samples.h"
#include "causeway/model/records.h"

namespace causeway::consume {

struct ConsumerHooks {
  // A process exec'd (any process: discovery of new GPU processes).
  std::function<void(uint32_t pid, const std::string& filename, const std::string& comm)> on_exec;
  std::function<void(uint32_t pid)> on_exit;
  std::function<void(uint32_t child, uint32_t parent)> on_fork;
  // First record seen from a process.
  std::function<void(uint32_t pid)> on_new_process;
  // A call of a CW_COOKIE_RETSITE op came from a return address not seen
  // before in this process: its return is probed there.
  std::function<void(uint32_t pid, uint16_t op, uint64_t addr)> on_return_site;
};

class EventConsumer {
 public:
  EventConsumer(int libcall_ring_fd, int host_ring_fd, int64_t mono_to_wall_ns);
  // Decoding only, no ring buffers: records arrive through handle() (tests, fuzzing).
  explicit EventConsumer(int64_t mono_to_wall_ns);
  ~EventConsumer();
  EventConsumer(const EventConsumer&) = delete;
  EventConsumer& operator=(const EventConsumer&) = delete;

  // Consume everything in the rings now. Returns the number of records.
  int drain();
  // Wait up to timeout_ms for a record that asks for a wakeup (exec events
  // only: everything else is submitted without one), then drain.
  int wait_and_drain(int timeout_ms);
  model::Batch take_batch();
  size_t pending_rows() const { return batch_.size(); }

  void set_hooks(ConsumerHooks h) { hooks_ = std::move(h); }
  // Tally calls, collectives and copies per process in stats().processes
  // (the metrics'): off by default, it is a map update per record.
  void count_per_process(bool on) { per_process_ = on; }
  void set_stack_resolver(std::unique_ptr<StackResolver> r) { stacks_ = std::move(r); }
  StackResolver* stacks() { return stacks_.get(); }
  CallDecoderRegistry& decoders() { return decoders_; }
  LiveStats& stats() { return stats_; }
  // Unsigned: a corrupt timestamp wraps instead of overflowing (UB).
  int64_t wall(uint64_t mono_ns) const { return int64_t(mono_ns + uint64_t(mono_to_wall_ns_)); }
  // Records from the ring that could not be decoded (unknown type/op/size).
  int64_t malformed() const { return malformed_; }
  // Who a process is, from its exec or its first traced call (recorded in the
  // kernel: still known after it exits); nullptr when never seen.
  struct Identity {
    std::string comm, cmdline;
    uint32_t ppid = 0;
  };
  const Identity* identity(uint32_t pid) const;
  // An exited process's caches are dropped this long after its exit record:
  // records it made just before exiting may still be in the other ring.
  static constexpr int64_t kRetireAfterNs = 2'000'000'000;
  // Drop the caches of processes that exited more than kRetireAfterNs before
  // mono_now_ns (called by drain(); public for tests).
  void retire_exited(uint64_t mono_now_ns);

  // --launch-sampling: the kernel's cumulative per-(process, op, kernel)
  // launch counters now -> this interval's launch_stats rows (deltas since
  // the last call), kernels named like recorded launches, and the live view.
  using LaunchSnapshot = std::vector<std::pair<cw_launch_key, cw_launch_agg>>;
  void on_launch_aggregates(const LaunchSnapshot& snapshot, int64_t wall_ts_ns);
  // Where the counters come from (the kernel map): read now from the trace
  // loop, and at each process exit before its kernel names are forgotten.
  struct LaunchSource {
    std::function<LaunchSnapshot()> read;
    std::function<void(const std::vector<cw_launch_key>&)> forget;  // delete these keys
  };
  void set_launch_source(LaunchSource s) { launch_source_ = std::move(s); }
  void flush_launch_aggregates(int64_t wall_ts_ns);

  // CPU samples are counted per (second, thread, stack, in_call): rows of
  // seconds before `wall_ts_ns`'s are added to the batch (all of them when
  // `all`, at the end of a trace).
  void flush_cpu_samples(int64_t wall_ts_ns, bool all = false);
  // The trace ends: requests still in flight at the traced sockets are written as they stand.
  void flush_requests();

  // Public for the C callback trampoline.
  int handle(const void* data, size_t size);

 private:
  void on_call(const cw_call_event& e);
  void tally(uint32_t pid, const OpSpec& op, bool failed, size_t cuda_rows, size_t nccl_rows);
  void on_proc(const cw_proc_event& e);
  void on_cpu_sample(const cw_cpu_sample_event& e);
  void on_socket(const cw_sock_event& e);
  void seen_process(uint32_t pid);
  void remember_identity(uint32_t pid, Identity id);
  // A process exited: its last launch counts, then its keys go.
  void forget_launch_process(uint32_t pid, int64_t wall_ts_ns);

  ring_buffer* rb_ = nullptr;
  int64_t mono_to_wall_ns_;
  model::Batch batch_;
  HttpRequestTracker requests_;
  LiveStats stats_;
  ConsumerHooks hooks_;
  bool per_process_ = false;
  CallDecoderRegistry decoders_;
  std::shared_ptr<CudaDecoder> cuda_;
  std::unique_ptr<StackResolver> stacks_;
  std::set<uint32_t> seen_pids_;
  std::unordered_map<uint32_t, Identity> identities_;
  std::deque<uint32_t> identity_order_;  // oldest first: the cache is bounded
  static constexpr size_t kMaxIdentities = 16384;
  std::deque<std::pair<uint64_t, uint32_t>> exited_;  // (exit mono ns, pid), oldest first
  std::map<std::tuple<uint32_t, uint16_t, uint64_t>, cw_launch_agg> launch_last_;
  LaunchSource launch_source_;
  // (second, pid, tid, stack id or -1, in_call) -> (first sample's wall ns, samples)
  std::map<std::tuple<int64_t, uint32_t, uint32_t, int64_t, int>, std::pair<int64_t, int64_t>> cpu_samples_;
  int64_t malformed_ = 0;
};


}  // namespace causeway::consume
