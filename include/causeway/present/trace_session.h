// SPDX-License-Identifier: Apache-2.0
#pragma once
// `causeway trace`: discover -> attach -> consume -> store, with a live view.
#include <cstdint>
#include <string>
#include <vector>

namespace causeway::cli {

enum class LiveMode { Auto, Table, Lines, Off };

struct TraceOptions {
  int64_t duration_ns = 0;             // 0: until Ctrl-C (or the command exits)
  std::string db_path;                 // empty: default path
  std::vector<uint32_t> pids;
  std::vector<std::string> comms;
  std::string cgroup;                  // a cgroup v2 path
  std::vector<std::string> libs;       // extra library files/folders to probe
  std::vector<std::string> command;    // `trace -- cmd args`: run and trace it
  std::vector<std::string> layers;     // runtime, driver, nccl, hip, verbs (empty: all)
  bool host = true;
  int64_t launch_min_ns = 0;
  // --launch-sampling N (0, "off": every launch is a row). Default from
  // docs/performance.md: a traced training step costs 1.1% instead of 2.5%,
  // a trace holds 60x fewer launch rows, explain finds the same slow launches.
  uint32_t launch_sample_every = 64;
  int64_t offcpu_min_ns = 20000;
  int64_t pystack_launch_min_ns = 1000000;
  // 0: 8 MiB with launch sampling, 16 without. The ring is mapped twice
  // (wrap-around), so it counts double in the agent's RSS.
  uint32_t ring_mb = 0;
  int64_t max_db_bytes = 0;            // --max-db-size: oldest rows deleted past it (0: no limit)
  LiveMode live = LiveMode::Auto;
  std::string node_id;
  std::string sysfs_root = "/sys";
  bool stacks = true;
  bool entry_only = false;             // --probe-tier entry (benchmarks)
  bool floor_pair = false;             // --probe-tier floor (benchmarks)
  std::string launch_layer = "auto";   // runtime | driver | both | auto (driver when libcuda is found)
};

struct TraceSummary {
  std::string db_path;
  int64_t calls = 0;       // exact, from kernel counters
  int64_t rows = 0;        // rows written
  int64_t dropped = 0;     // records lost
  int64_t shed = 0;        // rows of fast calls shed under overload (their calls are counted)
  int command_exit = -1;   // exit status of `-- cmd`, -1 if none
};

TraceSummary run_trace(const TraceOptions& opts, const std::string& command_line);

}  // namespace causeway::cli
