/* SPDX-License-Identifier: (GPL-2.0-only OR Apache-2.0) */
/*
 * Off-CPU intervals of traced threads (bpf/host.bpf.c, sched_switch and
 * sched_waking): when a thread left the CPU, for how long, in which state,
 * who ran instead and who woke it. Intervals shorter than --offcpu-min
 * (20 us) are not recorded.
 */
#ifndef CAUSEWAY_MODEL_OFFCPU_H
#define CAUSEWAY_MODEL_OFFCPU_H

#include "causeway/events.h"

#define CW_EV_OFFCPU 2

/* prev_state as recorded */
#define CW_STATE_RUNNING 0      /* preempted while runnable: CPU contention */
#define CW_STATE_SLEEPING 1     /* TASK_INTERRUPTIBLE: waiting (lock, futex, event) */
#define CW_STATE_DISK 2         /* TASK_UNINTERRUPTIBLE: usually I/O */
#define CW_STATE_OTHER 3

/* What a sleeping thread waited on, as the kernel can tell at switch-out. */
#define CW_WAIT_UNKNOWN 0
#define CW_WAIT_GIL 1           /* a futex inside the Python interpreter lock */

struct cw_offcpu_event {
	struct cw_header hdr;   /* pid/tid: the thread that was off-CPU; ts_ns = switch-out */
	__u64 dur_ns;
	__u32 state;            /* CW_STATE_* at switch-out */
	__u32 by_pid;           /* tgid of the task that ran instead (first one); asleep and
	                         * then queued (runq_ns > 0): the one it waited behind */
	__u32 waker_pid;        /* tgid of the waker, 0 if none seen */
	__u32 waker_tid;
	char by_comm[CW_COMM_LEN];
	__s32 syscall;          /* the system call it slept in (x86-64 number), -1 none or unknown */
	__u32 wait;             /* CW_WAIT_* */
	__u64 wait_arg;         /* that call's first argument: a futex's address, an fd */
	__u32 holder_tid;       /* CW_WAIT_GIL: the thread holding the lock then (3.11+), 0 unknown */
	__u32 runq_ns;          /* from its wake-up to back on a CPU (clamped): waiting for a CPU */
	__u64 stack_hash;       /* the Python stack it went to sleep in (cw_pystack_event.hash), 0 none */
};

/* Where a traced thread left the CPU, kept until it runs again (the
 * offcpu_starts map of bpf/host.bpf.c). When the trace stops, user space
 * reads the threads still off-CPU and records each interval up to then: a
 * rank blocked for good (a hang) has its wait and its line on record. */
struct cw_offcpu_start {
	__u64 ts;
	__u32 state;
	__u32 by_pid;
	char by_comm[CW_COMM_LEN];
	__s32 syscall;
	__u32 wait;
	__u64 wait_arg;
	__u32 holder_tid;
	__u32 _pad;
};

/* The Python stack a thread went to sleep in (the wait_stacks map, shared by
 * the libcall and host programs). */
struct cw_wait_stack {
	__u64 ts;               /* the switch it was taken at */
	__u64 hash;             /* cw_pystack_event.hash */
};
/* The stack taken at a switch belongs to the interval starting then: the two
 * programs on one switch read the clock a few hundred ns apart. */
#define CW_WAIT_STACK_SLACK_NS 50000

#ifdef __cplusplus
#include <algorithm>
#include <cstring>
#include <optional>
#include <string>

#include "causeway/model/family.h"

namespace causeway::model {

struct OffCpuInterval {
  int64_t ts_ns = 0;
  int64_t dur_ns = 0;
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint32_t cpu = 0;
  int state = 0;  // CW_STATE_*
  uint32_t by_pid = 0;
  std::string by_comm;
  uint32_t waker_pid = 0;
  uint32_t waker_tid = 0;
  std::optional<int64_t> syscall;
  int wait = CW_WAIT_UNKNOWN;
  std::optional<int64_t> wait_arg;
  uint32_t holder_tid = 0;
  int64_t runq_ns = 0;  // of dur_ns, the tail after its wake-up spent waiting for a CPU
  std::optional<int64_t> stack_id;  // where it went to sleep (set by the consumer from the record's hash)
};

struct OffCpu {
  using Event = cw_offcpu_event;
  using Row = OffCpuInterval;
  static constexpr uint32_t kEventType = CW_EV_OFFCPU;
  static constexpr Column<Row> kColumns[] = {
      {"ts_ns", SqlType::Integer, true, "when the thread left the CPU", field<&Row::ts_ns>},
      {"dur_ns", SqlType::Integer, true, "how long it was off", field<&Row::dur_ns>},
      {"pid", SqlType::Integer, true, "process (tgid)", field<&Row::pid>},
      {"tid", SqlType::Integer, true, "thread", field<&Row::tid>},
      {"cpu", SqlType::Integer, true, "CPU it was switched out on", field<&Row::cpu>},
      {"state", SqlType::Integer, true,
       "0 runnable (preempted: CPU contention), 1 sleeping (waiting: lock, queue, event), "
       "2 disk (uninterruptible: usually I/O), 3 other",
       field<&Row::state>},
      {"by_pid", SqlType::Integer, false,
       "tgid of the task that ran instead (state 0); asleep, then waiting for a CPU after its wake-up: the task "
       "it waited behind (the one it replaced)",
       field<&Row::by_pid>},
      {"by_comm_id", SqlType::Integer, false, "→ `comms.id`: the command name of that task",
       field<&Row::by_comm>, "comms"},
      {"waker_pid", SqlType::Integer, false, "tgid of the task that woke it (NULL: none seen)",
       [](const Row& r) { return r.waker_pid ? to_sql(r.waker_pid) : SqlValue{}; }},
      {"waker_tid", SqlType::Integer, false, "thread that woke it (NULL: none seen)",
       [](const Row& r) { return r.waker_pid ? to_sql(r.waker_tid) : SqlValue{}; }},
      {"syscall", SqlType::Integer, false,
       "the system call it slept in (x86-64 number: 202 futex, 7 poll, 0 read, 230 clock_nanosleep, ...); "
       "NULL when not in one",
       field<&Row::syscall>},
      {"wait", SqlType::Integer, true,
       "what it waited on, as the kernel could tell: 0 not known there, 1 the Python interpreter lock (GIL)",
       field<&Row::wait>},
      {"wait_arg", SqlType::Integer, false, "the system call's first argument: a futex's address, an fd",
       field<&Row::wait_arg>},
      {"holder_tid", SqlType::Integer, false,
       "wait 1: the thread holding the interpreter lock when it went to sleep (CPython 3.11+; NULL: unknown)",
       [](const Row& r) { return r.holder_tid ? to_sql(r.holder_tid) : SqlValue{}; }},
      {"runq_ns", SqlType::Integer, true,
       "of dur_ns, the tail from its wake-up until it ran again: waiting for a CPU (run-queue latency; 0 when "
       "preempted, or the wake-up was not seen)",
       field<&Row::runq_ns>},
      {"stack_id", SqlType::Integer, false,
       "→ `stack_frames.stack_id`: the Python stack it went to sleep in (a sleep, a lock, an fsync: at most one "
       "walk per thread per 2 ms; NULL: none taken)",
       field<&Row::stack_id>},
  };
  static constexpr Table<Row> kTable{"offcpu_events",
                                     "Off-CPU intervals of traced threads (view `offcpu` names the state and the comm).",
                                     TableKind::Events, kColumns, {}, true};

  static Row decode(const Event& e, DecodeContext& cx) {
    Row o;
    o.ts_ns = cx.wall(e.hdr.ts_ns);
    o.dur_ns = int64_t(e.dur_ns);
    o.pid = e.hdr.pid;
    o.tid = e.hdr.tid;
    o.cpu = e.hdr.cpu;
    o.state = int(e.state);
    o.by_pid = e.by_pid;
    o.by_comm.assign(e.by_comm, strnlen(e.by_comm, sizeof e.by_comm));
    o.waker_pid = e.waker_pid;
    o.waker_tid = e.waker_tid;
    if (e.syscall >= 0) {
      o.syscall = e.syscall;
      o.wait_arg = int64_t(e.wait_arg);
    }
    o.wait = int(e.wait);
    o.holder_tid = e.holder_tid;
    o.runq_ns = std::min<int64_t>(e.runq_ns, o.dur_ns);
    HostTotals& h = cx.host;
    add_saturating(h.offcpu_ns, o.dur_ns);
    h.offcpu_count++;
    if (o.state == CW_STATE_RUNNING) add_saturating(h.offcpu_runnable_ns, o.dur_ns);
    return o;
  }
};
static_assert(sizeof(cw_offcpu_event) == 104);

}  // namespace causeway::model
CAUSEWAY_TABLE(OffCpu);
#endif /* __cplusplus */

#endif /* CAUSEWAY_MODEL_OFFCPU_H */
