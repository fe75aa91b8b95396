/* SPDX-License-Identifier: (GPL-2.0-only OR Apache-2.0) */
/*
 * Thread names of traced processes (bpf/host.bpf.c: sched_process_fork of a
 * thread, task_rename): PyTorch and CUDA name their threads (pt_autograd_0,
 * cuda-EvtHandlr, a DataLoader's pin-memory thread), so explain's account of
 * a dispatcher thread, and of the thread that woke it, can say which it is.
 */
#ifndef CAUSEWAY_MODEL_THREADS_H
#define CAUSEWAY_MODEL_THREADS_H

#include "causeway/events.h"

#define CW_EV_THREAD 12

#define CW_THREAD_CREATED 0     /* comm: the name it starts with (its creator's) */
#define CW_THREAD_RENAMED 1     /* comm: the new name (prctl(PR_SET_NAME), pthread_setname_np) */
#define CW_THREAD_FOUND 2       /* comm: its name when its process was first traced (/proc: a job already
                                 * running when the trace began) */

struct cw_thread_event {
	struct cw_header hdr;   /* pid/tid: the thread */
	char comm[CW_COMM_LEN];
	__u32 what;             /* CW_THREAD_* */
	__u32 _pad;
};

#ifdef __cplusplus
#include <cstring>
#include <string>

#include "causeway/model/family.h"

namespace causeway::model {

struct ThreadName {
  int64_t ts_ns = 0;
  uint32_t pid = 0;
  uint32_t tid = 0;
  std::string comm;
  int what = CW_THREAD_CREATED;
};

struct Threads {
  using Event = cw_thread_event;
  using Row = ThreadName;
  static constexpr uint32_t kEventType = CW_EV_THREAD;
  static constexpr Column<Row> kColumns[] = {
      {"ts_ns", SqlType::Integer, true, "when the thread got this name", field<&Row::ts_ns>},
      {"pid", SqlType::Integer, true, "process (tgid)", field<&Row::pid>},
      {"tid", SqlType::Integer, true, "thread", field<&Row::tid>},
      {"comm", SqlType::Text, true, "its name from then on", field<&Row::comm>},
      {"what", SqlType::Integer, true, "0 created (its creator's name), 1 renamed, 2 found running when its process was first traced (/proc)", field<&Row::what>},
  };
  static constexpr Table<Row> kTable{"threads", "Names of the threads of traced processes, as they change.",
                                     TableKind::Events, kColumns};

  static Row decode(const Event& e, DecodeContext& cx) {
    return Row{cx.wall(e.hdr.ts_ns), e.hdr.pid, e.hdr.tid, std::string(e.comm, strnlen(e.comm, sizeof e.comm)),
               int(e.what)};
  }
};
static_assert(sizeof(cw_thread_event) == 56);

}  // namespace causeway::model
CAUSEWAY_TABLE(Threads);
#endif /* __cplusplus */

#endif /* CAUSEWAY_MODEL_THREADS_H */
