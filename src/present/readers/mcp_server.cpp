// SPDX-License-Identifier: Apache-2.0
#include "causeway/present/explain_format.h"
#include "causeway/present/mcp_server.h"

#include <filesystem>

#include "causeway/analyze/engine.h"
#include "causeway/common/error.h"
#include "causeway/common/time.h"
#include "causeway/present/sql_guard.h"
#include "causeway/present/table_format.h"
#include "causeway/present/trace_stats.h"
#include "causeway/store/migrations.h"
#include "causeway/store/read_only_trace.h"

namespace causeway::present {
namespace {

using json = McpServer::json;

// JSON-RPC 2.0 error codes.
constexpr int kParseError = -32700, kInvalidRequest = -32600, kMethodNotFound = -32601,
              kInvalidParams = -32602;

// A tool's arguments were wrong: a JSON-RPC error, not a tool result.
struct InvalidParams : std::runtime_error {
  using std::runtime_error::runtime_error;
};

json window_schema() {
  return {
      {"since", {{"type", "string"}, {"description", "Only the last DURATION, e.g. \"30m\""}}},
      {"from", {{"type", "string"}, {"description", "Start time: RFC 3339, @unix-seconds, or a duration ago"}}},
      {"to", {{"type", "string"}, {"description", "End time (same forms as from)"}}},
      {"pid", {{"type", "integer"}, {"description", "Only this process"}}},
  };
}

json schema(json props, std::vector<std::string> required = {}) {
  json s = {{"type", "object"}, {"properties", std::move(props)}};
  if (!required.empty()) s["required"] = required;
  s["additionalProperties"] = false;
  return s;
}

json with_window(json props) {
  const json window = window_schema();
  for (const auto& [k, v] : window.items()) props[k] = v;
  return props;
}

std::string str_arg(const json& args, const char* key) {
  if (!args.contains(key)) return "";
  if (!args[key].is_string()) throw InvalidParams(std::string(key) + " must be a string");
  return args[key].get<std::string>();
}

std::optional<int64_t> int_arg(const json& args, const char* key) {
  if (!args.contains(key) || args[key].is_null()) return std::nullopt;
  if (!args[key].is_number_integer()) throw InvalidParams(std::string(key) + " must be an integer");
  return args[key].get<int64_t>();
}

TraceWindow window_arg(const json& args) {
  WindowFlags f;
  f.since = str_arg(args, "since");
  f.from = str_arg(args, "from");
  f.to = str_arg(args, "to");
  f.pid = int_arg(args, "pid");
  return f.resolve(wall_now_ns());
}

json response(const json& id, json result) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

json error_response(const json& id, int code, const std::string& message) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", message}}}};
}

json text_result(const json& payload, bool is_error = false) {
  json r = {{"content", json::array({{{"type", "text"},
                                       {"text", payload.is_string() ? payload.get<std::string>()
                                                                    : payload.dump(2, ' ', false, nlohmann::json::error_handler_t::replace)}}})}};
  if (is_error) r["isError"] = true;
  return r;
}

json latency_json(const OpLatency& s) {
  return {{"op", s.op},         {"layer", s.layer},   {"calls", s.calls},
          {"errors", s.errors}, {"total_ns", s.total_ns}, {"p50_ns", s.p50_ns},
          {"p95_ns", s.p95_ns}, {"p99_ns", s.p99_ns}, {"max_ns", s.max_ns}};
}

}  // namespace

const std::vector<std::string>& McpServer::protocol_versions() {
  static const std::vector<std::string> v = {"2025-06-18", "2025-03-26", "2024-11-05"};
  return v;
}

std::vector<std::string> McpServer::tool_names() const {
  std::vector<std::string> names;
  for (const auto& t : tools_) names.push_back(t.name);
  return names;
}

McpServer::McpServer(std::string db_path) : db_path_(std::move(db_path)) {
  auto open = [this] { return store::open_trace_read_only(db_path_); };

  tools_.push_back(
      {"check",
       "What the trace file holds: schema version, sessions (host, time span, command line), "
       "row counts per table, drops. Read-only; needs no privileges.",
       schema(json::object()), [this, open](const json&) {
         auto db = open();
         json out;
         out["db"] = db_path_;
         out["bytes"] = int64_t(std::filesystem::file_size(db_path_));
         out["schema_version"] = store::check_schema_version(*db);
         json sessions = json::array();
         auto st = db->prepare(
             "SELECT id, host, node_id, source, version, command_line, start_ts_ns, end_ts_ns "
             "FROM sessions ORDER BY id");
         while (st.step()) {
           json s = {{"id", st.col_int(0)},      {"host", st.col_text(1)},
                     {"node_id", st.col_text(2)}, {"source", st.col_text(3)},
                     {"version", st.col_text(4)}, {"command_line", st.col_text(5)},
                     {"start", format_wall_time(st.col_int(6))}};
           s["end"] = st.col_null(7) ? json(nullptr) : json(format_wall_time(st.col_int(7)));
           sessions.push_back(s);
         }
         out["sessions"] = sessions;
         json counts;
         for (const char* t : {"cuda_call_events", "nccl_call_events", "offcpu_events",
                               "io_requests", "tcp_retransmits", "reclaims", "verbs_events",
                               "processes", "kernels", "stack_frames"})
           counts[t] = db->query_int("SELECT count(*) FROM " + std::string(t)).value_or(0);
         out["rows"] = counts;
         out["dropped"] = db->query_int("SELECT coalesce(sum(count), 0) FROM drops").value_or(0);
         return text_result(out);
       }});

  tools_.push_back(
      {"trace_stats",
       "Per-op latency over CUDA/HIP and NCCL calls in a time window: calls, errors, total, "
       "p50/p95/p99/max in nanoseconds, most total time first.",
       schema(with_window({{"op", {{"type", "string"}, {"description", "Only this API, e.g. cudaMemcpy"}}}})),
       [open](const json& args) {
         auto w = window_arg(args);
         auto db = open();
         json rows = json::array();
         for (const auto& s : op_latencies(*db, w, str_arg(args, "op"))) rows.push_back(latency_json(s));
         return text_result(rows);
       }});

  tools_.push_back(
      {"causal_chains",
       "Why calls were slow: the explain engine's causal chains in a time window (as `causeway "
       "explain --json`), most severe first: symptom (op, how much slower than its own p50, "
       "how often), evidence on the same thread/process, root cause, recommendation, and the "
       "Python line. No chain means nothing was slow for a reason the rules recognise.",
       schema(with_window({{"top", {{"type", "integer"}, {"minimum", 0}, {"default", 0},
                                    {"description", "At most this many chains (0: all)"}}}})),
       [open](const json& args) {
         auto w = window_arg(args);
         const int64_t top = int_arg(args, "top").value_or(0);
         if (top < 0) throw InvalidParams("top must be 0 or more");
         analyze::ExplainOptions opts;
         opts.from_ns = w.from_ns;
         opts.to_ns = w.to_ns;
         if (w.pid) opts.pid = uint32_t(*w.pid);
         opts.top = size_t(top);
         auto db = open();
         return text_result(json(present::to_json(analyze::explain(*db, opts))));
       }});

  tools_.push_back(
      {"time_account",
       "Where each thread that issues CUDA calls spends its wall time in a window (as the "
       "`accounts` of `causeway explain --json`): time_ns split into waiting on the GPU (sync), "
       "launching, copying, allocating, other CUDA calls, after-sync gap, on CPU in Python, "
       "runnable but preempted, sleeping, blocked on I/O; per step (steps are inferred from the "
       "least frequent sync/copy/collective site); the threads that woke it and what ran instead; "
       "GPU busy % from NVML when sampled. At most 8 threads, busiest first; a thread with fewer than 20 calls has no account.",
       schema(with_window(json::object())), [open](const json& args) {
         auto w = window_arg(args);
         analyze::ExplainOptions opts;
         opts.from_ns = w.from_ns;
         opts.to_ns = w.to_ns;
         if (w.pid) opts.pid = uint32_t(*w.pid);
         auto db = open();
         return text_result(present::to_json(analyze::explain(*db, opts))["accounts"]);
       }});

  tools_.push_back(
      {"gpu_memory",
       "GPU memory per process, replayed from the traced allocations and frees (a failed allocation "
       "allocates nothing; a free subtracts what its allocation added): allocations, frees, failures, "
       "peak, held at the window's start and end, held bytes by call site (the Python line) at `at` "
       "(default: the window's end), a timeline of held bytes, and each out-of-memory failure with "
       "what was held then by site. NVML's device size and per-process use when sampled.",
       schema(with_window({{"at", {{"type", "string"}, {"description", "RFC 3339 time, @unix-seconds, or a duration ago"}}}})),
       [open](const json& args) {
         auto w = window_arg(args);
         analyze::ExplainOptions opts;
         opts.from_ns = w.from_ns;
         opts.to_ns = w.to_ns;
         if (w.pid) opts.pid = uint32_t(*w.pid);
         std::optional<int64_t> at;
         if (const std::string a = str_arg(args, "at"); !a.empty()) {
           try {
             at = parse_time_ns(a, wall_now_ns());
           } catch (const std::exception& e) {
             throw InvalidParams(std::string("at: ") + e.what());
           }
         }
         auto db = open();
         json rows = json::array();
         for (const auto& m : analyze::gpu_memory(*db, opts, at)) rows.push_back(json::parse(present::memory_json(m).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
         return text_result(rows);
       }});

  tools_.push_back(
      {"stacks",
       "The captured stack (Python and native frames, innermost first) for a stack_id, or for "
       "one call given its rowid in cuda_call_events or nccl_call_events.",
       schema({{"stack_id", {{"type", "integer"}}},
               {"cuda_call_rowid", {{"type", "integer"}}},
               {"nccl_call_rowid", {{"type", "integer"}}}}),
       [open](const json& args) {
         auto db = open();
         std::optional<int64_t> id = int_arg(args, "stack_id");
         for (auto [key, table] : {std::pair{"cuda_call_rowid", "cuda_call_events"},
                                   std::pair{"nccl_call_rowid", "nccl_call_events"}}) {
           auto rowid = int_arg(args, key);
           if (!rowid) continue;
           auto st = db->prepare("SELECT stack_id FROM " + std::string(table) + " WHERE rowid = ?");
           st.bind(1, *rowid);
           if (!st.step()) return text_result("no call with rowid " + std::to_string(*rowid) + " in " + table, true);
           if (st.col_null(0)) return text_result("that call has no captured stack", true);
           id = st.col_int(0);
         }
         if (!id) throw InvalidParams("give stack_id, cuda_call_rowid or nccl_call_rowid");
         auto st = db->prepare(
             "SELECT depth, kind, func, file, line, module FROM stack_frames WHERE stack_id = ? "
             "ORDER BY depth");
         st.bind(1, *id);
         json frames = json::array();
         while (st.step()) {
           json f = {{"depth", st.col_int(0)}, {"kind", st.col_text(1)}, {"func", st.col_text(2)},
                     {"file", st.col_text(3)}};
           f["line"] = st.col_null(4) ? json(nullptr) : json(st.col_int(4));
           f["module"] = st.col_text(5);
           frames.push_back(f);
         }
         if (frames.empty()) return text_result("no frames for stack_id " + std::to_string(*id), true);
         return text_result(json{{"stack_id", *id}, {"frames", frames}});
       }});

  tools_.push_back(
      {"top_kernels",
       "Kernels by launch count in a time window: launches, total and max launch-call time (ns).",
       schema(with_window({{"limit", {{"type", "integer"}, {"minimum", 1}, {"default", 20}}}})),
       [open](const json& args) {
         auto w = window_arg(args);
         int limit = int(int_arg(args, "limit").value_or(20));
         if (limit < 1) throw InvalidParams("limit must be at least 1");
         auto db = open();
         json rows = json::array();
         for (const auto& k : top_kernels(*db, w, limit))
           rows.push_back({{"kernel", k.kernel}, {"launches", k.launches},
                           {"total_ns", k.total_ns}, {"max_ns", k.max_ns}});
         return text_result(rows);
       }});

  tools_.push_back(
      {"nccl_summary",
       "NCCL collectives per communicator and rank: calls, bytes, time, latest sequence number, "
       "and lateness (how long after the first rank this rank entered the same collective: mean, "
       "worst, and on the latest collective all ranks reached). A straggler has high lateness.",
       schema(with_window(json::object())), [open](const json& args) {
         auto w = window_arg(args);
         auto db = open();
         json rows = json::array();
         for (const auto& r : nccl_ranks(*db, w))
           rows.push_back({{"comm_hash", r.comm_hash}, {"rank", r.rank}, {"nranks", r.nranks},
                           {"calls", r.calls}, {"bytes", r.bytes}, {"total_ns", r.total_ns},
                           {"max_ns", r.max_ns}, {"latest_seq", r.latest_seq},
                           {"matched_collectives", r.matched}, {"mean_late_ns", r.mean_late_ns},
                           {"max_late_ns", r.max_late_ns}, {"latest_late_ns", r.latest_late_ns}});
         return text_result(rows);
       }});

  tools_.push_back(
      {"sql",
       "One read-only SQL statement over the trace (SELECT/WITH/read-only PRAGMA). Views: "
       "cuda_calls, nccl_calls, offcpu, op_stats; tables: sessions, processes, io_requests, "
       "tcp_retransmits, reclaims, stack_frames, kernels, ops. Times are wall-clock ns. Writes, "
       "ATTACH, writable PRAGMAs and extensions are refused; 10 s and max_rows limits.",
       schema({{"query", {{"type", "string"}}},
               {"max_rows", {{"type", "integer"}, {"minimum", 1}, {"default", 1000}}}},
              {"query"}),
       [open](const json& args) {
         const std::string sql = str_arg(args, "query");
         if (sql.empty()) throw InvalidParams("query is required");
         QueryLimits limits;
         limits.max_rows = int_arg(args, "max_rows").value_or(1000);
         if (limits.max_rows < 1) throw InvalidParams("max_rows must be at least 1");
         auto db = open();
         SqlGuard guard(*db);
         QueryResult r = guard.run(sql, limits);
         return text_result(json{{"columns", r.columns}, {"rows", rows_json(r)},
                                 {"truncated", r.truncated}});
       }});
}

json McpServer::call_tool(const json& params) {
  if (!params.is_object() || !params.contains("name") || !params["name"].is_string())
    throw InvalidParams("tools/call needs a tool name");
  const std::string name = params["name"];
  json args = params.value("arguments", json::object());
  if (args.is_null()) args = json::object();
  if (!args.is_object()) throw InvalidParams("arguments must be an object");
  for (const auto& t : tools_) {
    if (t.name != name) continue;
    for (const auto& [k, v] : args.items())
      if (!t.input_schema["properties"].contains(k))
        throw InvalidParams("unknown argument '" + k + "' for " + name);
    try {
      return t.run(args);
    } catch (const InvalidParams&) {
      throw;
    } catch (const std::exception& e) {
      // Bad SQL, a refused statement, an unreadable trace: the model should
      // see the message and can try again.
      return text_result(std::string(e.what()), true);
    }
  }
  throw InvalidParams("unknown tool '" + name + "'");
}

std::optional<json> McpServer::handle(const json& msg) {
  if (!msg.is_object() || msg.value("jsonrpc", "") != "2.0" || !msg.contains("method") ||
      !msg["method"].is_string())
    return error_response(msg.is_object() && msg.contains("id") ? msg["id"] : json(nullptr),
                          kInvalidRequest, "not a JSON-RPC 2.0 request");
  const std::string method = msg["method"];
  if (!msg.contains("id")) return std::nullopt;  // notifications need no answer
  const json& id = msg["id"];
  const json params = msg.value("params", json::object());
  try {
    if (method == "initialize") {
      const auto& versions = protocol_versions();
      std::string asked = params.is_object() ? params.value("protocolVersion", "") : "";
      // Echo the client's version when we speak it; else offer our newest.
      std::string version =
          std::find(versions.begin(), versions.end(), asked) != versions.end() ? asked
                                                                               : versions.front();
      return response(id, {{"protocolVersion", version},
                           {"capabilities", {{"tools", json::object()}}},
                           {"serverInfo", {{"name", "causeway"}, {"version", CAUSEWAY_VERSION}}},
                           {"instructions",
                            "Tools read one causeway trace (SQLite) of CUDA/NCCL calls and their "
                            "host context. Start with check, then trace_stats."}});
    }
    if (method == "ping") return response(id, json::object());
    if (method == "tools/list") {
      json list = json::array();
      for (const auto& t : tools_)
        list.push_back({{"name", t.name},
                        {"description", t.description},
                        {"inputSchema", t.input_schema}});
      return response(id, {{"tools", list}});
    }
    if (method == "tools/call") return response(id, call_tool(params));
    return error_response(id, kMethodNotFound, "method not found: " + method);
  } catch (const InvalidParams& e) {
    return error_response(id, kInvalidParams, e.what());
  } catch (const std::exception& e) {
    return error_response(id, kInvalidParams, e.what());
  }
}

std::string McpServer::handle_line(const std::string& line) {
  if (line.find_first_not_of(" \t\r") == std::string::npos) return "";
  json msg;
  try {
    msg = json::parse(line);
  } catch (const json::parse_error& e) {
    return error_response(nullptr, kParseError, "parse error: " + std::string(e.what())).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  auto dump = [](const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); };
  if (msg.is_array()) {  // a JSON-RPC batch (MCP 2025-03-26)
    if (msg.empty()) return dump(error_response(nullptr, kInvalidRequest, "empty batch"));
    json out = json::array();
    for (const auto& m : msg)
      if (auto r = handle(m)) out.push_back(*r);
    return out.empty() ? "" : dump(out);
  }
  auto r = handle(msg);
  return r ? dump(*r) : "";
}

void McpServer::serve(std::istream& in, std::ostream& out) {
  std::string line;
  while (std::getline(in, line)) {
    std::string reply = handle_line(line);
    if (!reply.empty()) out << reply << "\n" << std::flush;
  }
}

}  // namespace causeway::present
