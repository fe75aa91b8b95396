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
};

struct LaunchWindows {
  using Row = LaunchWindow;
  static constexpr Column<Row> kColumns[] = {
      {"ts_ns", SqlType::Integer, true, "when the launch probes were attached", field<&Row::ts_ns>},
      {"end_ns", SqlType::Integer, true,
       "when detaching began (the probes' entries stopped counting then; every call counted began before it), "
       "or the trace ended",
       field<&Row::end_ns>},
  };
  static constexpr Table<Row> kTable{"launch_windows",
                                     "When launches were probed under `trace --launch-duty`; none: all the time.",
                                     TableKind::Log, kColumns, {}, false};
};

}  // namespace causeway::model
CAUSEWAY_TABLE(LaunchWindows);
