// SPDX-License-Identifier: Apache-2.0
// explain's two outputs: JSON for programs, text for people. analyze returns
// the Explanation; how it reads is decided here.
#include <algorithm>
#include <sstream>

#include "causeway/analyze/engine.h"
#include "causeway/common/time.h"
#include "causeway/common/numbers.h"
#include "causeway/present/explain_format.h"
#include "causeway/present/kernel_names.h"
#include "causeway/present/table_format.h"

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
  if (!s.summary.empty()) {
    j["summary"] = s.summary;
    j["first_ts_ns"] = s.first_ts_ns;
    j["last_ts_ns"] = s.last_ts_ns;
  }
  if (s.tid) {
    j["tid"] = s.tid;
    j["thread"] = s.thread;
  }
  if (s.slow_calls) {
    j["first_slow_ts_ns"] = s.first_ts_ns;
    j["last_slow_ts_ns"] = s.last_ts_ns;
  }
  return j;
}

nlohmann::json site_json(const HeldSite& h) {
  return {{"stack_id", h.stack_id}, {"where", h.where}, {"bytes", h.bytes}, {"allocations", h.allocations}};
}

// One line per process: what it holds, its peak, its failures.
std::string memory_line(const ProcessMemory& m) {
  const bool exited = m.exit_frees || m.tensors.exit_frees;
  std::string s = "held " + format_bytes(uint64_t(m.held_to)) +
                  (exited ? " when its GPU work ended" : " at the end") + " (peak " + format_bytes(uint64_t(m.peak)) +
                  "), " + std::to_string(m.allocations) + " allocations, " + std::to_string(m.frees) + " frees";
  if (m.failed) s += ", " + std::to_string(m.failed) + " failed (allocated nothing)";
  if (m.unmatched_frees) s += ", " + std::to_string(m.unmatched_frees) + " frees of memory allocated before the trace";
  const auto& t = m.tensors;
  if (exited)
    s += ", " + std::to_string(m.exit_frees + t.exit_frees) + " frees at exit set aside";
  if (m.nvml_process_max) s += "; NVML saw up to " + format_bytes(uint64_t(*m.nvml_process_max));
  const auto& sites = t.traced ? t.held_by_site : m.held_by_site;
  if (t.traced)
    s += "; tensors " + format_bytes(uint64_t(t.held_to)) + " allocated of " + format_bytes(uint64_t(m.held_to)) +
         " reserved (peak " + format_bytes(uint64_t(t.peak)) + ", " + std::to_string(t.allocations) + " tensors" +
         (t.windowed ? ", traced in launch windows" : "") + ")";
  if (!sites.empty() && sites[0].bytes > 0) {
    const auto& h = sites[0];
    s += "; most held at " + (h.where.empty() ? std::string("a call with no Python stack") : h.where) + " (" +
         format_bytes(uint64_t(h.bytes)) + ")";
  }
  return s;
}

}  // namespace

nlohmann::json memory_json(const ProcessMemory& m) {
  nlohmann::json j = {{"session_id", m.session_id}, {"pid", m.pid}, {"comm", m.comm},
                      {"allocations", m.allocations}, {"frees", m.frees}, {"failed", m.failed},
                      {"failed_out_of_memory", m.failures_out_of_memory}, {"allocated", m.allocated},
                      {"freed", m.freed}, {"host_allocated", m.host_allocated},
                      {"unmatched_frees", m.unmatched_frees}, {"exit_frees", m.exit_frees},
                      {"exit_freed", m.exit_freed}, {"held_from", m.held_from}, {"held_to", m.held_to},
                      {"peak", m.peak}, {"peak_ts_ns", m.peak_ts_ns}, {"held_over_time", m.held_over_time},
                      {"boundaries_ns", m.boundaries_ns}, {"text", memory_line(m)}};
  j["gpu_total"] = m.gpu_total ? nlohmann::json(*m.gpu_total) : nlohmann::json(nullptr);
  j["nvml_process_max"] = m.nvml_process_max ? nlohmann::json(*m.nvml_process_max) : nlohmann::json(nullptr);
  j["held_by_site"] = nlohmann::json::array();
  for (const auto& h : m.held_by_site) {
    auto hj = site_json(h);
    hj["over_time"] = h.over_time;
    j["held_by_site"].push_back(hj);
  }
  j["timeline"] = nlohmann::json::array();
  for (const auto& [ts, held] : m.timeline) j["timeline"].push_back({ts, held});
  // The framework's allocator: allocated (tensors) beside reserved (above).
  const auto& t = m.tensors;
  j["tensors"] = nullptr;
  if (t.traced) {
    nlohmann::json tj = {{"windowed", t.windowed}, {"allocations", t.allocations}, {"frees", t.frees},
                         {"allocated", t.allocated}, {"freed", t.freed}, {"held_from", t.held_from},
                         {"held_to", t.held_to}, {"peak", t.peak}, {"peak_ts_ns", t.peak_ts_ns},
                         {"exit_frees", t.exit_frees}, {"exit_freed", t.exit_freed},
                         {"held_over_time", t.held_over_time}, {"slice_seen", t.slice_seen},
                         {"reserved_unused", std::max<int64_t>(0, m.held_to - t.held_to)}};
    tj["held_by_site"] = nlohmann::json::array();
    for (const auto& h : t.held_by_site) {
      auto hj = site_json(h);
      hj["over_time"] = h.over_time;
      tj["held_by_site"].push_back(hj);
    }
    tj["timeline"] = nlohmann::json::array();
    for (const auto& [ts, held] : t.timeline) tj["timeline"].push_back({ts, held});
    j["tensors"] = tj;
  }
  j["failures"] = nlohmann::json::array();
  for (const auto& f : m.failures) {
    nlohmann::json fj = {{"ts_ns", f.ts_ns}, {"tid", f.tid}, {"op", f.op}, {"error", f.ret}, {"asked", f.asked},
                         {"stack_id", f.stack_id}, {"where", f.where}, {"held", f.held},
                         {"frees_before", f.frees_before}, {"freed_before", f.freed_before}};
    fj["holders"] = nlohmann::json::array();
    for (const auto& h : f.holders) fj["holders"].push_back(site_json(h));
    fj["tensor_held"] = f.tensor_held;
    fj["tensor_holders"] = nlohmann::json::array();
    for (const auto& h : f.tensor_holders) fj["tensor_holders"].push_back(site_json(h));
    fj["gpu_used"] = f.gpu_used ? nlohmann::json(*f.gpu_used) : nlohmann::json(nullptr);
    fj["gpu_total"] = f.gpu_total ? nlohmann::json(*f.gpu_total) : nlohmann::json(nullptr);
    fj["process_used"] = f.process_used ? nlohmann::json(*f.process_used) : nlohmann::json(nullptr);
    j["failures"].push_back(fj);
  }
  return j;
}

namespace {

// Columns a UTF-8 string takes (code points; causeway prints no wide characters).
size_t columns(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xc0) != 0x80;
  return n;
}

// Greedy word wrap: `first` prefixes line one, `rest` the others; a word
// longer than a line (a long path) is cut, so no line exceeds `width`.
void wrap(std::ostringstream& out, const std::string& first, const std::string& rest,
          const std::string& text, size_t width) {
  std::istringstream words(text);
  std::string w, line = first;
  bool empty = true;
  while (words >> w) {
    if (!empty && columns(line) + 1 + columns(w) > width) {
      out << line << "\n";
      line = rest;
      empty = true;
    }
    while (columns(line) + (empty ? 0 : 1) + columns(w) > width && width > columns(rest) + 8) {
      // Cut at a byte that starts a character.
      size_t room = width - columns(line) - (empty ? 0 : 1), cut = 0, cols = 0;
      while (cut < w.size() && cols < room) {
        cut++;
        while (cut < w.size() && (static_cast<unsigned char>(w[cut]) & 0xc0) == 0x80) cut++;
        cols++;
      }
      out << line << (empty ? "" : " ") << w.substr(0, cut) << "\n";
      w = w.substr(cut);
      line = rest;
      empty = true;
    }
    line += (empty ? "" : " ") + w;
    empty = false;
  }
  out << line << "\n";
}

nlohmann::json split_json(const TimeSplit& t) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& p : split_parts()) j[p.key] = t.*p.field;
  return j;
}

std::string clock_of(int64_t ns) {
  auto t = format_wall_time(ns);  // 2026-11-23T00:49:02.123Z
  return t.size() >= 19 ? t.substr(11, 8) : t;
}

}  // namespace

// "step 11.8 ms: launching 41% · sync wait, GPU busy 22% · ...", parts
// over 1% of it, largest first.
std::string account_line(const ThreadAccount& a) {
  const TimeSplit& t = a.judged();
  const double total = double(std::max<int64_t>(1, t.total()));
  std::vector<std::pair<double, const char*>> parts;
  for (const auto& p : split_parts())
    if (double(t.*p.field) / total >= 0.01) parts.emplace_back(double(t.*p.field) / total, p.words);
  std::sort(parts.begin(), parts.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
  // Start-up, when it is a phase worth telling apart from the loop.
  const bool startup = a.startup_ns() > 0 && (a.startup_ns() >= 1'000'000'000 || double(a.startup_ns()) >= 0.1 * double(a.span_ns()));
  std::string line = startup ? "start-up " + format_duration(a.startup_ns()) + ", then " : "";
  line += a.steps >= 3 ? "step " + format_duration(a.step_ns) + " (x" + std::to_string(a.steps) + "):"
                       : format_duration(a.covered_ns()) + (a.launch_windows ? " in launch windows:" : ":");
  for (size_t i = 0; i < parts.size(); i++) line += std::string(i ? " ·" : "") + " " + parts[i].second + " " + pct(parts[i].first);
  if (a.gpu_busy) line += " | GPU " + pct(*a.gpu_busy) + " busy";
  return line;
}

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
               {"drops_by_source", d.drops_by_source}, {"shed", d.shed},
               {"unprobed_tensor_allocations", d.unprobed_returns}, {"complete", d.drops == 0},
               {"rules_failed", d.rules_failed}};
  if (d.empty) j["data"]["empty"] = true;
  j["data"]["slowest"] = nlohmann::json::array();
  for (const auto& s : d.slowest) j["data"]["slowest"].push_back(symptom_json(s));
  j["accounts"] = nlohmann::json::array();
  for (const auto& a : e.accounts) {
    nlohmann::json aj = {{"session_id", a.session_id}, {"pid", a.pid}, {"tid", a.tid}, {"name", a.name},
                         {"from_ns", a.from_ns}, {"to_ns", a.to_ns}, {"time_ns", split_json(a.time)},
                         {"launches", a.launches}, {"launches_estimated", a.launches_estimated},
                         {"launch_windows", a.launch_windows}, {"covered_ns", a.covered_ns()},
                         {"syncs", a.syncs}, {"syncs_returning_at_once", a.syncs_idle}, {"copies", a.copies},
                         {"allocations", a.allocations}, {"after_sync_ns", a.after_sync_ns},
                         {"steps", a.steps}, {"step_ns", a.step_ns}, {"step_marker", a.step_marker},
                         {"per_step_ns", split_json(a.per_step)}, {"startup_ns", a.startup_ns()},
                         {"text", account_line(a)}};
    aj["gpu_busy"] = a.gpu_busy ? nlohmann::json(*a.gpu_busy) : nlohmann::json(nullptr);
    aj["wakers"] = nlohmann::json::array();
    for (const auto& w : a.wakers)
      aj["wakers"].push_back({{"pid", w.pid}, {"tid", w.tid}, {"name", w.name}, {"same_process", w.same_process},
                              {"child", w.child}, {"ns", w.ns}, {"wakeups", w.times}});
    aj["waited_for"] = nlohmann::json::array();
    for (const auto& w : a.waited_for)
      aj["waited_for"].push_back({{"tid", w.tid}, {"name", w.name}, {"gil", w.gil}, {"ns", w.ns}, {"times", w.times},
                                  {"its_runnable_ns", w.runnable_ns}, {"its_input_ns", w.input_ns},
                                  {"its_on_cpu_ns", w.on_cpu_ns}, {"where", w.where}, {"func", w.func},
                                  {"line_share", w.line_share}});
    aj["ran_instead"] = nlohmann::json::array();
    for (const auto& r : a.ran_instead)
      aj["ran_instead"].push_back({{"pid", r.pid}, {"name", r.name}, {"ns", r.ns}, {"times", r.times}});
    j["accounts"].push_back(aj);
  }
  j["paths"] = nlohmann::json::array();
  for (const auto& p : e.paths) {
    nlohmann::json pj = {{"session_id", p.session_id}, {"pid", p.pid}, {"tid", p.tid}, {"thread", p.thread},
                         {"from_ns", p.from_ns}, {"to_ns", p.to_ns}, {"covered_ns", p.covered_ns()},
                         {"steps", p.steps}, {"step_ns", p.step_ns}, {"step_marker", p.step_marker},
                         {"sync_storm", p.sync_storm}, {"syncs", p.syncs}, {"launches", p.launches},
                         {"tracer_ns", p.tracer_ns}, {"host_context", p.host_context},
                         {"launches_unseen", p.launches_unseen}, {"text", p.text}};
    pj["gpu_busy"] = p.gpu_busy ? nlohmann::json(*p.gpu_busy) : nlohmann::json(nullptr);
    pj["parts"] = nlohmann::json::array();
    for (const auto& part : p.parts) {
      nlohmann::json q = {{"class", path_class_key(part.cls)}, {"via", path_via_key(part.via)}, {"pid", part.pid},
                          {"tid", part.tid}, {"thread", part.thread}, {"ns", part.ns}, {"pieces", part.times},
                          {"share", p.covered_ns() ? double(part.ns) / double(p.covered_ns()) : 0.0}};
      if (part.frame) q["where"] = part.frame->where(), q["func"] = part.frame->func;
      if (part.by_pid || !part.by_comm.empty()) q["by_pid"] = part.by_pid, q["by_comm"] = part.by_comm;
      pj["parts"].push_back(q);
    }
    j["paths"].push_back(pj);
  }
  j["memory"] = nlohmann::json::array();
  for (const auto& m : e.memory) j["memory"].push_back(memory_json(m));
  j["chains"] = nlohmann::json::array();
  for (const auto& c : e.chains) {
    nlohmann::json cj = {{"severity", severity_name(c.severity)},
                         {"root_cause", c.root_cause},
                         {"symptom", symptom_json(c.symptom)},
                         {"recommendation", c.recommendation},
                         {"impact_ns", c.impact_ns}};
    if (c.threshold > 0) {
      cj["share"] = c.share;
      cj["threshold"] = c.threshold;
      cj["margin"] = c.share - c.threshold;
    }
    if (!c.close_to.empty()) cj["close_to"] = c.close_to;
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
    if (!c.frame) cj["no_frame_reason"] = c.no_frame_reason;
    j["chains"].push_back(cj);
  }
  return j;
}

namespace {

std::string format_unescaped(const Explanation& e, size_t width) {
  std::ostringstream out;
  const auto& d = e.data;
  if (d.drops > 0) {
    std::string by;
    for (const auto& [src, n] : d.drops_by_source)
      by += (by.empty() ? "" : ", ") + src + " " + std::to_string(n);
    wrap(out, "DATA LOSS: ", "  ",
         std::to_string(d.drops) + " records were dropped (" + by +
             "): counts below are lower bounds and some slow calls may be missing.", width);
  }
  if (d.shed > 0)
    wrap(out, "SHED: ", "  ",
         std::to_string(d.shed) + " rows of fast calls (< 100 us) were not recorded under overload, "
         "as planned: per-op counts are exact, slow calls and stacks were kept.", width);
  for (const auto& f : d.rules_failed) wrap(out, "RULE FAILED: ", "  ", f + " (its chains are missing)", width);
  if (d.empty || (e.window.span_ns() == 0 && d.calls == 0)) {
    std::string by;
    for (const auto& t : d.traced_by) by += (by.empty() ? "" : "; ") + (t.empty() ? std::string("?") : t);
    out << "empty trace: no events in " << e.db_path
        << (by.empty() ? std::string() : " (traced by: " + by + "; its filters matched nothing)") << "\n";
    return out.str();
  }
  out << "window " << format_wall_time(e.window.from_ns) << " + "
      << format_duration(e.window.span_ns());
  if (e.window.pid) out << ", pid " << *e.window.pid;
  out << "\n" << d.calls << " CUDA calls, " << d.nccl_calls << " NCCL calls, " << d.processes
      << (d.processes == 1 ? " process" : " processes") << ", " << d.offcpu_intervals
      << " off-CPU intervals, " << (d.drops ? std::to_string(d.drops) : "no") << " drops\n";
  // Where each dispatcher thread's time goes, chain or not.
  if (!e.accounts.empty()) out << "\nwhere the time goes (threads that issue CUDA calls):\n";
  for (const auto& a : e.accounts) {
    wrap(out, "  " + std::to_string(a.tid) + (a.name.empty() ? "" : " " + a.name) + " (pid " + std::to_string(a.pid) + ") ",
         "      ", account_line(a), width);
    // The threads it waited for, when that was a tenth of its time or more.
    const int64_t judged = std::max<int64_t>(1, a.covered_ns());
    for (size_t i = 0; i < a.waited_for.size() && i < 2; i++) {
      const auto& w = a.waited_for[i];
      if (double(w.ns) < 0.1 * double(judged)) continue;
      wrap(out, "      ", "        ",
           std::string(w.gil ? "the GIL held by " : "waited for ") + (w.name.empty() ? "thread" : w.name) + " (" +
               std::to_string(w.tid) + "): " + format_duration(w.ns) +
               (w.where.empty() ? "" : ", at " + w.func + "() " + w.where + " " + pct(w.line_share) + " of its samples"),
           width);
    }
  }
  // What each process's steps wait for: its critical path.
  if (!e.paths.empty()) out << "\nwhat the steps wait for (the critical path from each process's loop thread):\n";
  for (const auto& p : e.paths)
    wrap(out, "  pid " + std::to_string(p.pid) + " " + (p.thread.empty() ? "" : p.thread + " ") + "(" +
                  std::to_string(p.tid) + ") ",
         "      ", p.text, width);
  // GPU memory, when the trace saw allocations.
  if (!e.memory.empty()) out << "\nGPU memory (allocations traced in the window):\n";
  for (const auto& m : e.memory)
    wrap(out, "  pid " + std::to_string(m.pid) + (m.comm.empty() ? "" : " " + m.comm) + ": ", "      ", memory_line(m),
         width);
  if (!e.memory.empty() && d.unprobed_returns > 0)
    wrap(out, "  ", "    ",
         "(" + std::to_string(d.unprobed_returns) + " tensor allocation" + (d.unprobed_returns == 1 ? "" : "s") +
             " not recorded: the first through each call site of the allocator returns before that site is "
             "probed)", width);
  std::vector<std::string> kernel_list;
  for (const auto& c : e.chains)
    if (!c.symptom.kernel.empty()) kernel_list.push_back(c.symptom.kernel);
  for (const auto& s : d.slowest)
    if (!s.kernel.empty()) kernel_list.push_back(s.kernel);
  const KernelNames kernel(kernel_list);
  if (e.chains.empty()) {
    out << "\nno causal chain: nothing in this window was slow for a reason causeway can see\n";
    if (d.slow_calls) {
      out << d.slow_calls << " calls were slow against their own p50, with no cause in the trace:\n";
      for (const auto& s : d.slowest)
        wrap(out, "  ", "      ",
             s.op + (s.kernel.empty() ? "" : " " + kernel(s.kernel)) + " (pid " + std::to_string(s.pid) + "): " +
                 std::to_string(s.slow_calls) + " of " + std::to_string(s.calls) + " calls, " +
                 fixed1(s.slower_x) + "x their p50 " + ms(s.p50_ns),
             width);
    }
    return out.str();
  }
  int n = 0;
  for (const auto& c : e.chains) {
    const auto& s = c.symptom;
    std::string head = "#" + std::to_string(++n) + " " + std::string(severity_name(c.severity)) + "  " + c.root_cause;
    if (s.pid) head += "  pid " + std::to_string(s.pid) + (s.comm.empty() ? "" : " " + s.comm);
    if (s.tid && s.tid != s.pid) head += ", thread " + std::to_string(s.tid) + (s.thread.empty() ? "" : " " + s.thread);
    out << "\n";
    wrap(out, "", "    ", head, width);
    if (!s.op.empty()) {
      std::string line = s.op + (s.kernel.empty() ? std::string() : " <" + kernel(s.kernel) + ">") + ": ";
      if (!s.summary.empty()) {
        line += s.summary;
      } else if (s.slow_calls) {
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
      wrap(out, "  ", "    ", line, width);
    }
    for (const auto& ev : c.evidence) wrap(out, "  - ", "    ", ev.text, width);
    if (c.frame) wrap(out, "  at ", "     ", c.frame->text(), width);
    else if (!c.no_frame_reason.empty()) wrap(out, "  at: ", "      ", "no Python line: " + c.no_frame_reason, width);
    wrap(out, "  fix: ", "       ", c.recommendation, width);
  }
  return out.str();
}

}  // namespace

// Process, thread and kernel names come from the traced programs, which may
// name themselves with terminal escapes: escaped as the HTML report escapes them.
std::string format_text(const Explanation& e, size_t width) { return terminal_safe(format_unescaped(e, width), "\n"); }

}  // namespace causeway::present
