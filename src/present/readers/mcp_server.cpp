// SPDX-License-Identifier: Apache-2.0
#include "causeway/present/explain_format.h"
#include "causeway/present/mcp_server.h"
#include "causeway/present/mcp_protocol.h"

#include <filesystem>

#include "causeway/analyze/engine.h"
#include "causeway/analyze/trace_stats.h"
#include "causeway/common/error.h"
#include "causeway/common/time.h"
#include "causeway/present/table_format.h"
#include "causeway/present/trace_window.h"
#include "causeway/store/read_only_trace.h"
#include "causeway/store/read_only_trace.h"
#include "causeway/analyze/trace_view.h"

namespace causeway::present {
namespace {

using json = McpServer::json;

using mcp::error_response;
using mcp::kInvalidParams;
using mcp::kMethodNotFound;

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

json response(const json& id, json result) { return mcp::result_response(id, std::move(result)); }

json text_result(const json& payload, bool is_error = false) {
  json r = {{"content", json::array({{{"type", "text"},
                                       {"text", payload.is_string() ? payload.get<std::string>()
                                                                    : payload.dump(2, ' ', false, nlohmann::json::error_handler_t::replace)}}})}};
  if (is_error) r["isError"] = true;
  return r;
}

// Each tool call opens the trace afresh, read-only. The path is the
// server's, which holds the tools too.
auto trace_opener(const std::string& db_path) {
  return [&db_path] { return store::open_trace_read_only(db_path); };
}

analyze::ExplainOptions explain_options(const TraceWindow& w) {
  analyze::ExplainOptions opts;
  opts.from_ns = w.from_ns;
  opts.to_ns = w.to_ns;
  if (w.pid) opts.pid = uint32_t(*w.pid);
  return opts;
}

json latency_json(const analyze::OpLatency& s) {
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

// The registration order is the order of tools/list.
McpServer::McpServer(std::string db_path) : db_path_(std::move(db_path)) {
  add_overview_tools();
  add_explain_tools();
  add_stack_tool();
  add_kernel_and_nccl_tools();
  add_sql_tool();
}

// What the file holds, and its per-op latency: where a client starts.
void McpServer::add_overview_tools() {
  const auto open = trace_opener(db_path_);

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
         for (const auto& r : analyze::sessions(*db)) {
           json s = {{"id", r.id},           {"host", r.host},
                     {"node_id", r.node_id}, {"source", r.source},
                     {"version", r.version}, {"command_line", r.command_line},
                     {"start", format_wall_time(r.start_ts_ns)}};
           s["end"] = r.end_ts_ns ? json(format_wall_time(*r.end_ts_ns)) : json(nullptr);
           sessions.push_back(s);
         }
         out["sessions"] = sessions;
         json counts;
         for (const auto& [table, n] : analyze::family_row_counts(*db)) counts[table] = n;
         out["rows"] = counts;
         out["dropped"] = analyze::records_dropped(*db);
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
         for (const auto& s : analyze::op_latencies(*db, w, str_arg(args, "op"))) rows.push_back(latency_json(s));
         return text_result(rows);
       }});
}

// The explain engine's answers: causal chains, time accounts, GPU memory.
void McpServer::add_explain_tools() {
  const auto open = trace_opener(db_path_);

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
         analyze::ExplainOptions opts = explain_options(w);
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
         const analyze::ExplainOptions opts = explain_options(w);
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
         const analyze::ExplainOptions opts = explain_options(w);
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
}

void McpServer::add_stack_tool() {
  const auto open = trace_opener(db_path_);

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
         for (auto [key, table] : {std::pair{"cuda_call_rowid", analyze::CallTable::Cuda},
                                   std::pair{"nccl_call_rowid", analyze::CallTable::Nccl}}) {
           auto rowid = int_arg(args, key);
           if (!rowid) continue;
           const auto ref = analyze::call_stack(*db, table, *rowid);
           if (!ref.found)
             return text_result("no call with rowid " + std::to_string(*rowid) + " in " +
                                    analyze::call_table_name(table), true);
           if (!ref.stack_id) return text_result("that call has no captured stack", true);
           id = ref.stack_id;
         }
         if (!id) throw InvalidParams("give stack_id, cuda_call_rowid or nccl_call_rowid");
         json frames = json::array();
         for (const auto& r : analyze::stack_frames(*db, *id)) {
           json f = {{"depth", r.depth}, {"kind", r.frame.kind}, {"func", r.frame.func},
                     {"file", r.frame.file}};
           f["line"] = r.frame.line ? json(*r.frame.line) : json(nullptr);
           f["module"] = r.frame.module;
           frames.push_back(f);
         }
         if (frames.empty()) return text_result("no frames for stack_id " + std::to_string(*id), true);
         return text_result(json{{"stack_id", *id}, {"frames", frames}});
       }});
}

void McpServer::add_kernel_and_nccl_tools() {
  const auto open = trace_opener(db_path_);

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
         for (const auto& k : analyze::top_kernels(*db, w, limit))
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
         for (const auto& r : analyze::nccl_ranks(*db, w))
           rows.push_back({{"comm_hash", r.comm_hash}, {"rank", r.rank}, {"nranks", r.nranks},
                           {"calls", r.calls}, {"bytes", r.bytes}, {"total_ns", r.total_ns},
                           {"max_ns", r.max_ns}, {"latest_seq", r.latest_seq},
                           {"matched_collectives", r.matched}, {"mean_late_ns", r.mean_late_ns},
                           {"max_late_ns", r.max_late_ns}, {"latest_late_ns", r.latest_late_ns}});
         return text_result(rows);
       }});
}

void McpServer::add_sql_tool() {
  const auto open = trace_opener(db_path_);

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
         store::QueryLimits limits;
         limits.max_rows = int_arg(args, "max_rows").value_or(1000);
         if (limits.max_rows < 1) throw InvalidParams("max_rows must be at least 1");
         auto db = open();
         store::SqlGuard guard(*db);
         store::QueryResult r = guard.run(sql, limits);
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
  auto checked = mcp::validate(msg);
  if (auto* error = std::get_if<json>(&checked)) return *error;
  return dispatch(std::get<mcp::Request>(checked));
}

// A validated request (mcp::validate): its params are an object.
std::optional<json> McpServer::dispatch(const mcp::Request& request) {
  if (request.notification) return std::nullopt;  // notifications need no answer
  const json& id = request.id;
  const json& params = request.params;
  const std::string& method = request.method;
  try {
    if (method == "initialize") {
      const auto& versions = protocol_versions();
      const json asked_json = params.value("protocolVersion", json(""));
      if (!asked_json.is_string()) throw InvalidParams("protocolVersion must be a string");
      const std::string asked = asked_json.get<std::string>();
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
  return mcp::handle_line(line, [this](const mcp::Request& r) { return dispatch(r); });
}

void McpServer::serve(std::istream& in, std::ostream& out) {
  std::string line;
  bool too_long = false;
  while (mcp::read_line(in, line, too_long)) {
    const std::string reply = too_long ? mcp::line_too_long_reply() : handle_line(line);
    if (!reply.empty()) out << reply << "\n" << std::flush;
    if (!out) return;  // the client is gone
  }
}

}  // namespace causeway::present
