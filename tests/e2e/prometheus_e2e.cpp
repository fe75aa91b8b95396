// SPDX-License-Identifier: Apache-2.0
// `trace --prometheus`: a real Prometheus server (Debian's package) scrapes a
// running trace, and PromQL through its HTTP API returns the exact counts the
// workloads made: 3 cudaMalloc (workloads/cuda_runtime_calls.c, real
// libcudart) and 4 ncclAllReduce on 2 communicators (workloads/nccl_calls.c,
// real libnccl). Never skipped in CI: install-deps --test installs prometheus.
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "e2e_util.h"

using namespace causeway;
using namespace causeway::e2e;
using nlohmann::json;

namespace {
const std::string kNccl = "/usr/local/cuda/lib64/libnccl.so.2";
const std::string kPrometheus = "/usr/bin/prometheus";
}  // namespace

TEST(Prometheus, ARealServerScrapesExactCounts) {
  CAUSEWAY_REQUIRE_ROOT();
  ASSERT_EQ(access(kPrometheus.c_str(), X_OK), 0) << "install Debian's prometheus (.ci/install-deps --test)";
  TempDir dir;
  const int agent_port = 20000 + getpid() % 20000, prom_port = agent_port + 1;
  {
    std::ofstream cfg(dir / "prometheus.yml");
    cfg << "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: causeway\n    static_configs:\n"
           "      - targets: ['127.0.0.1:" << agent_port << "']\n";
  }
  // The workloads finish at once; the trace stays up (the sleep) while
  // Prometheus scrapes. The query polls until both series have a sample.
  const std::string script =
      "set -u\n"
      "cd " + dir.path() + "\n" +
      kBin + " trace --live off --prometheus 127.0.0.1:" + std::to_string(agent_port) + " --lib " + kCudart +
      " --lib " + kNccl + " --db t.db -- sh -c '" + kWorkloads + "/cuda_runtime_calls " + kCudart + " >/dev/null; " +
      kWorkloads + "/nccl_calls " + kNccl + " >/dev/null; sleep 25' > trace.log 2>&1 &\n"
      "agent=$!\n" +
      kPrometheus + " --config.file=prometheus.yml --storage.tsdb.path=tsdb --web.listen-address=127.0.0.1:" +
      std::to_string(prom_port) + " > prom.log 2>&1 &\n"
      "prom=$!\n"
      "python3 - <<'PY'\n"
      "import json, time, urllib.parse, urllib.request\n"
      "def q(expr):\n"
      "    url = 'http://127.0.0.1:" + std::to_string(prom_port) + "/api/v1/query?' + urllib.parse.urlencode({'query': expr})\n"
      "    try:\n"
      "        return json.load(urllib.request.urlopen(url, timeout=2))['data']['result']\n"
      "    except Exception:\n"
      "        return []\n"
      "exprs = ['sum(causeway_calls_total{op=\"cudaMalloc\"})', 'sum(causeway_calls_total{op=\"ncclAllReduce\"})',\n"
      "         'sum(causeway_call_duration_seconds_count{op=\"cudaMalloc\"})', 'sum(causeway_dropped_records_total)']\n"
      "end = time.time() + 20\n"
      "got = {}\n"
      "while time.time() < end:\n"
      "    got = {e: q(e) for e in exprs}\n"
      "    if all(got.values()) and got[exprs[1]][0]['value'][1] == '4':\n"
      "        break\n"
      "    time.sleep(0.5)\n"
      "print('RESULT ' + json.dumps({e: (r[0]['value'][1] if r else None) for e, r in got.items()}))\n"
      "PY\n"
      "kill $prom $agent; wait $agent; tail -3 trace.log\n";
  {
    std::ofstream(dir / "run.sh") << script;
  }
  auto r = run("bash " + (dir / "run.sh"));
  const auto at = r.out.find("RESULT ");
  ASSERT_NE(at, std::string::npos) << r.out;
  const json got = json::parse(r.out.substr(at + 7, r.out.find('\n', at) - at - 7));
  EXPECT_EQ(got["sum(causeway_calls_total{op=\"cudaMalloc\"})"], "3") << r.out;
  EXPECT_EQ(got["sum(causeway_calls_total{op=\"ncclAllReduce\"})"], "4") << r.out;
  EXPECT_EQ(got["sum(causeway_call_duration_seconds_count{op=\"cudaMalloc\"})"], "3") << r.out;
  EXPECT_EQ(got["sum(causeway_dropped_records_total)"], "0") << r.out;
}

// Only loopback unless another host is named; a busy or bad address is
// refused in one line before anything is traced.
TEST(Prometheus, BadAddressesAreRefusedBeforeTracing) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  auto r = run(kBin + " trace --live off --duration 1s --prometheus nohost.invalid:x --db " + (dir / "t.db"));
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("--prometheus nohost.invalid:x"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir / "t.db")) << r.out;
}
