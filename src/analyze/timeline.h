// SPDX-License-Identifier: Apache-2.0
#pragma once
// One thread's recorded activity in time order, as the account and the
// critical path read it: its outermost library calls (a nested call is not
// recorded, so calls do not overlap) and its off-CPU intervals, each asleep
// one split at its wake-up into the sleep and the wait for a CPU after it
// (runq_ns). Loaded once per thread per explain (ThreadTimelines caches).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "causeway/analyze/account.h"
#include "causeway/store/path_reads.h"

#include "rule_context.h"

namespace causeway::analyze {

enum class CallKind { Launch, SampledLaunch, SyncBusy, SyncIdle, Copy, Alloc, Pin, Collective, Other };

constexpr int64_t kBusySyncNs = 20'000;  // a sync this long waited for the GPU

struct TimelineCall {
  int64_t ts, end;
  CallKind kind;
  int64_t op_id, stack_id;
  bool marker;   // may mark steps: a sync, a blocking device-to-host copy, a collective
  bool startup;  // a module or library load, a kernel's registration or first lookup
  bool readback;  // a small copy to the host (a value read back: .item(), float(x), async or not)
  // A sync or a copy: when the process last queued a launch before it, and
  // its launches so far (schema 23; none before it, or in an older trace).
  std::optional<int64_t> last_launch = std::nullopt;
  int64_t launch_seq = -1;
  int64_t bytes = -1;  // a copy's, an allocation's; -1: none
};

struct TimelineOff {
  int64_t ts, end;
  int state;  // CW_STATE_*
  uint32_t waker_pid, waker_tid, by_pid;
  std::string by_comm;
  int64_t syscall;  // -1: none known
  int wait;         // CW_WAIT_*
  uint32_t holder_tid;
  int64_t stack_id = -1;  // the Python stack it went to sleep in (-1: none taken)
  bool queued = false;    // the wait for a CPU after its wake-up (runq_ns), not a preemption
  // Asleep: the part of the account it counts in, and the thread of the
  // process it waited for (account.cpp's classify_sleeps).
  int64_t TimeSplit::*part = &TimeSplit::sleeping;
  uint32_t waited_for = 0;
};

// x86-64 system calls a thread sleeps in on its own account, and those that
// wait for data to reach the disk.
constexpr int kSysNanosleep = 35, kSysClockNanosleep = 230, kSysIoctl = 16;
bool timer_syscall(int64_t nr);
bool disk_write_syscall(int64_t nr);
// Uninterruptible and waiting on the disk: a read, a page fault, a flush. A
// driver's own uninterruptible wait inside an ioctl (NVIDIA's, unpinning
// memory in cudaHostUnregister) is not the disk's.
bool disk_wait(const TimelineOff& o);
// The same, as SQL over offcpu_events aliased `alias`.
std::string disk_wait_sql(const std::string& alias);

int64_t TimeSplit::*split_field(CallKind k);
int64_t overlap_ns(int64_t a0, int64_t a1, int64_t b0, int64_t b1);

struct Timeline {
  std::vector<TimelineCall> calls;  // by ts
  std::vector<TimelineOff> offs;    // by ts
  double ns_per_sampled_launch = 0;  // a sampled launch row stands for this much launching
  double launches_per_sampled = 0;   // ... and this many launches

  // [from, to) of calls overlapping [a, b): calls do not overlap each other.
  std::pair<size_t, size_t> calls_in(int64_t a, int64_t b) const;
  // Off-CPU time of o inside [a, b) that no call covers.
  int64_t outside_calls(const TimelineOff& o, int64_t a, int64_t b) const;
  TimeSplit split(int64_t a, int64_t b) const;
  // The first off-CPU interval ending after t.
  std::vector<TimelineOff>::const_iterator offs_from(int64_t t) const;
};

// An interval asleep whose wake-up came `runq` before its end: asleep until
// then, then waiting for a CPU behind the task it replaced (by_pid).
void add_off(std::vector<TimelineOff>& offs, TimelineOff o, int64_t runq);

// Loads and caches threads' timelines over the explain window. Calls are
// those of `cuda_call_events` (tensor allocations aside: another level) and
// `nccl_call_events`; a thread with no calls (a helper, a loader worker)
// has its off-CPU intervals alone.
class ThreadTimelines {
 public:
  explicit ThreadTimelines(const RuleContext& ctx) : ctx_(ctx) {}
  const Timeline& get(int64_t session, uint32_t pid, uint32_t tid);

 private:
  const RuleContext& ctx_;
  std::map<std::tuple<int64_t, uint32_t, uint32_t>, Timeline> cache_;
  // Off-CPU intervals are read a process at a time (store::each_process_offcpu)
  // and handed to each thread's timeline when it is first asked for.
  struct PendingOff {
    TimelineOff off;
    int64_t runq_ns;
  };
  std::map<std::pair<int64_t, uint32_t>, std::map<uint32_t, std::vector<PendingOff>>> offs_;
  // Calls likewise: a process's in one read, each thread's handed over once.
  std::map<std::pair<int64_t, uint32_t>, std::map<uint32_t, std::vector<store::ThreadCallRow>>> calls_;
};

}  // namespace causeway::analyze
