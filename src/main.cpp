// SPDX-License-Identifier: Apache-2.0
// causeway: explains why GPU workloads are slow. The CLI edge: parse, run one
// command, turn any error into one line on stderr and an exit code.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>

#include "causeway/common/error.h"
#include "causeway/present/commands.h"

int main(int argc, char** argv) {
  CLI::App app{
      "causeway: explains why GPU workloads are slow.\n"
      "Traces CUDA/NCCL/HIP library calls and their host context with eBPF into a local "
      "SQLite file, then explains slow calls as causal chains."};
  app.require_subcommand(1);
  app.fallthrough();
  bool verbose = false;
  std::string log_level = "warn";
  app.add_flag("-v,--verbose", verbose, "Log more (same as --log-level debug)");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));

  int exit_status = causeway::kExitOk;
  causeway::present::add_trace_command(app, exit_status);
  const bool traced_command = causeway::present::traces_a_command(argc, argv);
  causeway::present::add_explain_command(app);
  causeway::present::add_query_command(app);
  causeway::present::add_demo_command(app);
  causeway::present::add_check_command(app);
  causeway::present::add_export_command(app);
  causeway::present::add_report_command(app);
  causeway::present::add_mcp_command(app);
  causeway::present::add_merge_command(app);
  causeway::present::add_version_command(app);

  // Logs go to stderr; results to stdout.
  auto logger = spdlog::stderr_color_mt("causeway");
  logger->set_pattern("causeway: %^%l%$: %v");
  spdlog::set_default_logger(logger);
  app.parse_complete_callback([&] {
    const auto level = verbose ? spdlog::level::debug : spdlog::level::from_str(log_level);
    spdlog::set_level(level);
    // Debug lines carry the wall clock (epoch seconds), to line them up with a
    // workload's own log (bench/gpu_overhead.sh's attach timelines).
    if (level <= spdlog::level::debug) logger->set_pattern("causeway: %E.%f %^%l%$: %v");
  });

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "causeway: error: %s (see causeway --help)\n", e.what());
    return traced_command ? causeway::kExitTracerFailure : causeway::kExitUsage;
  } catch (const causeway::Error& e) {
    std::fprintf(stderr, "causeway: error: %s\n", e.what());
    return traced_command ? causeway::kExitTracerFailure : e.exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "causeway: error: %s\n", e.what());
    return traced_command ? causeway::kExitTracerFailure : causeway::kExitFailure;
  }
  return exit_status;
}
