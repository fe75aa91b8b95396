// SPDX-License-Identifier: Apache-2.0
// The readiness checks of `causeway check`, fed with known inputs.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "causeway/attach/bpf_checks.h"
#include "causeway/discover/readiness.h"

namespace fs = std::filesystem;
using namespace causeway::discover;

TEST(CheckKernel, ThresholdsForRingbufAndCookies) {
  EXPECT_EQ(check_kernel_version("6.18.44-fc-v445").status, CheckStatus::Ok);
  EXPECT_EQ(check_kernel_version("5.15.0-91-generic").status, CheckStatus::Ok);
  EXPECT_EQ(check_kernel_version("5.10.0-28-amd64").status, CheckStatus::Warn);
  EXPECT_EQ(check_kernel_version("5.8.0").status, CheckStatus::Warn);
  auto old = check_kernel_version("4.19.0-26-amd64");
  EXPECT_EQ(old.status, CheckStatus::Fail);
  EXPECT_NE(old.detail.find("ring buffer"), std::string::npos);
  EXPECT_FALSE(old.fix.empty());
  EXPECT_EQ(check_kernel_version("weird").status, CheckStatus::Warn);
}

TEST(CheckPrivileges, CapEffBits) {
  auto status = [](const char* capeff) { return std::string("Name:\tx\nCapInh:\t0\nCapEff:\t") + capeff + "\n"; };
  auto root = privileges_from_status(status("000001ffffffffff"), 0);
  EXPECT_TRUE(root.cap_bpf && root.cap_perfmon && root.cap_sys_admin);
  EXPECT_EQ(check_privileges(root).status, CheckStatus::Ok);
  auto bpf_perfmon = privileges_from_status(status("000000c000000000"), 1000);  // bits 38, 39
  EXPECT_TRUE(bpf_perfmon.cap_bpf && bpf_perfmon.cap_perfmon && !bpf_perfmon.cap_sys_admin);
  EXPECT_EQ(check_privileges(bpf_perfmon).status, CheckStatus::Ok);
  auto sys_admin = privileges_from_status(status("0000000000200000"), 1000);  // bit 21
  EXPECT_TRUE(sys_admin.cap_sys_admin);
  EXPECT_EQ(check_privileges(sys_admin).status, CheckStatus::Ok);
  auto bpf_only = privileges_from_status(status("0000008000000000"), 1000);
  EXPECT_TRUE(bpf_only.cap_bpf && !bpf_only.cap_perfmon);
  EXPECT_EQ(check_privileges(bpf_only).status, CheckStatus::Fail);
  auto none = check_privileges(privileges_from_status(status("0000000000000000"), 65534));
  EXPECT_EQ(none.status, CheckStatus::Fail);
  EXPECT_NE(none.detail.find("uid 65534"), std::string::npos);
  EXPECT_NE(none.fix.find("root"), std::string::npos);
}

TEST(CheckPrivileges, UnprivilegedSkipsTheBpfProbeSayingWhy) {
  auto results = causeway::attach::check_bpf_load_and_uprobe(Privileges{65534, false, false, false});
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].name, "bpf_load");
  EXPECT_EQ(results[1].name, "uprobe");
  for (const auto& r : results) {
    EXPECT_EQ(r.status, CheckStatus::Warn);
    EXPECT_NE(r.detail.find("needs root"), std::string::npos);
  }
}

TEST(CheckTracefs, MountedOrHowToMount) {
  auto ok = check_tracefs("proc /proc proc rw 0 0\nnodev /sys/kernel/tracing tracefs rw,relatime 0 0\n");
  EXPECT_EQ(ok.status, CheckStatus::Ok);
  EXPECT_EQ(ok.detail, "mounted at /sys/kernel/tracing");
  auto debugfs = check_tracefs("tracefs /sys/kernel/debug/tracing tracefs rw 0 0\n");
  EXPECT_EQ(debugfs.detail, "mounted at /sys/kernel/debug/tracing");
  auto missing = check_tracefs("proc /proc proc rw 0 0\n");
  EXPECT_EQ(missing.status, CheckStatus::Warn);
  EXPECT_EQ(missing.fix, "mount -t tracefs nodev /sys/kernel/tracing");
}

TEST(CheckLockdown, Modes) {
  EXPECT_EQ(check_lockdown(std::nullopt).status, CheckStatus::Ok);
  EXPECT_EQ(check_lockdown("[none] integrity confidentiality\n").status, CheckStatus::Ok);
  EXPECT_EQ(check_lockdown("none [integrity] confidentiality\n").status, CheckStatus::Ok);
  auto conf = check_lockdown("none integrity [confidentiality]\n");
  EXPECT_EQ(conf.status, CheckStatus::Fail);
  EXPECT_FALSE(conf.fix.empty());
}

TEST(CheckUnprivilegedBpf, OnlyMattersWithoutPrivileges) {
  Privileges root{0, true, true, true};
  Privileges user{1000, false, false, false};
  EXPECT_EQ(check_unprivileged_bpf("2\n", root).status, CheckStatus::Ok);
  auto u = check_unprivileged_bpf("2\n", user);
  EXPECT_EQ(u.status, CheckStatus::Warn);
  EXPECT_NE(u.detail.find("=2"), std::string::npos);
  EXPECT_EQ(check_unprivileged_bpf(std::nullopt, user).status, CheckStatus::Ok);
}

TEST(CheckBtf, PresentOrMissing) {
  std::string path = ::testing::TempDir() + "cw_fake_btf";
  std::ofstream(path) << "BTF bytes";
  EXPECT_EQ(check_btf(path).status, CheckStatus::Ok);
  std::remove(path.c_str());
  auto missing = check_btf(path);
  EXPECT_EQ(missing.status, CheckStatus::Fail);
  EXPECT_NE(missing.fix.find("CONFIG_DEBUG_INFO_BTF"), std::string::npos);
}

TEST(CheckNvidia, FakeDriverTreeAndAbsent) {
  std::string tmpl = (fs::temp_directory_path() / "cw_nv_XXXXXX").string();
  fs::path root = ::mkdtemp(tmpl.data());
  std::ofstream(root / "version")
      << "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n"
         "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n";
  for (const char* bus : {"0000:19:00.0", "0000:18:00.0"}) {
    fs::create_directories(root / "gpus" / bus);
    std::ofstream(root / "gpus" / bus / "information")
        << "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 0\nBus Location: \t " << bus << "\n";
  }
  auto d = read_nvidia_driver(root.string());
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->version, "550.54.15");
  ASSERT_EQ(d->gpus.size(), 2u);
  EXPECT_EQ(d->gpus[0], "NVIDIA H100 80GB HBM3 (0000:18:00.0)");
  auto c = check_nvidia_driver(d);
  EXPECT_EQ(c.status, CheckStatus::Ok);
  EXPECT_EQ(c.detail,
            "driver 550.54.15, 2 GPU(s): NVIDIA H100 80GB HBM3 (0000:18:00.0); NVIDIA H100 80GB HBM3 (0000:19:00.0)");
  // The open kernel modules say it another way (seen on an H100 host, driver 580).
  std::ofstream(root / "version")
      << "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  "
         "(dvs-builder@U22-I3-AE18-09-1)  Thu Oct  9 22:10:25 UTC 2025\n";
  EXPECT_EQ(read_nvidia_driver(root.string())->version, "580.159.04");
  fs::remove_all(root);
  EXPECT_FALSE(read_nvidia_driver(root.string()).has_value());
  EXPECT_EQ(check_nvidia_driver(std::nullopt).status, CheckStatus::Warn);
}

TEST(CheckCudaVersions, RuntimeAgainstDriver) {
  using causeway::LibraryKind;
  auto lib = [](std::string path, LibraryKind kind, std::vector<std::string> aliases = {}) {
    LibraryFile l{path, kind, {}, {"path"}, {}, aliases};
    return l;
  };
  const std::vector<LibraryFile> cuda13 = {
      lib("/usr/local/cuda-13.0/lib64/libcudart.so.13.0.96", LibraryKind::Cudart, {"/usr/local/cuda/lib64/libcudart.so.13"})};
  // No driver (this CI host): a warning saying every call will fail with 35.
  auto none = check_cuda_versions(std::nullopt, cuda13);
  EXPECT_EQ(none.status, CheckStatus::Warn);
  EXPECT_NE(none.detail.find("libcudart.so.13 (CUDA 13) needs driver >= 580"), std::string::npos) << none.detail;
  EXPECT_NE(none.detail.find("(35)"), std::string::npos);
  // The user-space driver is the kernel module's version, leading zeros and all.
  const std::vector<LibraryFile> driver580 = {lib("/usr/local/nvidia/lib64/libcuda.so.580.159.04", LibraryKind::Cuda)};
  EXPECT_EQ(check_cuda_versions(NvidiaDriver{"580.159.04", {}}, driver580).status, CheckStatus::Ok);
  EXPECT_EQ(check_cuda_versions(NvidiaDriver{"580.159.03", {}}, driver580).status, CheckStatus::Fail);
  // Too old a driver cannot run it.
  auto old = check_cuda_versions(NvidiaDriver{"550.54.15", {}}, cuda13);
  EXPECT_EQ(old.status, CheckStatus::Fail);
  EXPECT_NE(old.detail.find("this host has 550.54.15"), std::string::npos) << old.detail;
  EXPECT_NE(old.fix.find("cuda-compat"), std::string::npos);
  // The GPU host's pair works; a CUDA 12 wheel beside it too (minor-version compatibility).
  auto both = cuda13;
  both.push_back(lib("/opt/venv/lib/python3.12/site-packages/nvidia/cuda_runtime/lib/libcudart.so.12", LibraryKind::Cudart));
  auto ok = check_cuda_versions(NvidiaDriver{"580.95.05", {}}, both);
  EXPECT_EQ(ok.status, CheckStatus::Ok) << ok.detail;
  EXPECT_NE(ok.detail.find("libcudart.so.12 (CUDA 12) needs driver >= 525: 580.95.05 is enough"), std::string::npos)
      << ok.detail;
  // A user-space driver library of another version than the kernel module.
  auto mixed = cuda13;
  mixed.push_back(lib("/usr/lib/x86_64-linux-gnu/libcuda.so.570.86.10", LibraryKind::Cuda,
                      {"/usr/lib/x86_64-linux-gnu/libcuda.so.1"}));
  auto mismatch = check_cuda_versions(NvidiaDriver{"580.95.05", {}}, mixed);
  EXPECT_EQ(mismatch.status, CheckStatus::Fail);
  EXPECT_NE(mismatch.detail.find("(803)"), std::string::npos) << mismatch.detail;
  EXPECT_EQ(min_driver_for_cuda(12), 525);
  EXPECT_EQ(min_driver_for_cuda(99), 0);
}

TEST(CheckReport, AnyFailed) {
  ReadinessReport r;
  r.checks.push_back({"a", CheckStatus::Ok, "", ""});
  r.checks.push_back({"b", CheckStatus::Warn, "", "x"});
  EXPECT_FALSE(r.any_failed());
  r.checks.push_back({"c", CheckStatus::Fail, "", "y"});
  EXPECT_TRUE(r.any_failed());
}

TEST(CheckReport, DescribeFailuresNamesEachFailureAndItsFix) {
  std::vector<CheckResult> checks = {{"btf", CheckStatus::Ok, "present", ""},
                                     {"privileges", CheckStatus::Fail, "uid 1000", "run as root"},
                                     {"tracefs", CheckStatus::Warn, "not mounted", "mount it"},
                                     {"lockdown", CheckStatus::Fail, "confidentiality", ""}};
  EXPECT_EQ(describe_failures(checks), "privileges: uid 1000 (fix: run as root); lockdown: confidentiality");
  EXPECT_EQ(describe_failures({checks[0], checks[2]}), "");
}

TEST(CheckReport, TracePreflightCoversKernelBtfPrivilegesLockdown) {
  auto checks = run_trace_preflight();
  ASSERT_EQ(checks.size(), 4u);
  EXPECT_EQ(checks[0].name, "kernel");
  EXPECT_EQ(checks[1].name, "btf");
  EXPECT_EQ(checks[2].name, "privileges");
  EXPECT_EQ(checks[3].name, "lockdown");
}
