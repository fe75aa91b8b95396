// SPDX-License-Identifier: Apache-2.0
// `trace --otlp`: a receiver on loopback takes what the exporter sends, the
// first request answered 503 (the exporter must retry it), and the official
// OpenTelemetry definitions (tests/otlp, protoc + python3-protobuf) decode
// it: the exact cudaMalloc count of a real libcudart workload as a
// cumulative monotonic sum, and the host_bound chain of a Python loop as a
// log record with its line and evidence. Never skipped in CI: install-deps
// --test installs protoc and python3-protobuf.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "e2e_util.h"

using namespace causeway;
using namespace causeway::e2e;
using nlohmann::json;

namespace {

const std::string kLoops = std::string(CAUSEWAY_SOURCE_DIR) + "/workloads/py_step_loops.py";
const std::string kProtoDir = std::string(CAUSEWAY_SOURCE_DIR) + "/tests/otlp";

// Saves each POST body as NNN_<last path part>.bin; the first answer is 503.
const char* kReceiver = R"(import http.server, os, sys
out, port = sys.argv[1], int(sys.argv[2])
n = [0]
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers['Content-Length']))
        n[0] += 1
        if n[0] == 1:
            self.send_response(503); self.end_headers(); return
        name = '%03d_%s.bin' % (n[0], self.path.rstrip('/').split('/')[-1])
        with open(os.path.join(out, name), 'wb') as f:
            f.write(body)
        assert self.headers['Content-Type'] == 'application/x-protobuf'
        self.send_response(200); self.send_header('Content-Type', 'application/x-protobuf')
        self.end_headers()
    def log_message(self, *a): pass
http.server.HTTPServer(('127.0.0.1', port), H).serve_forever()
)";

std::string attr(const json& attrs, const std::string& key) {
  for (const auto& a : attrs)
    if (a["key"] == key) {
      const json& v = a["value"];
      if (v.contains("stringValue")) return v["stringValue"];
      if (v.contains("intValue")) return v["intValue"];  // int64 maps to a JSON string
      return v.dump();
    }
  return "";
}

}  // namespace

TEST(Otlp, ARealDecoderReadsExactCountsAndChains) {
  CAUSEWAY_REQUIRE_ROOT();
  ASSERT_EQ(access("/usr/bin/protoc", X_OK), 0) << "install protobuf-compiler (.ci/install-deps --test)";
  TempDir dir;
  std::filesystem::create_directories(dir / "recv");
  const int port = 20000 + (getpid() + 7) % 20000;
  std::ofstream(dir / "receiver.py") << kReceiver;
  std::ofstream(dir / "alloc.py") << "import ctypes\nlib = ctypes.CDLL('" << kCudart << "')\n"
                                  << "p = ctypes.c_void_p()\nfor _ in range(3):\n"
                                  << "    lib.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(1 << 20))\n";
  const std::string script =
      "cd " + dir.path() + "\n" +
      "python3 receiver.py recv " + std::to_string(port) + " & recv=$!\n" + "sleep 0.5\n" + kBin +
      " trace --live off --explain-every 1s --otlp http://127.0.0.1:" + std::to_string(port) + " --db t.db --lib " +
      kCudart + " --lib " + kFakeCuda + " -- sh -c '/usr/bin/python3.11 alloc.py; /usr/bin/python3.11 " + kLoops +
      " host-bound 600 " + kFakeCuda + "'\n" + "rc=$?\nkill $recv\nexit $rc\n";
  std::ofstream(dir / "run.sh") << script;
  auto r = run("bash " + (dir / "run.sh"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  // The summary counts the 503 as a retry and drops nothing.
  EXPECT_NE(r.out.find(", 1 retries\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("DROPPED"), std::string::npos) << r.out;

  std::string files;
  for (const auto& f : std::filesystem::directory_iterator(dir / "recv")) files += " " + f.path().string();
  ASSERT_FALSE(files.empty()) << r.out;
  auto d = run("/usr/bin/python3 " + kProtoDir + "/decode.py " + kProtoDir + files + " 2>&1");
  ASSERT_EQ(d.exit_code, 0) << d.out;
  const json decoded = json::parse(d.out);

  // The last metrics request: cumulative, monotonic, exact.
  const json* last_metrics = nullptr;
  int chain_records = 0;
  const json* host_bound = nullptr;
  std::vector<std::string> names;
  for (const auto& item : decoded) names.push_back(item["file"]);
  std::sort(names.begin(), names.end());
  for (const auto& name : names)
    for (const auto& item : decoded) {
      if (item["file"] != name) continue;
      const json& req = item["request"];
      if (name.find("metrics") != std::string::npos) {
        last_metrics = &item;
        continue;
      }
      for (const auto& rl : req["resourceLogs"])
        for (const auto& sl : rl["scopeLogs"])
          for (const auto& rec : sl["logRecords"]) {
            chain_records++;
            EXPECT_EQ(rec["eventName"], "causeway.chain");
            if (attr(rec["attributes"], "causeway.root_cause") == "host_bound" && !host_bound) host_bound = &rec;
          }
    }
  ASSERT_NE(last_metrics, nullptr) << d.out;
  const json& rm = last_metrics->at("request")["resourceMetrics"][0];
  EXPECT_EQ(attr(rm["resource"]["attributes"], "service.name"), "causeway");
  const json* calls = nullptr;
  for (const auto& m : rm["scopeMetrics"][0]["metrics"])
    if (m["name"] == "causeway_calls") calls = &m;
  ASSERT_NE(calls, nullptr) << rm.dump();
  EXPECT_EQ((*calls)["sum"]["aggregationTemporality"], "AGGREGATION_TEMPORALITY_CUMULATIVE");
  EXPECT_TRUE((*calls)["sum"]["isMonotonic"].get<bool>());
  double mallocs = -1;
  for (const auto& dp : (*calls)["sum"]["dataPoints"])
    if (attr(dp["attributes"], "op") == "cudaMalloc") {
      mallocs = dp["asDouble"].get<double>();
      EXPECT_LT(std::stoull(dp["startTimeUnixNano"].get<std::string>()),
                std::stoull(dp["timeUnixNano"].get<std::string>()));
    }
  EXPECT_EQ(mallocs, 3) << calls->dump();

  // The chain: host_bound, HIGH (ERROR severity), the loop's line, evidence.
  ASSERT_NE(host_bound, nullptr) << d.out;
  const json& rec = *host_bound;
  EXPECT_EQ(rec["severityText"], "HIGH");
  EXPECT_EQ(rec["severityNumber"], "SEVERITY_NUMBER_ERROR");
  EXPECT_EQ(attr(rec["attributes"], "code.file.path"), kLoops);
  // Where the loop's CPU time goes (its samples): burn()'s loop.
  const int line = std::stoi(attr(rec["attributes"], "code.line.number"));
  EXPECT_GE(line, call_marker_line(kLoops, "burn_loop"));
  EXPECT_LE(line, call_marker_line(kLoops, "burn_loop") + 1);
  EXPECT_EQ(attr(rec["attributes"], "process.executable.name"), "python3.11");
  EXPECT_NE(rec["body"]["stringValue"].get<std::string>().find("HIGH host_bound"), std::string::npos);
  const std::string evidence = attr(rec["attributes"], "causeway.evidence");
  EXPECT_NE(evidence.find("arrayValue"), std::string::npos) << evidence;
  // Windows do not overlap: a 12 s loop explained every second gives at most
  // one record per 10 s window.
  EXPECT_GE(chain_records, 1);
  EXPECT_LE(chain_records, 3) << d.out;
}

// A URL that is not http://HOST:PORT, or https (no TLS linked), is refused
// in one line before anything is traced.
TEST(Otlp, BadUrlsAreRefusedBeforeTracing) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  for (const std::string url : {"https://collector:4318", "collector:4318", "http://:4318"}) {
    auto r = run(kBin + " trace --live off --duration 1s --otlp " + url + " --db " + (dir / "t.db"));
    EXPECT_EQ(r.exit_code, 2) << url << "\n" << r.out;
    EXPECT_NE(r.out.find("--otlp " + url + ": "), std::string::npos) << r.out;
    EXPECT_FALSE(std::filesystem::exists(dir / "t.db")) << r.out;
  }
}
