// SPDX-License-Identifier: Apache-2.0
// A traced process in a Kubernetes-shaped cgroup (the systemd driver's
// layout, a containerd scope; cgroup v2, or v1 where the host has only that) is stored with its container id, pod UID, and
// the pod's name and namespace from containerd's state for that container
// (a fixture under --runtime-root). Real cgroup v2, real uprobes on libcudart.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "e2e_util.h"

using namespace causeway;
using namespace causeway::e2e;

TEST(Containers, AProcessInAPodIsStoredWithItsPod) {
  CAUSEWAY_REQUIRE_ROOT();
  const std::string uid = "5f1c2b3a-8d4e-4f6a-9b0c-" + std::string("1d2e3f4a5b") + std::to_string(10 + getpid() % 90);
  std::string uid_ = uid;
  std::replace(uid_.begin(), uid_.end(), '-', '_');
  const std::string id = "c0ffee" + std::string(58, '1');
  // cgroup v2 where mounted at /sys/fs/cgroup, else the v1 pids hierarchy
  // (the CI machine's): the runtimes write the same paths in either.
  const std::string root = std::filesystem::exists("/sys/fs/cgroup/cgroup.controllers") ? "/sys/fs/cgroup"
                                                                                       : "/sys/fs/cgroup/pids";
  ASSERT_TRUE(std::filesystem::exists(root + "/cgroup.procs")) << "no cgroup v2 or v1 pids hierarchy at " << root;
  const std::string top = root + "/cw-e2e-" + std::to_string(getpid());
  const std::string cg = top + "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + uid_ +
                         ".slice/cri-containerd-" + id + ".scope";
  std::filesystem::create_directories(cg);
  TempDir dir;
  const std::string state = dir / ("run/containerd/io.containerd.runtime.v2.task/k8s.io/" + id);
  std::filesystem::create_directories(state);
  std::ofstream(state + "/config.json") << R"({"ociVersion":"1.1.0","annotations":{)"
                                        << R"("io.kubernetes.cri.sandbox-name":"trainer-7d9f-0",)"
                                        << R"("io.kubernetes.cri.sandbox-namespace":"ml-team"}})";
  const std::string db = dir / "t.db";
  auto r = run(kBin + " trace --live off --runtime-root " + dir.path() + " --lib " + kCudart + " --db " + db +
               " -- sh -c 'echo $$ > " + cg + "/cgroup.procs && exec " + kWorkloads + "/cuda_runtime_calls " +
               kCudart + "'");
  // The cgroups go whatever happened (deepest first; the process has exited).
  for (std::filesystem::path p = cg; p.string().size() >= top.size(); p = p.parent_path()) rmdir(p.c_str());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  store::Connection c(db, store::Connection::Mode::ReadOnly);
  const std::string row = "FROM processes WHERE cmdline LIKE '%cuda_runtime_calls%' AND ";
  EXPECT_EQ(query_int(c, "SELECT count(*) " + row + "container_id = '" + id + "'"), 1) << r.out;
  EXPECT_EQ(query_int(c, "SELECT count(*) " + row + "pod_uid = '" + uid + "'"), 1);
  EXPECT_EQ(query_int(c, "SELECT count(*) " + row + "pod_name = 'trainer-7d9f-0' AND pod_namespace = 'ml-team'"), 1);
  EXPECT_EQ(query_int(c, "SELECT count(*) FROM cuda_calls WHERE op = 'cudaMalloc'"), 3);
}
