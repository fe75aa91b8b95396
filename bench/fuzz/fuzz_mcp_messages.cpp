// SPDX-License-Identifier: Apache-2.0
// Random bytes -> the MCP server's message handling (present::mcp): the
// bounded line reader, the depth scan, the parser, the validation of every
// message and batch, and the reply caps, with a dispatcher standing in for
// the tools (echo, a large result, a throw). Beyond "no crash": every reply
// line is one JSON-RPC 2.0 response (or a batch of them) under the reply
// cap, with an id of a valid type and an error code the protocol defines.
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

#include "causeway/present/mcp_protocol.h"

namespace mcp = causeway::present::mcp;
using json = mcp::json;

namespace {

std::optional<json> dispatch(const mcp::Request& r) {
  if (r.notification) return std::nullopt;
  if (r.method == "throw") throw std::runtime_error("a tool failed");
  if (r.method == "big") {
    // A result near or past the reply cap, sized by the params.
    const size_t n = r.params.size() > 2 ? mcp::kMaxReplyBytes + 1 : 1000;
    return mcp::result_response(r.id, std::string(n, 'x'));
  }
  if (r.method == "echo") return mcp::result_response(r.id, r.params);
  return mcp::error_response(r.id, mcp::kMethodNotFound, "method not found");
}

void check_response(const json& reply) {
  if (!reply.is_object() || reply.value("jsonrpc", json()) != "2.0" || !reply.contains("id")) std::abort();
  const json& id = reply["id"];
  if (!id.is_string() && !id.is_number() && !id.is_null()) std::abort();
  if (reply.contains("error") == reply.contains("result")) std::abort();
  if (reply.contains("error")) {
    const int code = reply["error"].value("code", 0);
    if (code != mcp::kParseError && code != mcp::kInvalidRequest && code != mcp::kMethodNotFound &&
        code != mcp::kInvalidParams && code != mcp::kInternalError)
      std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  std::string line;
  bool too_long = false;
  while (mcp::read_line(in, line, too_long)) {
    const std::string reply = too_long ? mcp::line_too_long_reply() : mcp::handle_line(line, dispatch);
    if (reply.empty()) continue;
    if (reply.size() > mcp::kMaxReplyBytes + 2) std::abort();
    // Our own reply nests no deeper than what was let in, plus the envelope.
    if (mcp::nesting_depth(reply, 2 * mcp::kMaxDepth) > mcp::kMaxDepth + 3) std::abort();
    const json parsed = json::parse(reply);  // throws (a crash report) if not JSON
    if (parsed.is_array()) {
      if (parsed.empty()) std::abort();
      for (const auto& r : parsed) check_response(r);
    } else {
      check_response(parsed);
    }
  }
  return 0;
}
