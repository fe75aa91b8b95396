// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "causeway/analyze/engine.h"
#include "causeway/common/time.h"
#include "causeway/demo/scenarios.h"
#include "causeway/present/chain_view.h"
#include "causeway/present/explain_format.h"
#include "causeway/present/mcp_protocol.h"
#include "causeway/present/mcp_server.h"
#include "causeway/store/migrations.h"
#include "causeway/store/read_only_trace.h"
#include "query_fixture.h"

using namespace causeway;
using namespace causeway::present;
using json = nlohmann::ordered_json;

namespace {

struct Mcp : ::testing::Test {
  causeway::testing::TempTrace trace;
  std::unique_ptr<McpServer> server;
  void SetUp() override {
    trace.write(causeway::testing::known_batch());
    server = std::make_unique<McpServer>(trace.path.string());
  }
  json request(const std::string& method, json params = json::object(), int id = 1) {
    json msg = {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", params}};
    std::string line = server->handle_line(msg.dump());
    return json::parse(line);
  }
  json call(const std::string& tool, json args = json::object()) {
    return request("tools/call", {{"name", tool}, {"arguments", args}})["result"];
  }
  // A tool result's text, parsed as the JSON it holds.
  json payload(const json& result) {
    EXPECT_FALSE(result.value("isError", false)) << result;
    return json::parse(result["content"][0]["text"].get<std::string>());
  }
};

TEST_F(Mcp, ServesAWholeSessionOverNewlineDelimitedStreams) {
  std::istringstream in(
      R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"0"}}})"
      "\n"
      R"({"jsonrpc":"2.0","method":"notifications/initialized"})"
      "\n\n"
      R"({"jsonrpc":"2.0","id":2,"method":"tools/list"})"
      "\n"
      R"({"jsonrpc":"2.0","id":"three","method":"ping"})"
      "\n"
      "{not json\n");
  std::ostringstream out;
  server->serve(in, out);
  std::istringstream lines(out.str());
  std::vector<json> replies;
  for (std::string l; std::getline(lines, l);) replies.push_back(json::parse(l));
  ASSERT_EQ(replies.size(), 4u);  // the notification gets no reply
  EXPECT_EQ(replies[0]["id"], 1);
  EXPECT_EQ(replies[0]["result"]["protocolVersion"], "2025-03-26");
  EXPECT_EQ(replies[0]["result"]["capabilities"], json({{"tools", json::object()}}));
  EXPECT_EQ(replies[0]["result"]["serverInfo"]["name"], "causeway");
  EXPECT_EQ(replies[1]["result"]["tools"].size(), server->tool_names().size());
  EXPECT_EQ(replies[2], json({{"jsonrpc", "2.0"}, {"id", "three"}, {"result", json::object()}}));
  EXPECT_EQ(replies[3]["error"]["code"], -32700);
  EXPECT_TRUE(replies[3]["id"].is_null());
}

TEST_F(Mcp, NegotiatesTheProtocolVersion) {
  EXPECT_EQ(request("initialize", {{"protocolVersion", "2024-11-05"}})["result"]["protocolVersion"],
            "2024-11-05");
  EXPECT_EQ(request("initialize", {{"protocolVersion", "2025-06-18"}})["result"]["protocolVersion"],
            "2025-06-18");
  EXPECT_EQ(request("initialize", {{"protocolVersion", "1999-01-01"}})["result"]["protocolVersion"],
            "2025-06-18");
}

TEST_F(Mcp, ListsReadOnlyToolsWithSchemas) {
  json tools = request("tools/list")["result"]["tools"];
  std::vector<std::string> names;
  for (const auto& t : tools) {
    names.push_back(t["name"]);
    EXPECT_FALSE(t["description"].get<std::string>().empty());
    EXPECT_EQ(t["inputSchema"]["type"], "object");
    EXPECT_TRUE(t["inputSchema"]["properties"].is_object());
  }
  std::vector<std::string> want = {"check", "trace_stats", "causal_chains", "time_account", "gpu_memory", "stacks",
                                   "top_kernels", "nccl_summary", "sql"};
  EXPECT_EQ(names, want);
}

TEST_F(Mcp, CheckDescribesTheFile) {
  json c = payload(call("check"));
  EXPECT_EQ(c["schema_version"], causeway::store::latest_schema_version());
  EXPECT_EQ(c["sessions"].size(), 1u);
  EXPECT_EQ(c["sessions"][0]["host"], "testhost");
  EXPECT_EQ(c["sessions"][0]["source"], "demo");
  EXPECT_EQ(c["rows"]["cuda_call_events"], 4);
  EXPECT_EQ(c["rows"]["offcpu_events"], 1);
  EXPECT_EQ(c["rows"]["processes"], 2);
  EXPECT_EQ(c["rows"]["stack_frames"], 2);
}

TEST_F(Mcp, TraceStatsGivesExactPercentiles) {
  json s = payload(call("trace_stats"));
  ASSERT_EQ(s.size(), 3u);
  // Most total time first: memcpy 20000, malloc 5000+9000, launch 3000.
  EXPECT_EQ(s[0]["op"], "cudaMemcpy");
  EXPECT_EQ(s[1], json({{"op", "cudaMalloc"}, {"layer", "runtime"}, {"calls", 2}, {"errors", 0},
                        {"total_ns", 14000}, {"p50_ns", 5000}, {"p95_ns", 9000},
                        {"p99_ns", 9000}, {"max_ns", 9000}}));
  EXPECT_EQ(s[2]["op"], "cudaLaunchKernel");
  json only = payload(call("trace_stats", {{"op", "cudaMalloc"}, {"pid", 101}}));
  ASSERT_EQ(only.size(), 1u);
  EXPECT_EQ(only[0]["calls"], 1);
  EXPECT_EQ(only[0]["max_ns"], 9000);
}

TEST_F(Mcp, StacksByIdAndByCall) {
  json by_id = payload(call("stacks", {{"stack_id", 7}}));
  ASSERT_EQ(by_id["frames"].size(), 2u);
  EXPECT_EQ(by_id["frames"][0]["func"], "load_batch");
  EXPECT_EQ(by_id["frames"][0]["line"], 42);
  EXPECT_EQ(by_id["frames"][1]["func"], "main");
  // The memcpy is the second row written.
  json by_call = payload(call("stacks", {{"cuda_call_rowid", 2}}));
  EXPECT_EQ(by_call["stack_id"], 7);
  json none = call("stacks", {{"cuda_call_rowid", 1}});
  EXPECT_TRUE(none["isError"].get<bool>());
  EXPECT_EQ(none["content"][0]["text"], "that call has no captured stack");
  EXPECT_EQ(request("tools/call", {{"name", "stacks"}, {"arguments", json::object()}})["error"]["code"],
            -32602);
}

TEST_F(Mcp, TopKernelsAndNcclSummary) {
  json k = payload(call("top_kernels", {{"limit", 5}}));
  EXPECT_EQ(k, json::parse(R"([{"kernel":"gemm_kernel","launches":1,"total_ns":3000,"max_ns":3000}])"));
  EXPECT_EQ(payload(call("nccl_summary")), json::array());
}

TEST_F(Mcp, TimeAccountIsExplainsAccounts) {
  // The known trace's threads make too few calls for an account.
  EXPECT_EQ(payload(call("time_account")), json::array());
  causeway::testing::TempTrace sync;
  demo::generate("sync-bound", sync.path, 1);
  McpServer on_sync(sync.path.string());
  json msg = {{"jsonrpc", "2.0"}, {"id", 1}, {"method", "tools/call"},
              {"params", {{"name", "time_account"}, {"arguments", json::object()}}}};
  json got = payload(json::parse(on_sync.handle_line(msg.dump()))["result"]);
  json want = present::to_json(analyze::explain_file(sync.path, {}))["accounts"];
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got, want);
  EXPECT_GT(got[0]["time_ns"]["sync_busy"].get<int64_t>(), 0);
  EXPECT_GT(got[0]["steps"].get<int64_t>(), 0);
}

TEST_F(Mcp, GpuMemoryHeldBySiteAtAnyMoment) {
  causeway::testing::TempTrace oom;
  auto planted = demo::generate("out-of-memory", oom.path, 1);
  McpServer on_oom(oom.path.string());
  auto reply = [&](json args) {
    json msg = {{"jsonrpc", "2.0"}, {"id", 1}, {"method", "tools/call"},
                {"params", {{"name", "gpu_memory"}, {"arguments", args}}}};
    return json::parse(on_oom.handle_line(msg.dump()));
  };
  auto call_on = [&](json args) { return reply(args)["result"]; };
  json all = payload(call_on(json::object()));
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0]["pid"], 5500);
  EXPECT_EQ(all[0]["peak"], planted.numbers["held"]);
  EXPECT_EQ(all[0]["failures"].size(), 2u);
  EXPECT_EQ(all[0]["failures"][0]["asked"], planted.numbers["asked"]);
  // Once the 30 weights are loaded, before the optimizer state: only train.py:31.
  const int64_t loaded = all[0]["timeline"][29][0];
  EXPECT_EQ(all[0]["timeline"][29][1], int64_t(30) << 30);
  json early = payload(call_on({{"at", causeway::format_wall_time(loaded + 1'000'000)}}));
  ASSERT_EQ(early[0]["held_by_site"].size(), 1u) << early;
  EXPECT_EQ(early[0]["held_by_site"][0]["where"], "train.py:31 (load_model)");
  EXPECT_EQ(early[0]["held_by_site"][0]["bytes"], int64_t(30) << 30);
  EXPECT_EQ(reply({{"at", "yesterday-ish"}})["error"]["code"], -32602);
}

TEST_F(Mcp, SqlIsGuardedLikeQuery) {
  json r = payload(call("sql", {{"query", "SELECT op, bytes FROM cuda_calls WHERE pid = 101"}}));
  EXPECT_EQ(r, json::parse(R"({"columns":["op","bytes"],"rows":[{"op":"cudaMalloc","bytes":512}],"truncated":false})"));
  json refused = call("sql", {{"query", "DELETE FROM cuda_call_events"}});
  EXPECT_TRUE(refused["isError"].get<bool>());
  EXPECT_EQ(refused["content"][0]["text"], "refused: DELETE is not allowed; the query is read-only");
  json truncated = payload(call("sql", {{"query", "SELECT pid FROM cuda_calls"}, {"max_rows", 1}}));
  EXPECT_EQ(truncated["rows"].size(), 1u);
  EXPECT_TRUE(truncated["truncated"].get<bool>());
  json bad = call("sql", {{"query", "SELECT nope FROM cuda_calls"}});
  EXPECT_TRUE(bad["isError"].get<bool>());
}

TEST_F(Mcp, ProtocolErrors) {
  EXPECT_EQ(request("no/such/method")["error"]["code"], -32601);
  EXPECT_EQ(request("tools/call", {{"name", "rm_rf"}})["error"]["code"], -32602);
  EXPECT_EQ(request("tools/call", {{"name", "sql"}, {"arguments", {{"query", "SELECT 1"}, {"x", 1}}}})["error"]["code"],
            -32602);
  EXPECT_EQ(request("tools/call", {{"name", "top_kernels"}, {"arguments", {{"limit", "ten"}}}})["error"]["code"],
            -32602);
  EXPECT_EQ(json::parse(server->handle_line(R"({"id":4,"method":"ping"})"))["error"]["code"], -32600);
  // A batch: two requests and a notification, two replies.
  json batch = json::parse(server->handle_line(
      R"([{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":2,"method":"ping"}])"));
  EXPECT_EQ(batch.size(), 2u);
}

// Issue 66: one malformed message stopped the server ("type must be string")
// and the lines after it went unanswered. Each gets its error; serving goes on.
TEST_F(Mcp, MalformedMessagesGetTheirErrorAndServingGoesOn) {
  const std::vector<std::string> lines = {
      R"({"jsonrpc":2,"id":1,"method":"ping"})",
      R"({"jsonrpc":null,"id":2,"method":"ping"})",
      R"([{"jsonrpc":2,"id":3,"method":"ping"},{"jsonrpc":"2.0","id":4,"method":"ping"}])",
      R"({"jsonrpc":"2.0","id":{"a":1},"method":"ping"})",
      R"({"jsonrpc":"2.0","id":[5],"method":"ping"})",
      R"({"jsonrpc":"2.0","id":true,"method":"ping"})",
      R"({"jsonrpc":"2.0","id":7,"method":"tools/call","params":"check"})",
      R"({"jsonrpc":"2.0","id":8,"method":"tools/call","params":[1,2]})",
      R"({"jsonrpc":"2.0","id":9,"method":42})",
      R"({"jsonrpc":"2.0","id":10,"method":"initialize","params":{"protocolVersion":5}})",
      R"({"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":["check"]}})",
      R"([1,"x",null])",
      R"({"jsonrpc":"2.0","id":"last","method":"ping"})",
  };
  std::string text;
  for (const auto& l : lines) text += l + "\n";
  std::istringstream in(text);
  std::ostringstream out;
  server->serve(in, out);
  std::istringstream got(out.str());
  std::vector<json> r;
  for (std::string l; std::getline(got, l);) r.push_back(json::parse(l));
  ASSERT_EQ(r.size(), lines.size()) << out.str();
  auto error = [](const json& reply, const json& id, int code) {
    EXPECT_EQ(reply["id"], id) << reply;
    EXPECT_EQ(reply["error"]["code"], code) << reply;
    EXPECT_FALSE(reply.contains("result")) << reply;
  };
  error(r[0], 1, -32600);
  EXPECT_EQ(r[0]["error"]["message"], "not a JSON-RPC 2.0 request (\"jsonrpc\" must be \"2.0\")");
  error(r[1], 2, -32600);
  ASSERT_EQ(r[2].size(), 2u);
  error(r[2][0], 3, -32600);
  EXPECT_EQ(r[2][1], json({{"jsonrpc", "2.0"}, {"id", 4}, {"result", json::object()}}));
  error(r[3], nullptr, -32600);
  EXPECT_EQ(r[3]["error"]["message"], "id must be a string, a number or null");
  error(r[4], nullptr, -32600);
  error(r[5], nullptr, -32600);
  error(r[6], 7, -32600);
  error(r[7], 8, -32602);
  error(r[8], 9, -32600);
  error(r[9], 10, -32602);
  error(r[10], 11, -32602);
  ASSERT_EQ(r[11].size(), 3u);
  for (const auto& e : r[11]) error(e, nullptr, -32600);
  EXPECT_EQ(r[12], json({{"jsonrpc", "2.0"}, {"id", "last"}, {"result", json::object()}}));
}

// An id or params nested 75,000 deep crashed the parser (SIGSEGV): refused
// before parsing; the cap's own depth still parses.
TEST_F(Mcp, DeepNestingIsRefusedBeforeParsing) {
  const std::string deep = std::string(75'000, '[') + std::string(75'000, ']');
  for (const std::string& line :
       {R"({"jsonrpc":"2.0","id":)" + deep + R"(,"method":"ping"})",
        R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"check","arguments":{"x":)" + deep + "}}}"}) {
    json r = json::parse(server->handle_line(line));
    EXPECT_TRUE(r["id"].is_null());
    EXPECT_EQ(r["error"]["code"], -32600);
    EXPECT_EQ(r["error"]["message"], "the message nests arrays/objects deeper than 64 levels; refused unparsed");
  }
  // Depth 64 exactly (the message 1, params 2, arguments 3, then 61 arrays): parsed and judged.
  auto nested = [](int arrays) {
    return R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"check","arguments":{"x":)" +
           std::string(arrays, '[') + std::string(arrays, ']') + "}}}";
  };
  json at_cap = json::parse(server->handle_line(nested(61)));
  EXPECT_EQ(at_cap["error"]["code"], -32602);
  EXPECT_EQ(at_cap["error"]["message"], "unknown argument 'x' for check");
  EXPECT_EQ(json::parse(server->handle_line(nested(62)))["error"]["code"], -32600);
  // Brackets inside strings are not nesting.
  EXPECT_EQ(mcp::nesting_depth(R"({"a":"[[[[\"[[[","b":[1]})", 64), 2);
}

// A 400-MB line was read whole (1.6 GB RSS): a line past the cap is refused
// unread, and the next line is served.
TEST_F(Mcp, ALineOverTheCapIsRefusedUnreadAndServingGoesOn) {
  const std::string big =
      R"({"jsonrpc":"2.0","id":1,"method":"ping","pad":")" + std::string(mcp::kMaxLineBytes, 'x') + "\"}";
  std::istringstream in(big + "\n" + R"({"jsonrpc":"2.0","id":2,"method":"ping"})" + "\n");
  std::ostringstream out;
  server->serve(in, out);
  std::istringstream got(out.str());
  std::vector<json> r;
  for (std::string l; std::getline(got, l);) r.push_back(json::parse(l));
  ASSERT_EQ(r.size(), 2u) << out.str().substr(0, 400);
  EXPECT_TRUE(r[0]["id"].is_null());
  EXPECT_EQ(r[0]["error"]["code"], -32600);
  EXPECT_EQ(r[0]["error"]["message"], "the message is longer than the 4 MiB line cap; refused unread");
  EXPECT_EQ(r[1], json({{"jsonrpc", "2.0"}, {"id", 2}, {"result", json::object()}}));
  // A batch is capped too.
  json batch = json::array();
  for (int i = 0; i <= int(mcp::kMaxBatch); ++i) batch.push_back({{"jsonrpc", "2.0"}, {"id", i}, {"method", "ping"}});
  json refused = json::parse(server->handle_line(batch.dump()));
  EXPECT_EQ(refused["error"]["code"], -32600);
  EXPECT_EQ(refused["error"]["message"], "a batch of 257 messages, over the cap of 256");
}

// A reply is capped: an 18-MB SQL result becomes an error saying so.
TEST_F(Mcp, AReplyOverTheCapBecomesAnError) {
  json msg = {{"jsonrpc", "2.0"}, {"id", 5}, {"method", "tools/call"},
              {"params", {{"name", "sql"}, {"arguments", {{"query", "SELECT hex(zeroblob(9000000)) AS h"}}}}}};
  const std::string line = server->handle_line(msg.dump());
  EXPECT_LT(line.size(), 1000u);
  json r = json::parse(line);
  EXPECT_EQ(r["id"], 5);
  EXPECT_EQ(r["error"]["code"], -32603);
  EXPECT_EQ(r["error"]["message"].get<std::string>().rfind("the reply is 18000", 0), 0u) << r;
  EXPECT_NE(r["error"]["message"].get<std::string>().find("over the 16 MiB cap"), std::string::npos) << r;
  // Under the cap it is served whole.
  msg["params"]["arguments"]["query"] = "SELECT hex(zeroblob(1000)) AS h";
  json small = payload(json::parse(server->handle_line(msg.dump()))["result"]);
  EXPECT_EQ(small["rows"][0]["h"].get<std::string>().size(), 2000u);
}

TEST_F(Mcp, AToolOnAMissingTraceIsAToolError) {
  McpServer gone((trace.dir / "gone.db").string());
  json msg = {{"jsonrpc", "2.0"}, {"id", 1}, {"method", "tools/call"},
              {"params", {{"name", "check"}}}};
  json r = json::parse(gone.handle_line(msg.dump()))["result"];
  EXPECT_TRUE(r["isError"].get<bool>());
  EXPECT_EQ(r["content"][0]["text"], "no trace at " + (trace.dir / "gone.db").string());
}

}  // namespace

namespace {

// Issue 66: a process named with terminal escapes reached the operator's
// terminal raw through explain's text; now escaped as the HTML report does.
TEST(ExplainText, TracedNamesReachTheTerminalEscaped) {
  causeway::testing::TempTrace t;
  demo::generate("sync-bound", t.path, 1);
  {
    causeway::store::Connection c(t.path.string(), causeway::store::Connection::Mode::ReadWriteCreate);
    c.exec("UPDATE processes SET comm = 'tr' || char(27) || ']0;pwned' || char(7) || 'ain'");
  }
  const std::string text = present::format_text(analyze::explain_file(t.path, {}));
  EXPECT_NE(text.find("tr\\x1b]0;pwned\\x07ain"), std::string::npos) << text;
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  EXPECT_EQ(text.find('\x07'), std::string::npos) << text;
  // The text's own line breaks stay.
  EXPECT_NE(text.find('\n'), std::string::npos);
}

}  // namespace
