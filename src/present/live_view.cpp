// SPDX-License-Identifier: Apache-2.0
#include "causeway/present/live_view.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "causeway/common/op_table.h"
#include "causeway/common/time.h"
#include "causeway/present/explain_format.h"

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

LiveView::LiveView(LiveMode mode, analyze::RecentExplain* recent)
    : mode_(mode == LiveMode::Auto ? (isatty(STDOUT_FILENO) ? LiveMode::Table : LiveMode::Lines) : mode),
      recent_(recent) {}

void LiveView::started(const std::string& db_path) {
  db_path_ = db_path;
  if (recent_ && mode_ != LiveMode::Off) recent_->start(db_path);
}

std::string format_recent(const analyze::RecentSnapshot& r, size_t max_threads, size_t max_chains) {
  const auto& e = r.explanation;
  if (!r.error.empty()) return "recent explain failed: " + r.error + "\n";
  std::string out;
  for (size_t i = 0; i < e.accounts.size() && i < max_threads; i++) {
    const auto& a = e.accounts[i];
    out += "  " + std::to_string(a.pid) + "/" + std::to_string(a.tid) + (a.name.empty() ? "" : " " + a.name) + ": " +
           account_line(a) + "\n";
  }
  for (size_t i = 0; i < e.chains.size() && i < max_chains; i++) {
    const auto& c = e.chains[i];
    out += "  " + std::string(analyze::severity_name(c.severity)) + " " + c.root_cause + " (pid " +
           std::to_string(c.symptom.pid) + (c.symptom.comm.empty() ? "" : " " + c.symptom.comm) + ")" +
           (c.frame ? " at " + c.frame->where() : "") + "\n";
  }
  return out;
}

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
    screen += "\n" + host_line(s.host) + "\n";
    if (auto r = recent_ ? recent_->latest() : nullptr) {
      screen += "\nlast " + format_duration(r->to_ns - r->from_ns) + " (causeway explain, every few seconds):\n";
      const std::string lines = format_recent(*r, 6, 4);
      screen += lines.empty() ? "  no thread issued CUDA calls\n" : lines;
    }
    screen += "(Ctrl-C to stop)\n";
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
  // Each new recent explain, once, with its thread accounts and chains.
  if (auto r = recent_ ? recent_->latest() : nullptr; r && r->seq != recent_seq_shown_) {
    recent_seq_shown_ = r->seq;
    const std::string lines = format_recent(*r, 3, 3);
    if (!lines.empty())
      std::printf("causeway: last %s:\n%s", format_duration(r->to_ns - r->from_ns).c_str(), lines.c_str());
  }
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
  // How each process was seen: its CUDA runtime and the layers probed.
  constexpr size_t kShownProcesses = 10;
  for (size_t i = 0; i < sum.processes.size() && i < kShownProcesses; i++) {
    const auto& ps = sum.processes[i];
    std::printf("process %u %s: %s\n", ps.pid, ps.comm.c_str(), ps.coverage.c_str());
  }
  if (sum.processes.size() > kShownProcesses)
    std::printf("(+%zu more processes)\n", sum.processes.size() - kShownProcesses);
  if (sum.launch_probed_share < 0.995)
    std::printf("launches: probed %.1f%% of the time (--launch-duty): launch counts, launching time and "
                "kernel rows cover those windows; every other call is exact\n",
                100 * sum.launch_probed_share);
  if (sum.launch_window_cost > 0)
    std::printf("launch windows: probing cost up to %.1f%% of a window's time (its traps and its programs' run "
                "time, measured), and the windows are sized for it\n",
                100 * sum.launch_window_cost);
  if (sum.duty_toggles)
    std::printf("launch windows: probes attached or detached %lld times (up to %lld probes), %s in all, the "
                "longest %s\n",
                (long long)sum.duty_toggles, (long long)sum.duty_links_max, format_duration(sum.duty_toggle_ns).c_str(),
                format_duration(sum.duty_toggle_max_ns).c_str());
  if (!sum.single_stepped.empty()) {
    // The kernel single-steps these functions' first instruction: every
    // traced call through them cost that much more (causeway check).
    std::string names;
    int64_t extra = 0;
    for (const auto& e : sum.single_stepped) {
      names += (names.empty() ? "" : ", ") + e.symbol + " (" + std::to_string(e.calls) + ")";
      extra = std::max(extra, e.extra_ns);
    }
    std::printf("probes: calls single-stepped at entry on this host, up to %s more each: %s\n",
                format_duration(extra).c_str(), names.c_str());
    if (sum.launch_trap_ns > 0)
      std::printf("launch windows: sized for %s a launch, the launches single-stepped (--launch-duty)\n",
                  format_duration(sum.launch_trap_ns).c_str());
  }
  if (shed)
    std::printf("overload: %lld rows of fast calls shed (planned: their calls are counted in "
                "op_stats; slow calls, stacks and host context kept)\n", (long long)shed);
  if (sum.unprobed_returns)
    std::printf("tensors: %lld allocation%s not recorded: the first through each of the allocator's %lld call "
                "site%s returns before its return there is probed (drops table, source retsite)\n",
                (long long)sum.unprobed_returns, sum.unprobed_returns == 1 ? "" : "s", (long long)sum.return_sites,
                sum.return_sites == 1 ? "" : "s");
  if (drops)
    std::printf("WARNING: %lld records dropped (by source: drops table); exact per-op counts are "
                "kept in op_stats; a full ring buffer needs a larger --ring-mb\n", (long long)drops);
  std::printf("trace: %s (%lld rows)\n", sum.db_path.c_str(), (long long)rows);
  std::fflush(stdout);
}

}  // namespace causeway::present
