// SPDX-License-Identifier: Apache-2.0
// /proc parsing: maps lines, stat (with hostile comm), process info from a fake /proc.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "causeway/common/time.h"
#include "causeway/discover/proc_maps.h"
#include "causeway/discover/processes.h"

namespace fs = std::filesystem;
using namespace causeway::discover;

TEST(ProcMaps, ParsesFileAnonymousAndDeletedMappings) {
  std::istringstream in(
      "55d0c0a00000-55d0c0a21000 r--p 00000000 fd:01 1835032                    /usr/bin/python3.11\n"
      "7f12a4000000-7f12a4c2b000 r-xp 00028000 103:02 337937                   /usr/local/cuda-13.0/lib/libnccl.so.2\n"
      "7f12a5000000-7f12a5001000 rw-p 00000000 00:00 0 \n"
      "7f12a6000000-7f12a6021000 rw-p 00000000 00:00 0                          [heap]\n"
      "7f12a7000000-7f12a7010000 r-xp 00001000 00:1f 4242                       /tmp/my libs/libcuda.so.1 (deleted)\n"
      "garbage line\n");
  auto r = parse_proc_maps(in);
  ASSERT_EQ(r.size(), 5u);
  EXPECT_EQ(r[0].start, 0x55d0c0a00000u);
  EXPECT_EQ(r[0].end, 0x55d0c0a21000u);
  EXPECT_EQ(r[0].perms, "r--p");
  EXPECT_EQ(r[0].path, "/usr/bin/python3.11");
  EXPECT_EQ(r[1].offset, 0x28000u);
  EXPECT_EQ(r[1].dev_major, 0x103u);
  EXPECT_EQ(r[1].dev_minor, 2u);
  EXPECT_EQ(r[1].inode, 337937u);
  EXPECT_EQ(r[1].path, "/usr/local/cuda-13.0/lib/libnccl.so.2");
  EXPECT_EQ(r[2].path, "");
  EXPECT_EQ(r[2].inode, 0u);
  EXPECT_EQ(r[3].path, "[heap]");
  EXPECT_EQ(r[4].path, "/tmp/my libs/libcuda.so.1 (deleted)");
}

// A rescan skips a process whose code mappings are as they were: data files
// and shared memory mapped and unmapped each step (a DataLoader's batches)
// leave the signature alone; a library loaded (dlopen) changes it.
TEST(ProcMaps, CodeSignatureMovesOnlyWithCode) {
  const std::string base =
      "55d0c0a00000-55d0c0a21000 r-xp 00000000 103:02 1311                       /usr/bin/python3.11\n"
      "7f12a5000000-7f12a5100000 r-xp 00028000 103:02 337937                     /usr/lib/libnccl.so.2\n"
      "7f12a6000000-7f12a6021000 rw-p 00000000 00:00 0                          [heap]\n";
  auto sig = [](const std::string& text) {
    std::istringstream in(text);
    return code_maps_signature(in);
  };
  const uint64_t s0 = sig(base);
  EXPECT_NE(s0, 0u);
  EXPECT_EQ(sig(base + "7f12b0000000-7f12b4000000 rw-s 00000000 00:1a 99   /dev/shm/torch_123_456\n"
                       "7f12b4000000-7f12b5000000 r--p 00000000 103:02 77  /data/shard.bin\n"
                       "7f12b5000000-7f12b5001000 r-xp 00000000 00:00 0\n"),
            s0);
  EXPECT_NE(sig(base + "7f12c0000000-7f12c1000000 r-xp 00010000 103:02 4242 /usr/lib/libcudnn.so.9\n"), s0);
  // Nothing mapped as code from a file: not 0, which says "unreadable".
  EXPECT_EQ(sig("7f12a6000000-7f12a6021000 rw-p 00000000 00:00 0    [heap]\n"), 1u);
  EXPECT_EQ(code_maps_signature(0xfffffff0u, "/nonexistent"), 0u);
}

TEST(ProcStat, CommWithSpacesAndParens) {
  auto st = parse_proc_stat(
      "4242 (py (worker) 1) S 17 4242 4242 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 987654 1000 100\n");
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->comm, "py (worker) 1");
  EXPECT_EQ(st->state, 'S');
  EXPECT_EQ(st->ppid, 17u);
  EXPECT_EQ(st->start_ticks, 987654u);
  EXPECT_FALSE(parse_proc_stat("4242 (short) S 1 2").has_value());
  EXPECT_FALSE(parse_proc_stat("no parens").has_value());
}

TEST(ProcessInfo, FromFakeProc) {
  std::string tmpl = (fs::temp_directory_path() / "cw_proc_XXXXXX").string();
  fs::path root = ::mkdtemp(tmpl.data());
  fs::create_directories(root / "77");
  std::ofstream(root / "77" / "stat") << "77 (python3) R 12 77 77 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 500 0 0\n";
  std::ofstream(root / "77" / "comm") << "python3\n";
  {
    std::ofstream cmd(root / "77" / "cmdline", std::ios::binary);
    cmd.write("python3\0train.py\0--epochs\0""3\0", 28);
  }
  std::ofstream(root / "77" / "cgroup") << "1:name=systemd:/old\n0::/user.slice/job-17.scope\n";
  auto info = read_process_info(77, root.string());
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->pid, 77u);
  EXPECT_EQ(info->comm, "python3");
  EXPECT_EQ(info->cmdline, "python3 train.py --epochs 3");
  EXPECT_EQ(info->cgroup, "/user.slice/job-17.scope");
  EXPECT_EQ(info->ppid, 12u);
  ASSERT_TRUE(info->start_ts_ns.has_value());
  EXPECT_FALSE(read_process_info(78, root.string()).has_value());
  fs::remove_all(root);
}

TEST(ProcessInfo, ThisProcess) {
  auto info = read_process_info(static_cast<uint32_t>(::getpid()));
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->comm, "causeway_unit_t");
  EXPECT_EQ(info->ppid, static_cast<uint32_t>(::getppid()));
  EXPECT_NE(info->cmdline.find("causeway_unit_tests"), std::string::npos) << info->cmdline;
  EXPECT_FALSE(info->cgroup.empty());
  ASSERT_TRUE(info->start_ts_ns.has_value());
  // Started before now (boot-time ticks converted to wall clock).
  EXPECT_LE(*info->start_ts_ns, causeway::wall_now_ns());
}

// Containers and pods from cgroup v2 paths as the runtimes write them.
TEST(ContainerOf, RuntimesAndKubernetesLayouts) {
  const std::string id(64, 'a');
  const std::string id2 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  using causeway::discover::container_of;
  // Kubernetes, systemd cgroup driver, containerd.
  auto k = container_of("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod5f1c2b3a_8d4e_4f6a_9b0c_1d2e3f4a5b6c.slice/"
                        "cri-containerd-" + id2 + ".scope");
  EXPECT_EQ(k.pod_uid, "5f1c2b3a-8d4e-4f6a-9b0c-1d2e3f4a5b6c");
  EXPECT_EQ(k.container_id, id2);
  // Kubernetes, cgroupfs driver.
  auto f = container_of("/kubepods/besteffort/pod5f1c2b3a-8d4e-4f6a-9b0c-1d2e3f4a5b6c/" + id);
  EXPECT_EQ(f.pod_uid, "5f1c2b3a-8d4e-4f6a-9b0c-1d2e3f4a5b6c");
  EXPECT_EQ(f.container_id, id);
  // CRI-O, guaranteed QoS (no QoS slice).
  auto c = container_of("/kubepods.slice/kubepods-pod5f1c2b3a_8d4e_4f6a_9b0c_1d2e3f4a5b6c.slice/crio-" + id + ".scope");
  EXPECT_EQ(c.pod_uid, "5f1c2b3a-8d4e-4f6a-9b0c-1d2e3f4a5b6c");
  EXPECT_EQ(c.container_id, id);
  // Docker alone: a container, no pod.
  auto d = container_of("/system.slice/docker-" + id + ".scope");
  EXPECT_EQ(d.container_id, id);
  EXPECT_EQ(d.pod_uid, "");
  EXPECT_EQ(container_of("/docker/" + id).container_id, id);
  // Not in a container: a service, a user session, a 63-digit name.
  for (const std::string& p : std::vector<std::string>{"/system.slice/ssh.service", "/user.slice/user-0.slice/session-3.scope", "/",
                              "/x/" + id.substr(1), "/podcast.slice/app.service"}) {
    auto n = container_of(p);
    EXPECT_EQ(n.container_id, "") << p;
    EXPECT_EQ(n.pod_uid, "") << p;
  }
}
