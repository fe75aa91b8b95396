// SPDX-License-Identifier: Apache-2.0
#include "causeway/present/html_report.h"

#include "causeway/analyze/engine.h"
#include "causeway/analyze/trace_stats.h"
#include "causeway/common/numbers.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "causeway/common/time.h"
#include "causeway/analyze/trace_view.h"

namespace causeway::present {
namespace {

std::string esc(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string num(double v) {
  std::ostringstream s;
  s.setf(std::ios::fixed);
  s.precision(1);
  s << v;
  return s.str();
}

std::string thousands(int64_t v) {
  std::string s = std::to_string(v);
  for (int i = int(s.size()) - 3; i > (v < 0 ? 1 : 0); i -= 3) s.insert(size_t(i), ",");
  return s;
}

constexpr const char* kStyle = R"(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px auto;max-width:1100px;color:#1d2330;background:#fbfbfd}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #dde;padding-bottom:4px}
.meta{color:#5a6272;font-size:13px}table{border-collapse:collapse;width:100%;font-size:13px}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #e6e8ef;vertical-align:middle}th{background:#f0f2f7;font-weight:600}
td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}code{font-size:12px}
.chain{border:1px solid #dde;border-left:5px solid #999;border-radius:4px;padding:8px 12px;margin:10px 0;background:#fff}
.chain.HIGH{border-left-color:#c62828}.chain.MEDIUM{border-left-color:#ef8f00}.chain.LOW{border-left-color:#2e7d32}
.chain h3{margin:0 0 4px;font-size:15px}.sev{font-size:11px;font-weight:700;padding:1px 6px;border-radius:3px;color:#fff;background:#999;margin-right:6px}
.CRITICAL .sev{background:#6a1b9a}.HIGH .sev{background:#c62828}.MEDIUM .sev{background:#ef8f00}.LOW .sev{background:#2e7d32}
.chain ul{margin:4px 0 0 18px;padding:0}.note{color:#5a6272;font-style:italic}
svg text{font:11px system-ui,sans-serif;fill:#1d2330}.legend span{margin-right:10px;font-size:12px}.legend i{display:inline-block;width:10px;height:10px;margin-right:4px}.bar{fill:#4a6fd8}.symptom{fill:#c62828}.offcpu{fill:#ef8f00}
.io{fill:#6d4c9f}.reclaim{fill:#8d6e63}.nccl{fill:#00897b}.other{fill:#78909c}.call{fill:#4a6fd8}.hist{fill:#7f9be6}
)";

// A horizontal bar scaled to `max` inside a small inline SVG.
std::string bar(double value, double max, int width = 160) {
  const double w = max > 0 ? std::max(1.0, value / max * width) : 0;
  return "<svg width=\"" + std::to_string(width) + "\" height=\"12\"><rect class=\"bar\" x=\"0\" "
         "y=\"1\" height=\"10\" width=\"" + num(w) + "\"/></svg>";
}

// Durations in log2 buckets from 1 µs (2^10 ns) to ~17 s (2^34 ns).
std::string histogram(const std::vector<int64_t>& durs) {
  constexpr int kLo = 10, kHi = 34, kBuckets = kHi - kLo + 1, kW = 6, kH = 28;
  std::vector<int64_t> b(kBuckets, 0);
  for (int64_t d : durs) {
    int k = d > 0 ? int(std::floor(std::log2(double(d)))) : 0;
    b[std::clamp(k, kLo, kHi) - kLo]++;
  }
  const int64_t top = *std::max_element(b.begin(), b.end());
  std::string s = "<svg width=\"" + std::to_string(kBuckets * kW) + "\" height=\"" +
                  std::to_string(kH) + "\" role=\"img\"><title>latency histogram, log2 "
                  "buckets from 1 us to 17 s</title>";
  for (int i = 0; i < kBuckets; i++) {
    if (!b[i]) continue;
    const double h = std::max(1.0, double(b[i]) / double(top) * kH);
    s += "<rect class=\"hist\" x=\"" + std::to_string(i * kW) + "\" y=\"" + num(kH - h) +
         "\" width=\"" + std::to_string(kW - 1) + "\" height=\"" + num(h) + "\"><title>" +
         esc(format_duration(int64_t(1) << (i + kLo))) + "+: " + std::to_string(b[i]) +
         "</title></rect>";
  }
  return s + "</svg>";
}

struct Lane {
  std::string label;
  std::vector<ReportChain::Span> spans;
};

std::pair<int64_t, int64_t> extent(const std::vector<ReportChain::Span>& spans) {
  int64_t t0 = INT64_MAX, t1 = INT64_MIN;
  for (const auto& s : spans) {
    t0 = std::min(t0, s.ts_ns);
    t1 = std::max(t1, s.ts_ns + std::max<int64_t>(s.dur_ns, 0));
  }
  return {t0, t1};
}

// Lanes of bars. On a shared time axis (the slowest calls), or each lane on
// its own (a chain's evidence lies inside its symptom call, and chains can be
// hours apart).
std::string timeline(const std::vector<Lane>& lanes, bool shared_axis, int64_t& bars) {
  std::vector<ReportChain::Span> all;
  for (const auto& l : lanes) all.insert(all.end(), l.spans.begin(), l.spans.end());
  auto [t0, t1] = extent(all);
  if (t0 == INT64_MAX) return "";
  double span = double(std::max<int64_t>(t1 - t0, 1));
  constexpr int kLabel = 230, kPlot = 720, kRow = 22;
  const int height = int(lanes.size()) * kRow + (shared_axis ? 24 : 4);
  std::string s = "<svg class=\"timeline\" width=\"" + std::to_string(kLabel + kPlot + 80) +
                  "\" height=\"" + std::to_string(height) + "\">";
  for (size_t i = 0; i < lanes.size(); i++) {
    const int y = int(i) * kRow;
    std::string label = lanes[i].label.size() > 34 ? lanes[i].label.substr(0, 33) + "…"
                                                   : lanes[i].label;
    s += "<text x=\"0\" y=\"" + std::to_string(y + 15) + "\">" + esc(label) + "</text>";
    s += "<line x1=\"" + std::to_string(kLabel) + "\" x2=\"" + std::to_string(kLabel + kPlot) +
         "\" y1=\"" + std::to_string(y + 11) + "\" y2=\"" + std::to_string(y + 11) +
         "\" stroke=\"#e6e8ef\"/>";
    if (!shared_axis) {
      auto [l0, l1] = extent(lanes[i].spans);
      if (l0 == INT64_MAX) continue;
      t0 = l0;
      span = double(std::max<int64_t>(l1 - l0, 1));
      s += "<text x=\"" + std::to_string(kLabel + kPlot + 6) + "\" y=\"" +
           std::to_string(y + 15) + "\">" + esc(format_duration(l1 - l0)) + "</text>";
    }
    for (const auto& sp : lanes[i].spans) {
      const double x = kLabel + double(sp.ts_ns - t0) / span * kPlot;
      const double w = std::max(2.0, double(std::max<int64_t>(sp.dur_ns, 0)) / span * kPlot);
      s += "<rect class=\"" + esc(sp.kind) + "\" x=\"" + num(x) + "\" y=\"" +
           std::to_string(y + 4) + "\" width=\"" + num(w) + "\" height=\"14\" rx=\"2\"><title>" +
           esc(sp.label) + " (" + esc(format_duration(sp.dur_ns)) + ")</title></rect>";
      bars++;
    }
  }
  if (!shared_axis) return s + "</svg>";
  const int ay = int(lanes.size()) * kRow + 16;
  s += "<text x=\"" + std::to_string(kLabel) + "\" y=\"" + std::to_string(ay) + "\">" +
       esc(format_wall_time(t0)) + "</text>";
  s += "<text x=\"" + std::to_string(kLabel + kPlot) + "\" y=\"" + std::to_string(ay) +
       "\" text-anchor=\"end\">+" + esc(format_duration(t1 - t0)) + "</text>";
  return s + "</svg>";
}

// The page's head, its style, and the meta block: the title and each session.
void write_header(std::ostream& out, store::Connection& db, const std::string& title) {
  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
         "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
         "<title>causeway report: " << esc(title) << "</title><style>" << kStyle
      << "</style></head><body>\n";
  out << "<h1>causeway report</h1><div class=\"meta\">" << esc(title);
  for (const auto& s : analyze::sessions(db)) {
    out << "<br>session on <b>" << esc(s.host) << "</b> (" << esc(s.source) << "), "
        << esc(format_wall_time(s.start_ts_ns));
    if (s.end_ts_ns) out << " for " << esc(format_duration(*s.end_ts_ns - s.start_ts_ns));
    out << ": <code>" << esc(s.command_line) << "</code>";
  }
  out << "<br>generated by causeway " CAUSEWAY_VERSION " at " << esc(format_wall_time(wall_now_ns()))
      << "</div>\n";
}

void write_chains(std::ostream& out, const std::vector<ReportChain>& chains, ReportCounts& n) {
  out << "<h2 id=\"chains\">Causal chains</h2>\n";
  if (chains.empty()) {
    out << "<p class=\"note\">No causal chain found: nothing in this window was slow for a reason "
           "the rules recognise.</p>\n";
  }
  for (const auto& c : chains) {
    out << "<div class=\"chain " << esc(c.severity) << "\"><h3><span class=\"sev\">"
        << esc(c.severity) << "</span><span class=\"chain-title\">" << esc(c.title)
        << "</span></h3><ul>";
    for (const auto& l : c.lines) out << "<li>" << esc(l) << "</li>";
    out << "</ul></div>\n";
    n.chains++;
  }
}

analyze::ExplainOptions explain_options(const TraceWindow& w) {
  analyze::ExplainOptions opts;
  if (w.from_ns) opts.from_ns = w.from_ns;
  if (w.to_ns) opts.to_ns = w.to_ns;
  if (w.pid) opts.pid = uint32_t(*w.pid);
  return opts;
}

// What each process's steps wait for: its critical path, one bar of the
// judged time by class, thread and line (docs/explain.md).
void write_critical_paths(std::ostream& out, const std::vector<analyze::ProcessPath>& paths,
                          ReportCounts& n) {
  out << "<h2 id=\"path\">What the steps wait for (the critical path)</h2>\n";
  if (paths.empty()) out << "<p class=\"note\">No process had a loop to follow.</p>\n";
  for (const auto& p : paths) {
    static const char* const path_colors[] = {"#4a6fd8", "#c62828", "#ef9a9a", "#6d4c9f", "#8d6e63", "#00897b",
                                              "#78909c", "#ef8f00", "#fdd835", "#5d4037", "#9e9e9e", "#26a69a",
                                              "#ab47bc", "#ec407a", "#7e57c2", "#29b6f6", "#d4e157", "#ff7043",
                                              "#8bc34a"};
    const int w_px = 720, h_px = 28;
    out << "<h3>pid " << p.pid << " " << esc(p.thread) << " (" << p.tid << ")</h3><p>" << esc(p.text) << "</p>";
    out << "<svg class=\"path\" width=\"" << w_px << "\" height=\"" << h_px << "\" role=\"img\">";
    double x = 0;
    const double total = double(std::max<int64_t>(1, p.covered_ns()));
    for (const auto& part : p.parts) {
      const double wdt = double(part.ns) / total * w_px;
      if (wdt < 0.5) continue;
      out << "<rect class=\"path-" << analyze::path_class_key(part.cls) << "\" x=\"" << x << "\" y=\"0\" width=\""
          << wdt << "\" height=\"" << h_px << "\" fill=\"" << path_colors[int(part.cls) % 19] << "\"><title>"
          << esc(std::string(analyze::path_class_words(part.cls)) + " " + pct(double(part.ns) / total) + " on " +
                 (part.thread.empty() ? std::to_string(part.tid) : part.thread) +
                 (part.frame ? " at " + part.frame->where() : std::string()))
          << "</title></rect>";
      x += wdt;
      n.path_parts++;
    }
    out << "</svg>\n";
  }
}

// Where each dispatcher thread's time goes, over time: a stacked bar per slice.
void write_accounts(std::ostream& out, const std::vector<analyze::ThreadAccount>& accounts,
                    ReportCounts& n) {
  out << "<h2 id=\"account\">Where each thread's time goes</h2>\n";
  if (accounts.empty()) out << "<p class=\"note\">No thread made enough CUDA calls to account for.</p>\n";
  static const char* const colors[] = {"#4a6fd8", "#c62828", "#ef9a9a", "#6d4c9f", "#8d6e63", "#00897b",
                                       "#78909c", "#ef8f00", "#fdd835", "#5d4037", "#9e9e9e"};
  const auto& parts = analyze::split_parts();
  out << "<div class=\"legend\">";
  for (size_t p = 0; p < parts.size(); p++)
    out << "<span><i style=\"background:" << colors[p % 11] << "\"></i>" << esc(parts[p].words) << "</span> ";
  out << "</div>\n";
  for (const auto& a : accounts) {
    const int slices = int(a.over_time.size());
    const int w_px = 720, h_px = 120, bar = slices ? w_px / slices : w_px;
    out << "<h3>thread " << a.tid << (a.name.empty() ? "" : " " + esc(a.name)) << " (pid " << a.pid << ")</h3>";
    out << "<svg class=\"account\" width=\"" << w_px << "\" height=\"" << h_px + 16 << "\" role=\"img\">";
    for (int i = 0; i < slices; i++) {
      const auto& t = a.over_time[size_t(i)];
      const double total = double(std::max<int64_t>(1, t.total()));
      double y = h_px;
      for (size_t p = 0; p < parts.size(); p++) {
        const double h = double(t.*parts[p].field) / total * h_px;
        if (h <= 0) continue;
        y -= h;
        out << "<rect class=\"part-" << parts[p].key << "\" x=\"" << i * bar << "\" y=\"" << y << "\" width=\""
            << bar - 1 << "\" height=\"" << h << "\" fill=\"" << colors[p % 11] << "\"><title>"
            << esc(parts[p].words) << " " << esc(pct(double(t.*parts[p].field) / total)) << "</title></rect>";
        n.account_bars++;
      }
    }
    out << "<text x=\"0\" y=\"" << h_px + 13 << "\">" << esc(format_wall_time(a.from_ns)) << "</text>"
        << "<text x=\"" << w_px << "\" y=\"" << h_px + 13 << "\" text-anchor=\"end\">+"
        << esc(format_duration(a.span_ns())) << "</text></svg>\n";
  }
}

// The memory charts' colours: the five sites that hold the most, then the other sites.
constexpr const char* kSiteColors[] = {"#4a6fd8", "#c62828", "#00897b", "#ef8f00", "#6d4c9f", "#9e9e9e"};

// A process's totals, and with PyTorch's allocator probed, its tensors'.
void write_memory_summary(std::ostream& out, const analyze::ProcessMemory& m, bool by_tensor) {
  out << "<h3>pid " << m.pid << (m.comm.empty() ? "" : " " + esc(m.comm)) << "</h3><p>"
      << esc(format_bytes(uint64_t(m.held_to)))
      << (m.exit_frees || m.tensors.exit_frees ? " held when its GPU work ended (frees at exit set aside), peak "
                                               : " held at the end, peak ")
      << esc(format_bytes(uint64_t(m.peak)))
      << "; " << m.allocations << " allocations, " << m.frees << " frees, " << m.failed << " failed"
      << (m.gpu_total ? ", GPU " + esc(format_bytes(uint64_t(*m.gpu_total))) : std::string()) << "</p>";
  if (by_tensor)
    out << "<p>tensors: " << esc(format_bytes(uint64_t(m.tensors.held_to))) << " allocated of "
        << esc(format_bytes(uint64_t(m.held_to))) << " reserved at the end, peak "
        << esc(format_bytes(uint64_t(m.tensors.peak))) << "; " << m.tensors.allocations << " tensors, "
        << m.tensors.frees << " freed" << (m.tensors.windowed ? " (allocator probed in windows only)" : "")
        << "</p>";
}

// The chart's height in bytes.
int64_t memory_scale(const analyze::ProcessMemory& m, const std::vector<int64_t>& totals) {
  int64_t scale = 1;
  for (size_t b = 0; b < m.held_over_time.size(); b++) scale = std::max(scale, m.held_over_time[b]);
  for (size_t b = 0; b < totals.size(); b++) scale = std::max(scale, totals[b]);
  // Against the process's own peak, so that 374 MiB held on an 80 GiB GPU
  // is not a hairline; against the whole GPU once the peak is half of it
  // (how close to full is then the point).
  if (m.gpu_total && 2 * scale >= *m.gpu_total) scale = std::max(scale, *m.gpu_total);
  return scale;
}

void write_memory_legend(std::ostream& out, const std::vector<analyze::HeldSite>& sites, size_t top,
                         bool by_tensor, int64_t scale) {
  out << "<div class=\"legend\">";
  for (size_t i = 0; i < top; i++)
    out << "<span><i style=\"background:" << kSiteColors[i] << "\"></i>"
        << esc(sites[i].where.empty() ? std::string("no Python stack") : sites[i].where) << " ("
        << esc(format_bytes(uint64_t(sites[i].bytes))) << ")</span> ";
  out << "<span><i style=\"background:" << kSiteColors[5] << "\"></i>other sites</span> ";
  if (by_tensor) out << "<span><i style=\"background:#000\"></i>reserved by the pool</span> ";
  out << "<span>(chart height " << esc(format_bytes(uint64_t(scale))) << ")</span></div>\n";
}

// A stacked bar per boundary, by the `top` sites and the rest; with tensors
// drawn, the pool's reserved bytes as a line over them.
void write_memory_chart(std::ostream& out, const analyze::ProcessMemory& m,
                        const std::vector<analyze::HeldSite>& sites, const std::vector<int64_t>& totals,
                        size_t top, bool by_tensor, int64_t scale, ReportCounts& n) {
  const int w_px = 720, h_px = 120, bars = int(totals.size()), bar = bars ? w_px / bars : w_px;
  out << "<svg class=\"memory\" width=\"" << w_px << "\" height=\"" << h_px + 16 << "\" role=\"img\">";
  for (int b = 0; b < bars; b++) {
    double y = h_px;
    int64_t sites_sum = 0;
    auto seg = [&](int64_t bytes, const char* color, const std::string& what) {
      if (bytes <= 0) return;
      const double h = double(bytes) / double(scale) * h_px;
      y -= h;
      out << "<rect class=\"held\" x=\"" << b * bar << "\" y=\"" << y << "\" width=\"" << bar - 2
          << "\" height=\"" << h << "\" fill=\"" << color << "\"><title>" << esc(what) << " "
          << esc(format_bytes(uint64_t(bytes))) << "</title></rect>";
      n.memory_bars++;
    };
    for (size_t i = 0; i < top; i++) {
      const auto& site = sites[i];
      const int64_t v = size_t(b) < site.over_time.size() ? site.over_time[size_t(b)] : 0;
      sites_sum += v;
      seg(v, kSiteColors[i], site.where.empty() ? "no Python stack" : site.where);
    }
    seg(totals[size_t(b)] - sites_sum, kSiteColors[5], "other sites");
  }
  if (by_tensor) {
    out << "<polyline class=\"reserved\" fill=\"none\" stroke=\"#000\" stroke-width=\"1.5\" points=\"";
    for (size_t b = 0; b < m.held_over_time.size(); b++) {
      const double y = h_px - double(m.held_over_time[b]) / double(scale) * h_px;
      out << b * bar << "," << y << " " << (b + 1) * bar - 2 << "," << y << " ";
    }
    out << "\"><title>reserved by the pool</title></polyline>";
    n.memory_reserved_lines++;
  }
  if (!m.boundaries_ns.empty())
    out << "<text x=\"0\" y=\"" << h_px + 13 << "\">" << esc(format_wall_time(m.boundaries_ns.front()))
        << "</text><text x=\"" << w_px << "\" y=\"" << h_px + 13 << "\" text-anchor=\"end\">+"
        << esc(format_duration(m.boundaries_ns.back() - m.boundaries_ns.front())) << "</text>";
  out << "</svg>\n";
}

void write_oom_failures(std::ostream& out, const std::vector<analyze::AllocFailure>& failures) {
  if (failures.empty()) return;
  out << "<ul>";
  for (const auto& f : failures)
    out << "<li class=\"oom\">" << esc(format_wall_time(f.ts_ns)) << " " << esc(f.op) << " of "
        << esc(format_bytes(uint64_t(f.asked))) << " failed out of memory"
        << (f.where.empty() ? "" : " at " + esc(f.where)) << ", holding " << esc(format_bytes(uint64_t(f.held)))
        << "</li>";
  out << "</ul>\n";
}

// GPU memory held per process, by the line that allocated it, over time.
void write_memory(std::ostream& out, store::Connection& db, const TraceWindow& w, ReportCounts& n) {
  const auto memory = analyze::gpu_memory(db, explain_options(w));
  out << "<h2 id=\"memory\">GPU memory held</h2>\n";
  if (memory.empty()) out << "<p class=\"note\">No allocations were traced.</p>\n";
  for (const auto& m : memory) {
    // With PyTorch's allocator probed, the bars are what its tensors held,
    // by the line that keeps them (the cause), and a line over them what
    // its pool reserved from the driver: the gap is the pool's cache.
    const bool by_tensor = m.tensors.traced && !m.tensors.held_over_time.empty();
    const auto& sites = by_tensor ? m.tensors.held_by_site : m.held_by_site;
    const auto& totals = by_tensor ? m.tensors.held_over_time : m.held_over_time;
    write_memory_summary(out, m, by_tensor);
    const size_t top = std::min<size_t>(sites.size(), 5);
    const int64_t scale = memory_scale(m, totals);
    write_memory_legend(out, sites, top, by_tensor, scale);
    write_memory_chart(out, m, sites, totals, top, by_tensor, scale, n);
    write_oom_failures(out, m.failures);
  }
}

// The top chains, or (none) the slowest calls per thread.
void write_timeline(std::ostream& out, store::Connection& db, const TraceWindow& w,
                    const std::vector<ReportChain>& chains, ReportCounts& n) {
  std::vector<Lane> lanes;
  std::string timeline_title;
  if (!chains.empty()) {
    timeline_title = "Timeline of the top chains";
    for (size_t i = 0; i < chains.size() && i < 10; i++)
      lanes.push_back({chains[i].title, chains[i].spans});
  } else {
    timeline_title = "Timeline of the slowest calls";
    std::map<std::pair<int64_t, int64_t>, Lane> by_thread;
    for (const auto& c : analyze::slowest_calls(db, w, 40)) {
      auto& lane = by_thread[{c.pid, c.tid}];
      lane.label = "pid " + std::to_string(c.pid) + " tid " + std::to_string(c.tid);
      lane.spans.push_back({c.op, "call", c.ts_ns, c.dur_ns});
    }
    for (auto& [k, l] : by_thread) lanes.push_back(std::move(l));
  }
  out << "<h2 id=\"timeline\">" << timeline_title << "</h2>\n";
  std::string svg = timeline(lanes, chains.empty(), n.timeline_bars);
  if (!chains.empty() && !svg.empty())
    out << "<p class=\"meta\">Each lane spans its chain's slowest symptom call (red) and the "
           "host events inside it; the duration is on the right.</p>\n";
  out << (svg.empty() ? "<p class=\"note\">No calls in this window.</p>" : svg) << "\n";
}

void write_latency(std::ostream& out, store::Connection& db, const TraceWindow& w, ReportCounts& n) {
  out << "<h2 id=\"latency\">Latency by operation</h2>\n";
  auto ops = analyze::op_latencies(db, w, "", true);
  if (ops.empty()) {
    out << "<p class=\"note\">No CUDA or NCCL calls in this window.</p>\n";
    return;
  }
  out << "<table><tr><th>op</th><th>layer</th><th>calls</th><th>total</th><th>p50</th>"
         "<th>p95</th><th>p99</th><th>max</th><th>distribution (1 us … 17 s, log scale)</th></tr>\n";
  for (const auto& o : ops) {
    out << "<tr class=\"op\"><td><code>" << esc(o.op) << "</code></td><td>" << esc(o.layer)
        << "</td><td class=\"n\">" << thousands(o.calls) << "</td><td class=\"n\">"
        << esc(format_duration(o.total_ns)) << "</td><td class=\"n\">"
        << esc(format_duration(o.p50_ns)) << "</td><td class=\"n\">"
        << esc(format_duration(o.p95_ns)) << "</td><td class=\"n\">"
        << esc(format_duration(o.p99_ns)) << "</td><td class=\"n\">"
        << esc(format_duration(o.max_ns)) << "</td><td>" << histogram(o.durations_ns)
        << "</td></tr>\n";
    n.ops++;
  }
  out << "</table>\n";
}

void write_copies(std::ostream& out, store::Connection& db, const TraceWindow& w, ReportCounts& n) {
  out << "<h2 id=\"memcpy\">Memory copies by direction</h2>\n";
  auto copies = analyze::memcpy_by_direction(db, w);
  if (copies.empty()) {
    out << "<p class=\"note\">No memory copies in this window.</p>\n";
    return;
  }
  int64_t max_bytes = 0;
  for (const auto& c : copies) max_bytes = std::max(max_bytes, c.bytes);
  out << "<table><tr><th>direction</th><th>calls</th><th>bytes</th><th>time in call</th>"
         "<th></th></tr>\n";
  for (const auto& c : copies) {
    out << "<tr class=\"copy\"><td>" << esc(c.kind) << "</td><td class=\"n\">"
        << thousands(c.calls) << "</td><td class=\"n\">" << esc(format_bytes(uint64_t(c.bytes)))
        << "</td><td class=\"n\">" << esc(format_duration(c.total_ns)) << "</td><td>"
        << bar(double(c.bytes), double(max_bytes)) << "</td></tr>\n";
    n.copy_kinds++;
  }
  out << "</table>\n";
}

void write_kernels(std::ostream& out, store::Connection& db, const TraceWindow& w, ReportCounts& n) {
  out << "<h2 id=\"kernels\">Top kernels by launch count</h2>\n";
  auto kernels = analyze::top_kernels(db, w, 20);
  if (kernels.empty()) {
    out << "<p class=\"note\">No kernel launches with a known name.</p>\n";
    return;
  }
  out << "<table><tr><th>kernel</th><th>launches</th><th>launch-call time</th><th>max</th>"
         "<th></th></tr>\n";
  for (const auto& k : kernels) {
    out << "<tr class=\"kernel\"><td><code>" << esc(k.kernel) << "</code></td><td class=\"n\">"
        << thousands(k.launches) << "</td><td class=\"n\">" << esc(format_duration(k.total_ns))
        << "</td><td class=\"n\">" << esc(format_duration(k.max_ns)) << "</td><td>"
        << bar(double(k.launches), double(kernels.front().launches)) << "</td></tr>\n";
    n.kernels++;
  }
  out << "</table>\n";
}

}  // namespace

ReportCounts write_html_report(store::Connection& db, const std::string& title,
                               const TraceWindow& w, const std::vector<ReportChain>& chains,
                               std::ostream& out) {
  ReportCounts n;
  write_header(out, db, title);
  write_chains(out, chains, n);
  // The critical paths and the time accounts come of one run of the engine.
  const auto explained = analyze::explain(db, explain_options(w));
  write_critical_paths(out, explained.paths, n);
  write_accounts(out, explained.accounts, n);
  write_memory(out, db, w, n);
  write_timeline(out, db, w, chains, n);
  write_latency(out, db, w, n);
  write_copies(out, db, w, n);
  write_kernels(out, db, w, n);
  out << "</body></html>\n";
  return n;
}

}  // namespace causeway::present
