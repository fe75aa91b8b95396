// SPDX-License-Identifier: Apache-2.0
// `trace --prometheus`: a real Prometheus server (Debian's package) scrapes a
// running trace, and PromQL through its HTTP API returns the exact counts the
// workloads made: 3 cudaMalloc and 2 host-to-device copies (a Python process
// in a pod-shaped cgroup, real libcudart: also counted by its pod through
// causeway_process_info) and 4 ncclAllReduce on 2 communicators, per rank
// (workloads/nccl_calls.c, real libnccl).
// Never skipped in CI: install-deps --test installs prometheus.
#include <unistd.h>

#include <filesystem>
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
  // The process that allocates runs in a pod-shaped cgroup (cgroup v2, else
  // the v1 pids hierarchy) whose containerd state names the pod.
  const std::string root = std::filesystem::exists("/sys/fs/cgroup/cgroup.controllers") ? "/sys/fs/cgroup"
                                                                                       : "/sys/fs/cgroup/pids";
  const std::string id = "feed" + std::string(60, '2');
  const std::string top = root + "/cw-prom-" + std::to_string(getpid());
  const std::string cg = top + "/kubepods/besteffort/pod0a1b2c3d-0000-4000-8000-00000000beef/" + id;
  std::filesystem::create_directories(cg);
  const std::string state = dir / ("run/containerd/io.containerd.runtime.v2.task/k8s.io/" + id);
  std::filesystem::create_directories(state);
  std::ofstream(state + "/config.json") << R"({"annotations":{"io.kubernetes.cri.sandbox-name":"trainer-0",)"
                                        << R"("io.kubernetes.cri.sandbox-namespace":"ml-team"}})";
  {
    // 3 cudaMalloc, then alive while Prometheus scrapes.
    std::ofstream(dir / "alloc.py") << "import ctypes, time\nlib = ctypes.CDLL('" << kCudart << "')\n"
                                    << "p = ctypes.c_void_p()\nfor _ in range(3):\n"
                                    << "    lib.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(1 << 20))\n"
                                    << "for _ in range(2):\n"
                                    << "    lib.cudaMemcpy(p, p, ctypes.c_size_t(4096), 1)\n"
                                    << "time.sleep(25)\n";
  }
  const std::string script =
      "set -u\n"
      "cd " + dir.path() + "\n" +
      kBin + " trace --live off --prometheus 127.0.0.1:" + std::to_string(agent_port) + " --runtime-root " +
      dir.path() + " --lib " + kCudart + " --lib " + kNccl + " --db t.db -- sh -c '" + kWorkloads + "/nccl_calls " +
      kNccl + " >/dev/null; echo $$ > " + cg + "/cgroup.procs; exec /usr/bin/python3.11 alloc.py' > trace.log 2>&1 &\n"
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
      "nccl = lambda what, rank, n: 'sum(max_over_time(causeway_nccl_' + what + '_total{op=\"ncclAllReduce\",rank=\"' + rank + '\",nranks=\"' + n + '\"}[1m]))'\n"
      "want = {'sum(causeway_calls_total{op=\"cudaMalloc\"})': '3', 'sum(causeway_calls_total{op=\"ncclAllReduce\"})': '4',\n"
      "        'sum(causeway_call_duration_seconds_count{op=\"cudaMalloc\"})': '3', 'sum(causeway_dropped_records_total)': '0',\n"
      "        'sum(causeway_process_calls_total{op=\"cudaMalloc\"} * on(pid) group_left(pod)'\n"
      "        ' causeway_process_info{pod=\"trainer-0\",namespace=\"ml-team\",container_id=\"" + id + "\"})': '3',\n"
      "        nccl('calls', '2', '4'): '3', nccl('bytes', '2', '4'): '12288', nccl('calls', '1', '2'): '1',\n"
      "        nccl('bytes', '1', '2'): '1024',\n"
      "        'sum(causeway_copies_total{direction=\"HtoD\"})': '2', 'sum(causeway_copy_bytes_total{direction=\"HtoD\"})': '8192',\n"
      "        'causeway_explain_window_seconds': '10',\n"
      "        'sum(causeway_process_call_errors_total{op=\"cudaMalloc\"})': '3'}\n"
      "exprs = list(want)\n"
      "end = time.time() + 20\n"
      "got = {}\n"
      "while time.time() < end:\n"
      "    got = {e: q(e) for e in exprs}\n"
      "    if all(got[e] and got[e][0]['value'][1] == want[e] for e in exprs):\n"
      "        break\n"
      "    time.sleep(0.5)\n"
      "print('RESULT ' + json.dumps([r[0]['value'][1] if r else None for r in got.values()]))\n"
      "PY\n"
      "kill $prom $agent; wait $agent; tail -3 trace.log\n";
  {
    std::ofstream(dir / "run.sh") << script;
  }
  auto r = run("bash " + (dir / "run.sh"));
  for (std::filesystem::path p = cg; p.string().size() >= top.size(); p = p.parent_path()) rmdir(p.c_str());
  const auto at = r.out.find("RESULT ");
  ASSERT_NE(at, std::string::npos) << r.out;
  const json got = json::parse(r.out.substr(at + 7, r.out.find('\n', at) - at - 7));
  ASSERT_EQ(got.size(), 13u) << r.out;
  EXPECT_EQ(got[0], "3") << "cudaMalloc calls\n" << r.out;
  EXPECT_EQ(got[1], "4") << "ncclAllReduce calls\n" << r.out;
  EXPECT_EQ(got[2], "3") << "cudaMalloc latencies in the histogram\n" << r.out;
  EXPECT_EQ(got[3], "0") << "records dropped\n" << r.out;
  EXPECT_EQ(got[4], "3") << "cudaMalloc calls of pod ml-team/trainer-0\n" << r.out;
  // Per communicator and rank: rank 2 of 4 made 3 all-reduces of 1024
  // float32, rank 1 of 2 one of 256 int32.
  EXPECT_EQ(got[5], "3") << "all-reduces of rank 2 of 4\n" << r.out;
  EXPECT_EQ(got[6], "12288") << "their bytes\n" << r.out;
  EXPECT_EQ(got[7], "1") << "all-reduces of rank 1 of 2\n" << r.out;
  EXPECT_EQ(got[8], "1024") << "its bytes\n" << r.out;
  EXPECT_EQ(got[9], "2") << "host-to-device copies\n" << r.out;
  EXPECT_EQ(got[10], "8192") << "their bytes\n" << r.out;
  EXPECT_EQ(got[11], "10") << "the periodic explain's window, in seconds\n" << r.out;
  // No driver here: every cudaMalloc fails (error 35), each counted.
  EXPECT_EQ(got[12], "3") << "failed cudaMalloc calls of the process\n" << r.out;
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
