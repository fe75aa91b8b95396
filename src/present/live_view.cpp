// SPDX-License-Identifier: Apache-2.0
#include "causeway/present/live_view.h"

#include <unistd.h>

#include <cstdio>

#include "causeway/common/op_table.h"
#include "causeway/common/time.h"

namespace causeway::present {
namespace {

std::string host_line(const consume::HostTotals& h) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "host: off-CPU %s in %lld intervals (%s runnable) | I/O %lld req %s | "
                "retransmits %lld | reclaim %s",
                format_duration(h.offcpu_ns).c_str(), (long long)h.offcpu_count,
                format_duration(h.offcpu_runnable_ns).c_str(), (long long)h.io_count,
                format_duration(h.io_ns).c_str(), (long long)h.retransmits,
                format_duration(h.reclaim_ns).c_str());
  return buf;
}

}  // namespace

LiveView::LiveView(LiveMode mode)
    : mode_(mode == LiveMode::Auto ? (isatty(STDOUT_FILENO) ? LiveMode::Table : LiveMode::Lines) : mode) {}

std::string format_op_table(const consume::LiveStats& s, bool interval_flags) {
  std::string out;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-26s %9s %9s %9s %9s %9s  %s\n", "OP", "CALLS", "P50", "P95",
                "P99", "MAX", "");
  out += buf;
  for (const auto& [op_id, h] : s.ops) {
    const OpSpec* op = find_op(op_id);
    std::string flag;
    if (interval_flags) {
      // A spike: this second's slowest call is 10x the op's running median
      // and at least a millisecond.
      auto it = s.interval.find(op_id);
      if (it != s.interval.end() && it->second.max() > 10 * h.percentile(50) &&
          it->second.max() >= kNsPerMs)
        flag = "SPIKE " + format_duration(it->second.max());
    }
    std::snprintf(buf, sizeof buf, "%-26s %9lld %9s %9s %9s %9s  %s\n",
                  op ? std::string(op->name).c_str() : "?", (long long)h.count(),
                  format_duration(h.percentile(50)).c_str(), format_duration(h.percentile(95)).c_str(),
                  format_duration(h.percentile(99)).c_str(), format_duration(h.max()).c_str(),
                  flag.c_str());
    out += buf;
  }
  return out;
}

void LiveView::every_second(const agent::Progress& p) {
  const auto& s = p.stats;
  const int64_t drops = p.dropped, elapsed_ns = p.elapsed_ns, rows = p.rows;
  if (mode_ == LiveMode::Off) return;
  if (mode_ == LiveMode::Table) {
    std::string screen = "\033[H\033[2J";
    char head[512];
    std::snprintf(head, sizeof head, "causeway trace  %s  -> %s  rows %lld  dropped %lld\n\n",
                  format_duration(elapsed_ns).c_str(), db_path_.c_str(), (long long)rows,
                  (long long)drops);
    screen += head;
    screen += format_op_table(s, true);
    screen += "\n" + host_line(s.host) + "\n(Ctrl-C to stop)\n";
    std::fputs(screen.c_str(), stdout);
    std::fflush(stdout);
    return;
  }
  if (elapsed_ns - last_line_ns_ < 5 * kNsPerSec) return;
  last_line_ns_ = elapsed_ns;
  int64_t calls = 0;
  for (const auto& [_, h] : s.ops) calls += h.count();
  std::printf("causeway: %s: %lld calls, %lld rows, dropped %lld; %s\n",
              format_duration(elapsed_ns).c_str(), (long long)calls, (long long)rows,
              (long long)drops, host_line(s.host).c_str());
  std::fflush(stdout);
}

void LiveView::finished(const agent::Progress& p, const agent::TraceSummary& sum) {
  const auto& s = p.stats;
  const int64_t drops = sum.dropped, shed = sum.shed, rows = sum.rows;
  if (mode_ == LiveMode::Table) std::fputs("\033[H\033[2J", stdout);
  std::printf("causeway trace: %s after %s; %d functions probed in %zu library files\n",
              sum.stop_reason.c_str(), format_duration(p.elapsed_ns).c_str(), sum.ops_attached,
              sum.library_files);
  if (!s.ops.empty()) std::fputs(format_op_table(s, false).c_str(), stdout);
  std::printf("%s\n", host_line(s.host).c_str());
  if (sum.launch_probed_share < 0.995)
    std::printf("launches: probed %.1f%% of the time (--launch-duty): launch counts, launching time and "
                "kernel rows cover those windows; every other call is exact\n",
                100 * sum.launch_probed_share);
  if (shed)
    std::printf("overload: %lld rows of fast calls shed (planned: their calls are counted in "
                "op_stats; slow calls, stacks and host context kept)\n", (long long)shed);
  if (drops)
    std::printf("WARNING: %lld records dropped (by source: drops table); exact per-op counts are "
                "kept in op_stats; a full ring buffer needs a larger --ring-mb\n", (long long)drops);
  std::printf("trace: %s (%lld rows)\n", sum.db_path.c_str(), (long long)rows);
  std::fflush(stdout);
}

}  // namespace causeway::present
