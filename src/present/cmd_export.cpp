// SPDX-License-Identifier: Apache-2.0
#include <spdlog/spdlog.h>

#include <iostream>

#include "causeway/common/error.h"
#include "causeway/common/time.h"
#include "causeway/present/chain_view.h"
#include "causeway/present/commands.h"
#include "causeway/present/output_file.h"
#include "causeway/present/perfetto_export.h"
#include "causeway/store/read_only_trace.h"

namespace causeway::present {

void add_export_command(CLI::App& app) {
  struct Flags {
    TraceFileArg trace;
    std::string db, format = "perfetto", output;
    present::WindowFlags window;
    bool no_flows = false;
  };
  auto flags = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand(
      "export", "Export a trace as Chrome trace-event JSON for ui.perfetto.dev / chrome://tracing");
  add_trace_file_arg(cmd, flags->trace);
  cmd->add_option("--format", flags->format, "Output format (perfetto: Chrome trace-event JSON)")
      ->check(CLI::IsMember({"perfetto"}))
      ->default_val("perfetto");
  cmd->add_option("-o,--output", flags->output, "Where to write it ('-' for stdout)")->required();
  flags->window.add_to(cmd);
  cmd->add_flag("--no-flows", flags->no_flows,
                "Skip running explain: no causal-chain flow arrows");
  cmd->callback([flags] {
    flags->db = flags->trace.resolve("export");
    auto window = flags->window.resolve(wall_now_ns());
    auto db = store::open_trace_read_only(flags->db);
    // Refused before any work when -o is a device, a folder or the trace itself.
    OutputFile out(flags->output, {flags->db});
    std::vector<present::TraceFlow> flows;
    if (!flags->no_flows) flows = present::chain_flows(present::explain_chains(*db, window, 0));
    const present::ExportCounts n = present::write_perfetto_json(*db, window, flows, out.stream());
    out.commit();
    if (!out.is_stdout()) {
      std::cerr << "causeway: wrote " << n.slices() << " slices (" << n.cuda << " CUDA, "
                << n.nccl << " NCCL, " << n.offcpu << " off-CPU, " << n.reclaim
                << " reclaim), " << n.io << " I/O requests, " << n.flows << " causal flows, " << n.counters
                << " GPU memory counter samples, "
                << n.threads << " threads in " << n.processes << " processes to "
                << flags->output << "\n";
    }
  });
}

}  // namespace causeway::present
