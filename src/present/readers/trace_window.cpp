// SPDX-License-Identifier: Apache-2.0
#include "causeway/present/trace_window.h"

#include "causeway/common/error.h"
#include "causeway/common/time.h"

namespace causeway::present {

void WindowFlags::add_to(CLI::App* cmd) {
  cmd->add_option("--since", since, "Only events in the last DURATION (wall clock), e.g. 30m");
  cmd->add_option("--from", from,
                  "Only events at or after TIME (RFC 3339, @unix-seconds, or a duration ago)");
  cmd->add_option("--to", to, "Only events before TIME (same forms as --from)");
  cmd->add_option("--pid", pid, "Only this process");
}

TraceWindow WindowFlags::resolve(int64_t now_ns) const {
  TraceWindow w;
  if (!since.empty() && !from.empty()) throw UsageError("use --since or --from, not both");
  if (!since.empty()) w.from_ns = now_ns - parse_duration_ns(since);
  if (!from.empty()) w.from_ns = parse_time_ns(from, now_ns);
  if (!to.empty()) w.to_ns = parse_time_ns(to, now_ns);
  if (w.from_ns && w.to_ns && *w.to_ns <= *w.from_ns)
    throw UsageError("--to must be later than --from");
  w.pid = pid;
  return w;
}

}  // namespace causeway::present
