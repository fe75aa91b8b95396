// SPDX-License-Identifier: Apache-2.0
#pragma once
// The reads behind explain's thread timelines, dispatcher accounts and
// critical paths (analyze/timeline.cpp, account.cpp, critical_path.cpp):
// threads' calls and off-CPU intervals, their CPU samples, the busiest
// threads, and what stacks were doing by their frames. A function that takes
// a Window for a thread reads only its time: the thread names its process
// (a path reaches the threads of other processes).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "causeway/store/sqlite.h"
#include "causeway/store/window.h"

namespace causeway::store {

// A thread's recorded library call: CUDA/HIP (a framework's tensor
// allocations left out: the driver calls they make are rows of their own)
// or NCCL, which has no flags, copy kind or bytes.
struct ThreadCallRow {
  int64_t ts_ns = 0, dur_ns = 0, op_id = 0;
  uint32_t flags = 0;
  int64_t stack_id = -1;  // -1: none
  int64_t kind = -1;      // CopyKind; -1: none
  int64_t bytes = -1;     // -1: none
  std::optional<int64_t> since_launch_ns;  // a sync or copy: since the process's last launch (schema 23)
  std::optional<int64_t> launch_seq;       // and the process's launches by then
};
// Every thread's CUDA and NCCL calls of one process in time order, threads
// interleaved, in one read: a read per thread would scan the window's calls
// once a thread (the timelines of a 128-thread pool ask for each).
void each_process_call(Connection& db, const Window& w, int64_t session, uint32_t pid,
                       const std::function<void(uint32_t tid, const ThreadCallRow&)>& f);

// A process's launches counted in the kernel (launch_stats), and its CUDA
// rows that stand for them (flag CW_CALL_AGGREGATED), in the window's time.
struct SampledLaunches {
  int64_t rows = 0;
  int64_t launch_ns = 0, launches = 0;
};
SampledLaunches sampled_launches(Connection& db, const Window& w, int64_t session, uint32_t pid);

// A thread's off-CPU interval, with the name of the task that ran instead
// (by_comm; "" when unknown) and the wake-up's wait for a CPU (runq_ns).
struct OffCpuRow {
  int64_t ts_ns = 0, dur_ns = 0;
  int state = 0;  // CW_STATE_*
  uint32_t waker_pid = 0, waker_tid = 0, by_pid = 0;
  std::string by_comm;
  int64_t syscall = -1;  // -1: none known
  int wait = 0;          // CW_WAIT_*
  uint32_t holder_tid = 0;
  int64_t runq_ns = 0;
  int64_t stack_id = -1;  // -1: none taken
};
// Every thread's of one process in time order (ts_ns, then rowid), threads
// interleaved, in one read: the only index is on ts_ns, so a read per
// thread would scan the window once a thread (128 times for a pool of 128),
// and an order by thread would sort every row. with_stacks: the file records the stack a
// thread went to sleep in (schema 15; older files have no such column).
void each_process_offcpu(Connection& db, const Window& w, int64_t session, uint32_t pid, bool with_stacks,
                         const std::function<void(uint32_t tid, const OffCpuRow&)>& f);

// An interval of offcpu_events aliased `alias` ("o") waiting on the disk, as
// SQL: uninterruptible in any system call but `driver_syscall` (a driver's
// own uninterruptible wait inside it is not the disk's).
std::string disk_wait_sql(const std::string& alias, int64_t driver_syscall);

struct ThreadId {
  int64_t session = 0;
  uint32_t pid = 0, tid = 0;
};
// The threads with at least `min_calls` recorded calls in the window (CUDA/HIP
// but a framework's tensor allocations, and NCCL), most first, at most `limit`.
std::vector<ThreadId> busiest_call_threads(Connection& db, const Window& w, int64_t min_calls, int64_t limit);

// A second of a thread's CPU samples outside calls: all of them, and those
// whose stack is inside an import (a frame of importlib's bootstrap).
struct ImportSecond {
  int64_t second = 0;  // ts_ns / 1 s
  int64_t samples = 0, importing = 0;
};
// Over [from_ns, to_ns), by second.
std::vector<ImportSecond> import_seconds(Connection& db, int64_t session, uint32_t tid, int64_t from_ns,
                                         int64_t to_ns);

// The session recorded any off-CPU interval.
bool session_has_offcpu(Connection& db, int64_t session);

// What a stack was doing, by its frames (see path_reads.cpp for the patterns).
enum class StackUse { Framework, Checkpoint, Compile, Autotune };
// Each stack matching a use's patterns, use by use in the order above; a
// stack that matches two uses comes twice, and the later one is its use.
void each_stack_use(Connection& db, const std::function<void(int64_t stack_id, StackUse use)>& f);

// A thread's CPU samples outside calls in the window's time, summed per
// second (ts_ns / 1 s) and stack (-1: none), in no set order.
struct SecondSamples {
  int64_t second = 0, stack_id = -1, samples = 0;
};
void each_second_samples(Connection& db, const Window& w, int64_t session, uint32_t pid, uint32_t tid,
                         const std::function<void(const SecondSamples&)>& f);
// The distinct stacks of a thread's launches (OpClass::Launch) in the
// window's time, in no set order.
void each_launch_stack(Connection& db, const Window& w, int64_t session, uint32_t pid, uint32_t tid,
                       const std::function<void(int64_t stack_id)>& f);

}  // namespace causeway::store
