// SPDX-License-Identifier: Apache-2.0
#pragma once
// `causeway mcp`: a Model Context Protocol server over stdio. JSON-RPC 2.0,
// one message per line (the MCP stdio transport), read-only tools over one
// trace file. Each tool call opens the trace afresh, read-only, so a trace
// still being written is seen as it grows.
#include <functional>
#include <istream>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace causeway::present {
namespace mcp {
struct Request;
}

class McpServer {
 public:
  using json = nlohmann::ordered_json;
  explicit McpServer(std::string db_path);

  // One parsed message in, validated (mcp_protocol.h); the response, or
  // nullopt for a notification.
  std::optional<json> handle(const json& message);
  // One line in (may be malformed); the response line, or "" for none.
  std::string handle_line(const std::string& line);
  // Until EOF on `in`; each response is one line on `out`, flushed.
  void serve(std::istream& in, std::ostream& out);

  // The protocol versions this server speaks, newest first.
  static const std::vector<std::string>& protocol_versions();
  std::vector<std::string> tool_names() const;

 private:
  struct Tool {
    std::string name, description;
    json input_schema;
    std::function<json(const json& args)> run;  // returns the result payload
  };
  // The tools, registered in groups; each appends to tools_.
  void add_overview_tools();
  void add_explain_tools();
  void add_stack_tool();
  void add_kernel_and_nccl_tools();
  void add_sql_tool();
  json call_tool(const json& params);
  std::optional<json> dispatch(const mcp::Request& request);
  std::vector<Tool> tools_;
  std::string db_path_;
};

}  // namespace causeway::present
