// SPDX-License-Identifier: Apache-2.0
#include "causeway/present/mcp_protocol.h"

#include <limits>
#include <vector>

namespace causeway::present::mcp {

namespace {

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string mib(size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

// One message of a line (alone or in a batch): validated, then dispatched. An
// exception from the dispatcher answers that message alone.
std::optional<json> answer(const json& msg, const Dispatch& dispatch) {
  auto checked = validate(msg);
  if (auto* error = std::get_if<json>(&checked)) return *error;
  const auto& request = std::get<Request>(checked);
  try {
    return dispatch(request);
  } catch (const std::exception& e) {
    if (request.notification) return std::nullopt;
    return error_response(request.id, kInternalError, e.what());
  }
}

// A reply over the cap becomes an error that says so, under the same id.
std::string bounded(const json& reply) {
  std::string line = dump(reply);
  if (line.size() <= kMaxReplyBytes) return line;
  const json id = reply.is_object() && reply.contains("id") ? reply["id"] : json(nullptr);
  return dump(error_response(id, kInternalError,
                             "the reply is " + std::to_string(line.size()) + " bytes, over the " +
                                 mib(kMaxReplyBytes) + " cap: ask for less (a narrower window, fewer rows)"));
}

}  // namespace

json error_response(const json& id, int code, const std::string& message) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", message}}}};
}

json result_response(const json& id, json result) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

int nesting_depth(std::string_view text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest && (deepest = depth) > limit) return deepest;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

std::variant<Request, json> validate(const json& msg) {
  if (!msg.is_object()) return error_response(nullptr, kInvalidRequest, "a message must be a JSON object");
  Request r;
  if (auto it = msg.find("id"); it != msg.end()) {
    if (!it->is_string() && !it->is_number() && !it->is_null())
      return error_response(nullptr, kInvalidRequest, "id must be a string, a number or null");
    r.id = *it;
  } else {
    r.notification = true;
  }
  if (auto it = msg.find("jsonrpc"); it == msg.end() || !it->is_string() || it->get_ref<const std::string&>() != "2.0")
    return error_response(r.id, kInvalidRequest, "not a JSON-RPC 2.0 request (\"jsonrpc\" must be \"2.0\")");
  auto method = msg.find("method");
  if (method == msg.end() || !method->is_string())
    return error_response(r.id, kInvalidRequest, "method must be a string");
  r.method = method->get<std::string>();
  if (auto it = msg.find("params"); it != msg.end() && !it->is_null()) {
    if (it->is_array()) return error_response(r.id, kInvalidParams, "params must be an object (named parameters)");
    if (!it->is_object()) return error_response(r.id, kInvalidRequest, "params must be an object");
    r.params = *it;
  }
  return r;
}

std::string handle_line(std::string_view line, const Dispatch& dispatch) {
  if (line.find_first_not_of(" \t\r") == std::string_view::npos) return "";
  if (line.size() > kMaxLineBytes) return line_too_long_reply();
  if (nesting_depth(line, kMaxDepth) > kMaxDepth)
    return dump(error_response(nullptr, kInvalidRequest,
                               "the message nests arrays/objects deeper than " + std::to_string(kMaxDepth) +
                                   " levels; refused unparsed"));
  json msg;
  try {
    msg = json::parse(line);
  } catch (const json::exception& e) {
    return dump(error_response(nullptr, kParseError, "parse error: " + std::string(e.what())));
  }
  if (!msg.is_array()) {
    auto r = answer(msg, dispatch);
    return r ? bounded(*r) : "";
  }
  // A JSON-RPC batch (MCP 2025-03-26): each message answered alone, the whole
  // reply under the same cap as one message's.
  if (msg.empty()) return dump(error_response(nullptr, kInvalidRequest, "empty batch"));
  if (msg.size() > kMaxBatch)
    return dump(error_response(nullptr, kInvalidRequest,
                               "a batch of " + std::to_string(msg.size()) + " messages, over the cap of " +
                                   std::to_string(kMaxBatch)));
  std::string out;
  for (const auto& m : msg) {
    auto r = answer(m, dispatch);
    if (!r) continue;
    std::string one = bounded(*r);
    if (out.size() + one.size() + 2 > kMaxReplyBytes)
      one = bounded(error_response((*r)["id"], kInternalError,
                                   "the batch's reply passed the " + mib(kMaxReplyBytes) +
                                       " cap: send fewer messages at once"));
    out += out.empty() ? "[" : ",";
    out += one;
  }
  return out.empty() ? "" : out + "]";
}

bool read_line(std::istream& in, std::string& line, bool& too_long) {
  // One buffer for every line: the cap's worth, allocated once.
  thread_local std::vector<char> buf(kMaxLineBytes + 1);
  too_long = false;
  line.clear();
  in.getline(buf.data(), static_cast<std::streamsize>(buf.size()));
  const auto got = static_cast<size_t>(in.gcount());
  if (in.bad() || (got == 0 && in.eof())) return false;
  if (in.fail() && !in.eof()) {
    // The cap filled without a newline: the rest of the line goes unread.
    in.clear();
    in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
    too_long = true;
    return true;
  }
  // gcount counts the newline when one ended the line.
  line.assign(buf.data(), in.eof() ? got : got - 1);
  return true;
}

std::string line_too_long_reply() {
  return dump(error_response(nullptr, kInvalidRequest,
                             "the message is longer than the " + mib(kMaxLineBytes) + " line cap; refused unread"));
}

}  // namespace causeway::present::mcp
