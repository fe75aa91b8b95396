// SPDX-License-Identifier: Apache-2.0
#pragma once
// When the once-per-launch probes (kernel launches, cuKernelGetFunction) were
// attached. Under `trace --launch-duty` (the default: adaptive) they are
// attached only part of the time, so launch rows, counts and histograms
// cover these windows only; every other call is traced throughout. A trace
// with no rows here had them attached all the time.
#include "causeway/model/family.h"

namespace causeway::model {

struct LaunchWindow {
  int64_t ts_ns = 0;   // attached
  int64_t end_ns = 0;  // detached (or the trace ended)
  int64_t trap_ns = 0;  // what each launch probed in it cost the launching thread
};

struct LaunchWindows {
  using Row = LaunchWindow;
  static constexpr Column<Row> kColumns[] = {
      {"ts_ns", SqlType::Integer, true, "when the launch probes were attached", field<&Row::ts_ns>},
      {"end_ns", SqlType::Integer, true,
       "when detaching began (the probes' entries stopped counting then; every call counted began before it), "
       "or the trace ended",
       field<&Row::end_ns>},
      {"trap_ns", SqlType::Integer, false,
       "what the entry and return probes of each launch in it cost the launching thread, as the agent reckoned "
       "it: 2000 (the pair measured on the H100 VM), plus what single-stepping the launch function's first "
       "instruction costs on this host where it does; NULL before schema 20 (2000)",
       field<&Row::trap_ns>},
  };
  static constexpr Table<Row> kTable{"launch_windows",
                                     "When launches were probed under `trace --launch-duty`; none: all the time.",
                                     TableKind::Log, kColumns, {}, false};
};

}  // namespace causeway::model
CAUSEWAY_TABLE(LaunchWindows);
