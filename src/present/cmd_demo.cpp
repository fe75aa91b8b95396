// SPDX-License-Identifier: Apache-2.0
// `causeway demo`: plant a known cause in a synthetic trace, then explain it.
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "causeway/present/explain_format.h"
#include "causeway/analyze/engine.h"
#include "causeway/common/error.h"
#include "causeway/demo/scenarios.h"
#include "causeway/present/commands.h"

namespace causeway::present {

void add_demo_command(CLI::App& app) {
  struct Opts {
    std::string scenario, db;
    bool no_gpu = false, json = false;
    uint64_t seed = 1;
  };
  auto o = std::make_shared<Opts>();
  auto* sub = app.add_subcommand("demo", "Diagnose a synthetic trace: no root, no GPU. "
                                         "Without a scenario: list them");
  sub->add_option("scenario", o->scenario, "Scenario to plant (see `causeway demo`)");
  sub->add_flag("--no-gpu", o->no_gpu, "Synthetic trace only (the default)");
  sub->add_option("--db", o->db, "Keep the trace at this path (default: a temporary file)");
  sub->add_flag("--json", o->json, "Print explain's JSON, with the planted facts");
  sub->add_option("--seed", o->seed, "Random seed (same seed, same trace)");
  sub->callback([o] {
    if (o->scenario.empty()) {
      std::printf("scenarios (causeway demo SCENARIO --no-gpu):\n");
      for (const auto& s : demo::scenarios())
        std::printf("  %-18s %s\n", std::string(s.name).c_str(), std::string(s.summary).c_str());
      return;
    }
    if (!demo::find_scenario(o->scenario))
      throw UsageError("unknown demo scenario '" + o->scenario + "' (run `causeway demo`)");
    std::string path = o->db;
    bool temporary = path.empty();
    if (temporary) {
      char tmpl[] = "/tmp/causeway-demo-XXXXXX";
      int fd = ::mkstemp(tmpl);
      if (fd < 0) throw Error("cannot create a temporary trace in /tmp");
      ::close(fd);
      path = tmpl;
    } else if (std::filesystem::exists(path)) {
      throw UsageError(path + " exists: demo writes a new trace, pick another --db");
    }
    struct Cleanup {
      std::string p;
      bool on;
      ~Cleanup() {
        if (!on) return;
        std::error_code ec;
        for (const char* sfx : {"", "-wal", "-shm", "-journal"})
          std::filesystem::remove(p + sfx, ec);
      }
    } cleanup{path, temporary};
    auto planted = demo::generate(o->scenario, path, o->seed);
    auto e = analyze::explain_file(path, {});
    if (o->json) {
      auto j = present::to_json(e);
      j["planted"] = {{"scenario", planted.scenario}, {"lines", planted.lines},
                      {"numbers", planted.numbers}, {"names", planted.names}};
      if (temporary) j.erase("db");
      std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
      return;
    }
    std::printf("demo %s (synthetic trace, seed %llu)\nplanted:\n", o->scenario.c_str(),
                static_cast<unsigned long long>(o->seed));
    for (const auto& l : planted.lines) std::printf("  %s\n", l.c_str());
    if (!temporary) std::printf("trace kept at %s\n", path.c_str());
    std::printf("\ncauseway explain found:\n");
    std::string out = present::format_text(e);
    std::fwrite(out.data(), 1, out.size(), stdout);
  });
}

}  // namespace causeway::present
