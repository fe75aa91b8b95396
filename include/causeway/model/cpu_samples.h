/* SPDX-License-Identifier: (GPL-2.0-only OR Apache-2.0) */
/*
 * Where traced Python threads spend their CPU: a cpu-clock perf event on
 * every CPU (trace --cpu-sample-hz, 49 Hz by default) samples whatever runs
 * there; for a thread of a traced Python process, bpf/libcall.bpf.c walks
 * its Python stack (sent once per process, as for calls) and says whether
 * the thread was inside a traced library call. User space counts samples per
 * (second, thread, stack, in_call): host time gets its line (host_bound, by
 * time), and so does the thread holding a lock another waits for.
 */
#ifndef CAUSEWAY_MODEL_CPU_SAMPLES_H
#define CAUSEWAY_MODEL_CPU_SAMPLES_H

#include "causeway/events.h"

#define CW_EV_CPU_SAMPLE 13

struct cw_cpu_sample_event {
	struct cw_header hdr;   /* pid/tid: the thread on the CPU; ts_ns: the sample */
	__u64 stack_hash;       /* its Python stack (cw_pystack_event.hash), 0 when none */
	__u32 in_call;          /* 1: inside a traced library call (a CUDA call's own CPU time) */
	__u32 _pad;
};

#ifdef __cplusplus
#include <optional>

#include "causeway/model/family.h"

namespace causeway::model {

// Samples of one thread with one stack within one second.
struct CpuSampleCount {
  int64_t ts_ns = 0;  // the second's first sample
  uint32_t pid = 0;
  uint32_t tid = 0;
  std::optional<int64_t> stack_id;
  int in_call = 0;
  int64_t samples = 0;
};

struct CpuSamples {
  using Row = CpuSampleCount;
  static constexpr Column<Row> kColumns[] = {
      {"ts_ns", SqlType::Integer, true, "the first sample of this second", field<&Row::ts_ns>},
      {"pid", SqlType::Integer, true, "process (tgid)", field<&Row::pid>},
      {"tid", SqlType::Integer, true, "thread", field<&Row::tid>},
      {"stack_id", SqlType::Integer, false, "→ `stack_frames.stack_id`: its Python stack (NULL: none found)",
       field<&Row::stack_id>},
      {"in_call", SqlType::Integer, true, "1: inside a traced library call; 0: its own code (Python, host work)",
       field<&Row::in_call>},
      {"samples", SqlType::Integer, true,
       "samples in that second (at --cpu-sample-hz: 49 are a second of CPU)", field<&Row::samples>},
  };
  static constexpr Table<Row> kTable{
      "cpu_samples",
      "On-CPU samples of the threads of traced Python processes (trace --cpu-sample-hz), counted per second, "
      "thread, Python stack and whether the thread was inside a traced call.",
      TableKind::Events, kColumns};
};
static_assert(sizeof(cw_cpu_sample_event) == 48);

}  // namespace causeway::model
CAUSEWAY_TABLE(CpuSamples);
#endif /* __cplusplus */

#endif /* CAUSEWAY_MODEL_CPU_SAMPLES_H */
