// SPDX-License-Identifier: Apache-2.0
#pragma once
// The JSON-RPC 2.0 framing of `causeway mcp`, apart from its tools: one line
// in, every message in it validated before use, one line out. No message can
// stop the server: a line over the cap, JSON nested deeper than the cap, a
// wrong `jsonrpc`, id, method or params each get the error they deserve
// (-32700 parse error, -32600 invalid request, -32602 invalid params) and the
// next line is served (docs/reliability.md 9a-9c; fuzzed by fuzz_mcp_messages).
#include <cstddef>
#include <functional>
#include <istream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace causeway::present::mcp {

using json = nlohmann::ordered_json;

// A line (one message or batch) longer than this is refused unread.
constexpr size_t kMaxLineBytes = size_t(4) << 20;
// Arrays and objects nested deeper than this are refused before parsing (the
// parser recurses per level: 75,000 levels overflowed the stack).
constexpr int kMaxDepth = 64;
// A reply line longer than this is replaced by an error saying so.
constexpr size_t kMaxReplyBytes = size_t(16) << 20;
// A batch of more messages than this is refused whole.
constexpr size_t kMaxBatch = 256;

constexpr int kParseError = -32700, kInvalidRequest = -32600, kMethodNotFound = -32601,
              kInvalidParams = -32602, kInternalError = -32603;

// A validated request: `jsonrpc` is "2.0", the method a string, the id a
// string, a number or null (absent: a notification), params an object.
struct Request {
  json id;
  std::string method;
  json params = json::object();
  bool notification = false;
};

json error_response(const json& id, int code, const std::string& message);
json result_response(const json& id, json result);
// The deepest nesting of arrays and objects in `text`, scanning no further
// than past `limit` (strings and their escapes are skipped).
int nesting_depth(std::string_view text, int limit);
// The request in `msg`, or the error response it deserves.
std::variant<Request, json> validate(const json& msg);

// Answers a request: a response, or nullopt (notifications). May throw; an
// exception becomes an internal error for that message alone.
using Dispatch = std::function<std::optional<json>(const Request&)>;
// One line in, the reply line out ("" for none).
std::string handle_line(std::string_view line, const Dispatch& dispatch);

// Reads one line of at most kMaxLineBytes into `line`. Returns false at end of
// input; sets `too_long` (and discards the rest of the line) past the cap.
bool read_line(std::istream& in, std::string& line, bool& too_long);
// The error line for a line over the cap.
std::string line_too_long_reply();

}  // namespace causeway::present::mcp
