// SPDX-License-Identifier: Apache-2.0
#pragma once
// Calls in flight: the agent walks the kernel's per-thread in-flight calls
// once a second (attach::Probes::calls_in_flight) and writes one row per call
// judged hung (common/hang.h) the first time it sees it, and, when the trace
// stops, one for every call still in flight (at_stop). A hung collective
// shows here long before the NCCL watchdog kills the job; the call's own row
// follows if it ever returns. A call that began before the trace did is
// found on its thread's stack when the trace attaches (entered_before).
#include <optional>
#include <string>

#include "causeway/model/family.h"

namespace causeway::model {

struct StalledCall {
  int64_t ts_ns = 0;           // when the call entered
  uint32_t pid = 0, tid = 0;
  uint16_t op_id = 0;
  int64_t waited_ns = 0;       // in the call when it was seen
  int64_t seen_ts_ns = 0;
  std::optional<int64_t> stack_id;
  bool at_stop = false;        // written when the trace stopped, the call still in flight
  bool entered_before = false; // found on its thread's stack when the trace attached
  std::optional<int64_t> seq;  // an NCCL collective's (or send/recv's) number, given at its entry
};

struct StalledCalls {
  using Row = StalledCall;
  static constexpr Column<Row> kColumns[] = {
      {"ts_ns", SqlType::Integer, true, "when the call entered (its row in `cuda_call_events` or `nccl_call_events`, "
                                        "if it returned, has the same `ts_ns` and `tid`)", field<&Row::ts_ns>},
      {"pid", SqlType::Integer, true, "process (tgid)", field<&Row::pid>},
      {"tid", SqlType::Integer, true, "thread", field<&Row::tid>},
      {"op_id", SqlType::Integer, true, "→ `ops.id`", field<&Row::op_id>},
      {"waited_ns", SqlType::Integer, true, "how long it had been in the call when seen", field<&Row::waited_ns>},
      {"seen_ts_ns", SqlType::Integer, true, "when the agent saw it", field<&Row::seen_ts_ns>},
      {"stack_id", SqlType::Integer, false, "→ `stack_frames.stack_id`: the Python line waiting", field<&Row::stack_id>},
      {"at_stop", SqlType::Integer, true,
       "1: written when the trace stopped, the call still in flight (hung or not: explain judges it); 0: judged hung "
       "while tracing",
       field<&Row::at_stop>},
      {"entered_before", SqlType::Integer, true,
       "1: the call began before the trace did (found on its thread's stack when the trace attached); `ts_ns` is "
       "the latest it can have begun",
       field<&Row::entered_before>},
      {"seq", SqlType::Integer, false,
       "NCCL collectives and send/recv: the call's number on its communicator, given by the probe at its entry "
       "(as `nccl_call_events.seq`): the collective the rank waits in",
       field<&Row::seq>},
  };
  static constexpr Table<Row> kTable{"stalled_calls",
                                     "Calls in flight: judged hung while tracing (written when first seen), or "
                                     "still in flight when the trace stopped.",
                                     TableKind::Log, kColumns, {}, true};
};

}  // namespace causeway::model
CAUSEWAY_TABLE(StalledCalls);
