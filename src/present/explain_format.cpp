// SPDX-License-Identifier: Apache-2.0
// explain's two outputs: JSON for programs, text for people. analyze returns
// the Explanation; how it reads is decided here.
#include <sstream>

#include "causeway/analyze/engine.h"
#include "causeway/common/time.h"
#include "causeway/common/numbers.h"
#include "causeway/present/explain_format.h"

namespace causeway::present {

using namespace analyze;

namespace {

nlohmann::json symptom_json(const Symptom& s) {
  nlohmann::json j = {{"pid", s.pid},         {"comm", s.comm},
                      {"op", s.op},           {"calls", s.calls},
                      {"slow_calls", s.slow_calls}, {"p50_ns", s.p50_ns},
                      {"p99_ns", s.p99_ns},   {"max_ns", s.max_ns},
                      {"slower_x", s.slower_x}, {"wall_share", s.wall_share}};
  if (!s.kernel.empty()) j["kernel"] = s.kernel;
  if (s.slow_calls) {
    j["first_slow_ts_ns"] = s.first_ts_ns;
    j["last_slow_ts_ns"] = s.last_ts_ns;
  }
  return j;
}

// Greedy word wrap: `first` prefixes line one, `rest` the others.
void wrap(std::ostringstream& out, const std::string& first, const std::string& rest,
          const std::string& text, size_t width = 80) {
  std::istringstream words(text);
  std::string w, line = first;
  bool empty = true;
  while (words >> w) {
    if (!empty && line.size() + 1 + w.size() > width) {
      out << line << "\n";
      line = rest;
      empty = true;
    }
    line += (empty ? "" : " ") + w;
    empty = false;
  }
  out << line << "\n";
}

std::string clock_of(int64_t ns) {
  auto t = format_wall_time(ns);  // 2026-11-23T00:49:02.123Z
  return t.size() >= 19 ? t.substr(11, 8) : t;
}

}  // namespace

nlohmann::json to_json(const Explanation& e) {
  nlohmann::json j;
  j["db"] = e.db_path;
  j["window"] = {{"from_ns", e.window.from_ns}, {"to_ns", e.window.to_ns}};
  if (e.window.pid) j["window"]["pid"] = *e.window.pid;
  const auto& d = e.data;
  j["data"] = {{"calls", d.calls},       {"nccl_calls", d.nccl_calls},
               {"offcpu_intervals", d.offcpu_intervals}, {"io_requests", d.io_requests},
               {"tcp_retransmits", d.tcp_retransmits}, {"reclaims", d.reclaims},
               {"processes", d.processes}, {"slow_calls", d.slow_calls}, {"drops", d.drops},
               {"drops_by_source", d.drops_by_source}, {"shed", d.shed}, {"complete", d.drops == 0}};
  j["data"]["slowest"] = nlohmann::json::array();
  for (const auto& s : d.slowest) j["data"]["slowest"].push_back(symptom_json(s));
  j["chains"] = nlohmann::json::array();
  for (const auto& c : e.chains) {
    nlohmann::json cj = {{"severity", severity_name(c.severity)},
                         {"root_cause", c.root_cause},
                         {"symptom", symptom_json(c.symptom)},
                         {"recommendation", c.recommendation},
                         {"impact_ns", c.impact_ns}};
    cj["evidence"] = nlohmann::json::array();
    for (const auto& ev : c.evidence) {
      auto ej = ev.data;
      ej["text"] = ev.text;
      cj["evidence"].push_back(ej);
    }
    cj["frame"] = c.frame ? nlohmann::json{{"func", c.frame->func},
                                           {"file", c.frame->file},
                                           {"line", c.frame->line},
                                           {"text", c.frame->text()}}
                          : nlohmann::json(nullptr);
    j["chains"].push_back(cj);
  }
  return j;
}

std::string format_text(const Explanation& e) {
  std::ostringstream out;
  const auto& d = e.data;
  if (d.drops > 0) {
    std::string by;
    for (const auto& [src, n] : d.drops_by_source)
      by += (by.empty() ? "" : ", ") + src + " " + std::to_string(n);
    wrap(out, "DATA LOSS: ", "  ",
         std::to_string(d.drops) + " records were dropped (" + by +
             "): counts below are lower bounds and some slow calls may be missing.");
  }
  if (d.shed > 0)
    wrap(out, "SHED: ", "  ",
         std::to_string(d.shed) + " rows of fast calls (< 100 us) were not recorded under overload, "
         "as planned: per-op counts are exact, slow calls and stacks were kept.");
  if (e.window.span_ns() == 0 && d.calls == 0) {
    out << "empty trace: no events in " << e.db_path << "\n";
    return out.str();
  }
  out << "window " << format_wall_time(e.window.from_ns) << " + "
      << format_duration(e.window.span_ns());
  if (e.window.pid) out << ", pid " << *e.window.pid;
  out << "\n" << d.calls << " CUDA calls, " << d.nccl_calls << " NCCL calls, " << d.processes
      << (d.processes == 1 ? " process" : " processes") << ", " << d.offcpu_intervals
      << " off-CPU intervals, " << (d.drops ? std::to_string(d.drops) : "no") << " drops\n";
  if (e.chains.empty()) {
    out << "\nno causal chain: nothing in this window was slow for a reason causeway can see\n";
    if (d.slow_calls) {
      out << d.slow_calls << " calls were slow against their own p50, with no cause in the trace:\n";
      for (const auto& s : d.slowest)
        out << "  " << s.op << (s.kernel.empty() ? "" : " " + s.kernel) << " (pid " << s.pid
            << "): " << s.slow_calls << " of " << s.calls << " calls, " << fixed1(s.slower_x)
            << "x their p50 " << ms(s.p50_ns) << "\n";
    }
    return out.str();
  }
  int n = 0;
  for (const auto& c : e.chains) {
    const auto& s = c.symptom;
    out << "\n#" << ++n << " " << severity_name(c.severity) << "  " << c.root_cause;
    if (s.pid) out << "  pid " << s.pid << (s.comm.empty() ? "" : " " + s.comm);
    out << "\n";
    if (!s.op.empty()) {
      std::string line = s.op + (s.kernel.empty() ? "" : " <" + s.kernel + ">") + ": ";
      if (s.slow_calls) {
        // Cross-rank chains have no per-call baseline ratio or time range:
        // print only what the symptom carries.
        line += std::to_string(s.slow_calls) + " of " + std::to_string(s.calls) + " calls slow, " +
                (s.slower_x > 0 ? fixed1(s.slower_x) + "x their p50 " : "p50 ") + ms(s.p50_ns) +
                ", max " + ms(s.max_ns) + ", " + pct(s.wall_share) + " of wall time";
        if (s.first_ts_ns > 0)
          line += ", " + clock_of(s.first_ts_ns) + "-" + clock_of(s.last_ts_ns) + " UTC";
      }
      else
        line += std::to_string(s.calls) + " calls, p50 " + ms(s.p50_ns) + ", p99 " +
                ms(s.p99_ns) + ", max " + ms(s.max_ns) + ", " + pct(s.wall_share) +
                " of wall time";
      wrap(out, "  ", "    ", line);
    }
    for (const auto& ev : c.evidence) wrap(out, "  - ", "    ", ev.text);
    if (c.frame) out << "  at " << c.frame->text() << "\n";
    wrap(out, "  fix: ", "       ", c.recommendation);
  }
  return out.str();
}

}  // namespace causeway::present
