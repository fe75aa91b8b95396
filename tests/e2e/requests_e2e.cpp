// SPDX-License-Identifier: Apache-2.0
// Requests through the real socket probes: a Python standard-library
// streaming server traced, raw-socket clients of every shape
// (workloads/py_http_clients.py) beside it; the trace holds each request
// with its exact chunk count, and nothing of the prompts.
#include <fstream>
#include <random>
#include <sstream>

#include "e2e_util.h"

using namespace causeway;
using namespace causeway::e2e;

namespace {

const std::string kServer = std::string(CAUSEWAY_SOURCE_DIR) + "/workloads/py_sse_server.py";
const std::string kClients = std::string(CAUSEWAY_SOURCE_DIR) + "/workloads/py_http_clients.py";

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// One traced run of the server and its clients, shared by the tests below.
struct Served {
  TempDir dir;
  std::string db = dir / "requests.db";
  std::string marker;
  RunResult r;
  Served() {
    std::mt19937_64 rng(std::random_device{}());
    marker = "cw-marker-" + std::to_string(rng());
    const std::string port = std::to_string(20000 + rng() % 20000);
    r = run("CW_PROMPT_MARKER=" + marker + " " + kBin + " trace --live off --db " + db +
            " -- /usr/bin/python3 " + kServer + " " + port + " /usr/bin/python3 " + kClients + " " + port);
  }
};

Served& served() {
  static Served s;
  return s;
}

}  // namespace

TEST(Requests, EachRequestWithItsChunks) {
  CAUSEWAY_REQUIRE_ROOT();
  Served& s = served();
  ASSERT_EQ(s.r.exit_code, 0) << s.r.out;
  ASSERT_NE(s.r.out.find("clients done"), std::string::npos) << s.r.out;
  store::Connection c(s.db, store::Connection::Mode::ReadOnly);
  // 5 new connections + 3 keep-alive + 3 pipelined + 1 aborted + 1 split + 1 with 16 KB of headers.
  EXPECT_EQ(query_int(c, "SELECT count(*) FROM requests WHERE protocol = 'http/1.1'"), 14);
  // The client's own connections (it is traced too, as the server's child) are no served requests.
  EXPECT_EQ(query_int(c, "SELECT count(DISTINCT pid) FROM requests"), 1);
  auto st = c.prepare(
      "SELECT method, path, status, chunks, aborted FROM requests WHERE protocol = 'http/1.1' ORDER BY ts_ns");
  std::vector<std::string> got;
  while (st.step())
    got.push_back(st.col_text(0) + " " + st.col_text(1) + " " + std::to_string(st.col_int(2)) + " " +
                  std::to_string(st.col_int(3)) + (st.col_int(4) ? " aborted" : ""));
  const std::vector<std::string> want = {
      "POST /v1/completions 200 3",  "POST /v1/completions 200 5", "POST /v1/completions 200 7",
      "POST /v1/completions 200 9",  "POST /v1/completions 200 11", "GET /v1/completions 200 2",
      "GET /v1/completions 200 4",   "GET /v1/completions 200 6",  "GET /ping 200 0",
      "GET /ping 200 0",             "GET /ping 200 0",            "POST /v1/completions 200 3 aborted",
      "POST /v1/completions 200 4",  "GET /v1/completions 200 2"};
  ASSERT_EQ(got.size(), want.size()) << s.r.out;
  for (size_t i = 0; i < want.size(); i++) {
    if (i == 11) {
      // The hang-up lands while the server writes on: at least the 3 events the client read, never all 200.
      EXPECT_TRUE(got[i].starts_with("POST /v1/completions 200 ") && got[i].ends_with(" aborted")) << got[i];
      continue;
    }
    EXPECT_EQ(got[i], want[i]) << i;
  }
  EXPECT_EQ(query_int(c, "SELECT count(*) FROM requests WHERE aborted = 1"), 1);
  EXPECT_GE(query_int(c, "SELECT chunks FROM requests WHERE aborted = 1"), 3);
  EXPECT_LT(query_int(c, "SELECT chunks FROM requests WHERE aborted = 1"), 200);
}

TEST(Requests, KeepAlivePipelinedAndTlsConnections) {
  CAUSEWAY_REQUIRE_ROOT();
  Served& s = served();
  ASSERT_EQ(s.r.exit_code, 0) << s.r.out;
  store::Connection c(s.db, store::Connection::Mode::ReadOnly);
  // Keep-alive: three requests, one connection; pipelined: three more on another, arrived in one read.
  EXPECT_EQ(query_int(c, "SELECT count(*) FROM requests WHERE conn = (SELECT conn FROM requests WHERE chunks = 6)"),
            3);
  EXPECT_EQ(query_int(c, "SELECT count(DISTINCT conn) FROM requests WHERE path = '/ping'"), 1);
  EXPECT_EQ(query_int(c, "SELECT count(DISTINCT ts_ns) FROM requests WHERE path = '/ping'"), 1);
  // 14 requests on 10 connections, and the TLS one counted, unparsed.
  EXPECT_EQ(query_int(c, "SELECT count(DISTINCT conn) FROM requests WHERE protocol = 'http/1.1'"), 10);
  EXPECT_EQ(query_int(c, "SELECT count(*) FROM requests WHERE protocol = 'tls'"), 1);
  EXPECT_EQ(query_int(c, "SELECT count(*) FROM requests WHERE protocol = 'tls' AND method IS NULL AND path IS NULL "
                         "AND bytes_in = 47"),
            1);
  // Each streamed request's chunk times: one gap fewer than its chunks.
  EXPECT_EQ(query_int(c, "SELECT count(*) FROM request_chunks"),
            query_int(c, "SELECT sum(chunks - 1) FROM requests WHERE chunks > 0"));
  // 2 ms between events on the server: TPOT 2 ms or more, TTFT too, for every complete stream.
  EXPECT_EQ(query_int(c, "SELECT count(*) FROM request_latency WHERE chunks > 1 AND aborted = 0 AND tpot_ms >= 1.5 "
                         "AND ttft_ms >= 1.5 AND duration_ms >= ttft_ms"),
            10);
}

TEST(Requests, NothingOfThePromptIsKept) {
  CAUSEWAY_REQUIRE_ROOT();
  Served& s = served();
  ASSERT_EQ(s.r.exit_code, 0) << s.r.out;
  // The marker was in every prompt, a header of every request and the query of some: in no byte of the trace.
  int files = 0;
  for (const auto& suffix : {"", "-wal", "-shm"}) {
    const std::string bytes = read_all(s.db + suffix);
    if (bytes.empty()) continue;
    files++;
    EXPECT_EQ(bytes.find(s.marker), std::string::npos) << s.db << suffix;
    EXPECT_EQ(bytes.find("tell me a story"), std::string::npos) << s.db << suffix;
  }
  EXPECT_GE(files, 1);
  store::Connection c(s.db, store::Connection::Mode::ReadOnly);
  EXPECT_EQ(query_int(c, "SELECT count(*) FROM requests WHERE path LIKE '%?%' OR path LIKE '%user%'"), 0);
}
