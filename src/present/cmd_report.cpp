// SPDX-License-Identifier: Apache-2.0
#include <filesystem>
#include <iostream>

#include "causeway/common/error.h"
#include "causeway/common/time.h"
#include "causeway/present/chain_view.h"
#include "causeway/present/commands.h"
#include "causeway/present/html_report.h"
#include "causeway/present/output_file.h"
#include "causeway/store/read_only_trace.h"

namespace causeway::present {

void add_report_command(CLI::App& app) {
  struct Flags {
    TraceFileArg trace;
    std::string db, output;
    present::WindowFlags window;
  };
  auto flags = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand(
      "report", "Write one self-contained HTML report (chains, timeline, latencies, copies, "
                "kernels); opens offline");
  add_trace_file_arg(cmd, flags->trace);
  cmd->add_option("-o,--output", flags->output, "The HTML file to write ('-' for stdout)")
      ->required();
  flags->window.add_to(cmd);
  cmd->callback([flags] {
    flags->db = flags->trace.resolve("report");
    auto window = flags->window.resolve(wall_now_ns());
    auto db = store::open_trace_read_only(flags->db);
    // Refused before any work when -o is a device, a folder or the trace itself.
    OutputFile out(flags->output, {flags->db});
    const std::string title = std::filesystem::path(flags->db).filename().string();
    std::vector<present::ReportChain> chains;
    for (auto& c : present::explain_chains(*db, window, 0)) {
      present::ReportChain r{c.title, c.severity, c.lines, {}};
      if (c.symptom) r.spans.push_back({c.symptom->label, "symptom", c.symptom->ts_ns, c.symptom->dur_ns});
      for (const auto& e : c.evidence) r.spans.push_back({e.label, e.kind, e.ts_ns, e.dur_ns});
      chains.push_back(std::move(r));
    }
    present::write_html_report(*db, title, window, chains, out.stream());
    out.commit();
    if (out.is_stdout()) return;
    std::cerr << "causeway: wrote " << flags->output << "\n";
  });
}

}  // namespace causeway::present
