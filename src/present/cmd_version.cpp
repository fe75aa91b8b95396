// SPDX-License-Identifier: Apache-2.0
#include <bpf/libbpf.h>
#include <sqlite3.h>

#include <cstdio>

#include "causeway/present/commands.h"
#include "causeway/store/read_only_trace.h"

namespace causeway::present {
void add_version_command(CLI::App& app) {
  auto* sub = app.add_subcommand("version", "Print the version, schema version and linked libraries");
  sub->callback([] {
    std::printf("causeway %s\n", CAUSEWAY_VERSION);
    std::printf("schema %d\n", store::latest_schema_version());
    std::printf("libbpf %u.%u\n", libbpf_major_version(), libbpf_minor_version());
    std::printf("sqlite %s\n", sqlite3_libversion());
  });
}
}  // namespace causeway::present
