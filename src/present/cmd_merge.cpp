// SPDX-License-Identifier: Apache-2.0
#include <iostream>

#include "causeway/present/commands.h"
#include "causeway/agent/merge.h"

namespace causeway::present {

void add_merge_command(CLI::App& app) {
  auto* sub = app.add_subcommand("merge", "Merge several nodes' trace files into one");
  sub->footer(
      "  causeway merge cluster.db node0.db node1.db\n"
      "Sessions already in OUT (same host, boot id and start time) are skipped, so\n"
      "merging again is safe. Then: causeway explain --db cluster.db");
  auto out = std::make_shared<std::string>();
  auto inputs = std::make_shared<std::vector<std::string>>();
  sub->add_option("out", *out, "Merged trace file (created if missing)")->required();
  sub->add_option("inputs", *inputs, "Trace files to merge (read-only)")->required();
  sub->callback([out, inputs] {
    auto r = agent::merge_traces(*out, *inputs);
    std::cout << "merged " << r.sessions_added << " session" << (r.sessions_added == 1 ? "" : "s")
              << " (" << r.rows_copied << " rows) from " << inputs->size() << " file"
              << (inputs->size() == 1 ? "" : "s") << " into " << *out;
    if (r.sessions_skipped) std::cout << "; " << r.sessions_skipped << " already there";
    std::cout << "\n";
  });
}

}  // namespace causeway::present
