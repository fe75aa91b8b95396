// SPDX-License-Identifier: Apache-2.0
#pragma once
// Calls a thread was already inside when the trace attached: no probe saw
// them enter (a job traced after it started hanging). The thread's own stack
// says which: its return addresses into a probed function's code, read from
// its user stack (a thread blocked in a system call: /proc/PID/task/TID/syscall
// gives its stack pointer, /proc/PID/mem the stack; a running one, spinning
// in a synchronisation as CUDA's default does: one perf sample of its user
// registers and stack). Nothing stops or ptraces the process.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "causeway/common/op_table.h"

namespace causeway::discover {

// A thread's user stack at one moment: bytes from sp upward.
struct StackSnapshot {
  uint64_t sp = 0, pc = 0;
  bool running = false;  // sampled while it ran (else blocked in a system call)
  std::vector<uint8_t> bytes;
};

// The stack pointer and pc of a thread blocked in a system call, from the
// syscall file's text ("202 0x... 0x... ... SP PC"); nullopt while it runs
// ("running") or for anything else.
std::optional<std::pair<uint64_t, uint64_t>> parse_syscall_file(const std::string& text);

// A snapshot of the thread: blocked, at once; running, one sample taken
// within timeout_ms of its CPU time (perf_event_open; x86-64 and arm64).
// nullopt (why says why) when neither works: the thread is gone, or not
// permitted.
std::optional<StackSnapshot> snapshot_thread(uint32_t pid, uint32_t tid, size_t max_bytes, int timeout_ms,
                                             std::string* why = nullptr, const std::string& proc_root = "/proc");

// A probed function's code as mapped in a process.
struct CodeRange {
  uint64_t lo = 0, hi = 0;  // [lo, hi)
  uint16_t op_id = 0;
};
// Every probed function of the GPU libraries the process maps (the ops of
// the op table, by their symbols), sorted by address.
std::vector<CodeRange> probed_code(uint32_t pid, const std::string& proc_root = "/proc");

// The probed call the snapshot shows the thread inside: the innermost one on
// its stack (its pc, else the first word that is a return address into a
// probed function), then outward through callers of a higher layer within
// kCallerGap (cudaDeviceSynchronize above the driver's cuCtxSynchronize):
// the call the program made. A word of the same layer further out is not
// taken: a stale slot left by an earlier call looks the same.
constexpr uint64_t kCallerGap = 16 << 10;
std::optional<uint16_t> call_on_stack(const StackSnapshot& s, const std::vector<CodeRange>& code);

// How long ago the thread last began to run, from the scheduler's per-task
// clock (/proc/PID/task/TID/sched se.exec_start) against this thread's own:
// for a thread asleep in a call, about how long it has waited. nullopt
// without that file (a kernel without CONFIG_SCHED_DEBUG).
std::optional<int64_t> last_ran_ns_ago(uint32_t pid, uint32_t tid, const std::string& proc_root = "/proc");

}  // namespace causeway::discover
