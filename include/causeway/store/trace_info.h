// SPDX-License-Identifier: Apache-2.0
#pragma once
// What a trace file holds, for the readers that describe it (check, the MCP
// tools, the report): its sessions, row counts, drops, and stored stacks.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "causeway/model/stacks.h"
#include "causeway/store/sqlite.h"

namespace causeway::store {

struct SessionInfo {
  int64_t id = 0;
  std::string host, node_id, source, version, command_line;
  int64_t start_ts_ns = 0;
  std::optional<int64_t> end_ts_ns;  // none: still tracing, or killed
};
// Every session, by id.
std::vector<SessionInfo> sessions(Connection& db);

// Rows per table of the main families, in a fixed order.
std::vector<std::pair<std::string, int64_t>> family_row_counts(Connection& db);

// Records lost, all sources together.
int64_t records_dropped(Connection& db);

// Which library call a stack is asked for by.
enum class CallTable { Cuda, Nccl };
struct CallStackRef {
  bool found = false;               // a call with that rowid exists
  std::optional<int64_t> stack_id;  // none: no stack was captured
};
CallStackRef call_stack(Connection& db, CallTable table, int64_t rowid);
// The table's name, for messages.
const char* call_table_name(CallTable table);

// A stored stack's frames, innermost first; empty when there is no such stack.
std::vector<model::StackFrameRow> stack_frames(Connection& db, int64_t stack_id);

}  // namespace causeway::store
