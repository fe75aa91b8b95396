// SPDX-License-Identifier: Apache-2.0
// `causeway check --json` run as the real binary: as root on this host it
// must load BPF, fire a uprobe, find the CUDA toolkit's libraries and a
// process that maps libcudart; as nobody it must fail cleanly on privileges
// and say what it could not check.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "causeway/attach/bpf_checks.h"
#include "causeway/attach/trap_cost.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct CommandRun {
  int exit_code = -1;
  bool exited = false;
  std::string out;
};

CommandRun run(const std::string& command) {
  CommandRun r;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) r.out.append(buf, n);
  int status = ::pclose(pipe);
  r.exited = WIFEXITED(status);
  r.exit_code = r.exited ? WEXITSTATUS(status) : -1;
  return r;
}

const json* find_check(const json& report, const std::string& name) {
  for (const auto& c : report.at("checks"))
    if (c.at("name") == name) return &c;
  return nullptr;
}

std::string status_of(const json& report, const std::string& name) {
  const json* c = find_check(report, name);
  return c ? c->at("status").get<std::string>() : "(missing)";
}

const json* find_library(const json& report, const std::string& kind, const std::string& alias) {
  for (const auto& l : report.at("libraries")) {
    if (l.at("kind") != kind) continue;
    for (const auto& a : l.at("aliases"))
      if (a == alias) return &l;
  }
  return nullptr;
}

bool any_failed(const json& report) {
  for (const auto& c : report.at("checks"))
    if (c.at("status") == "fail") return true;
  return false;
}

#define REQUIRE_ROOT() \
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (BPF load, uprobe attach, setpriv); euid=" << ::geteuid()

}  // namespace

TEST(CheckE2E, RootReportOnThisHost) {
  REQUIRE_ROOT();
  // This process maps libcudart, so check must list it among the processes.
  void* cudart = ::dlopen("/usr/local/cuda/lib64/libcudart.so.13", RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(cudart, nullptr) << ::dlerror();

  CommandRun r = run(std::string(CAUSEWAY_BIN) + " check --json");
  ASSERT_TRUE(r.exited);
  json report = json::parse(r.out);
  EXPECT_EQ(status_of(report, "kernel"), "ok");
  EXPECT_EQ(status_of(report, "btf"), "ok");
  EXPECT_EQ(status_of(report, "privileges"), "ok");
  EXPECT_EQ(status_of(report, "bpf_load"), "ok");
  EXPECT_EQ(status_of(report, "uprobe"), "ok");
  EXPECT_EQ(find_check(report, "uprobe")->at("detail"), "attached to this binary and fired 3 of 3 times");
  EXPECT_EQ(status_of(report, "nvidia_driver"), "warn");  // no NVIDIA driver on this host
  EXPECT_FALSE(find_check(report, "nvidia_driver")->at("fix").get<std::string>().empty());
  EXPECT_EQ(status_of(report, "gpu_libraries"), "ok");
  EXPECT_EQ(r.exit_code, any_failed(report) ? 1 : 0);

  const json* libcudart = find_library(report, "libcudart", "/usr/local/cuda/lib64/libcudart.so.13");
  ASSERT_NE(libcudart, nullptr) << r.out;
  EXPECT_TRUE(libcudart->at("path").get<std::string>().starts_with("/usr/local/cuda"));
  EXPECT_EQ(libcudart->at("path"), fs::canonical("/usr/local/cuda/lib64/libcudart.so.13").string());
  const json* libnccl = find_library(report, "libnccl", "/usr/local/cuda/lib64/libnccl.so.2");
  ASSERT_NE(libnccl, nullptr) << r.out;
  EXPECT_NE(find_library(report, "libamdhip64", "/lib/x86_64-linux-gnu/libamdhip64.so.5"), nullptr);
  EXPECT_NE(find_library(report, "libibverbs", "/lib/x86_64-linux-gnu/libibverbs.so.1"), nullptr);
  // Each file once: the lib64 and targets/ names are one inode.
  int cudart_count = 0;
  for (const auto& l : report.at("libraries"))
    if (l.at("path") == libcudart->at("path")) ++cudart_count;
  EXPECT_EQ(cudart_count, 1);

  const uint32_t self = static_cast<uint32_t>(::getpid());
  auto pids = libcudart->at("pids").get<std::vector<uint32_t>>();
  EXPECT_NE(std::find(pids.begin(), pids.end(), self), pids.end());
  bool listed = false;
  for (const auto& p : report.at("processes")) {
    if (p.at("pid") != self) continue;
    listed = true;
    EXPECT_EQ(p.at("comm"), "causeway_e2e_te");
    ASSERT_EQ(p.at("libraries").size(), 1u);
    EXPECT_EQ(p.at("libraries")[0].at("kind"), "libcudart");
  }
  EXPECT_TRUE(listed) << "pid " << self << " maps libcudart but is not in processes";
  ::dlclose(cudart);
}

TEST(CheckE2E, TextReportHasOneLinePerCheck) {
  REQUIRE_ROOT();
  CommandRun r = run(std::string(CAUSEWAY_BIN) + " check");
  ASSERT_TRUE(r.exited);
  EXPECT_NE(r.out.find("ok    uprobe            attached to this binary and fired 3 of 3 times\n"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("warn  nvidia_driver"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("libcudart    " + fs::canonical("/usr/local/cuda/lib64/libcudart.so.13").string()),
            std::string::npos)
      << r.out;
}

TEST(CheckE2E, NonRootFailsOnPrivilegesWithoutCrashing) {
  REQUIRE_ROOT();
  // A copy nobody can reach (the build tree may sit under a 0700 folder).
  std::string tmpl = (fs::temp_directory_path() / "cw_check_XXXXXX").string();
  fs::path dir = ::mkdtemp(tmpl.data());
  ::chmod(dir.c_str(), 0755);
  fs::copy_file(CAUSEWAY_BIN, dir / "causeway");
  ::chmod((dir / "causeway").c_str(), 0755);

  CommandRun r = run("cd / && setpriv --reuid=65534 --regid=65534 --clear-groups " + (dir / "causeway").string() +
              " check --json");
  fs::remove_all(dir);
  ASSERT_TRUE(r.exited) << "killed by a signal";
  EXPECT_EQ(r.exit_code, 1);
  json report = json::parse(r.out);
  const json* priv = find_check(report, "privileges");
  ASSERT_NE(priv, nullptr);
  EXPECT_EQ(priv->at("status"), "fail");
  EXPECT_NE(priv->at("detail").get<std::string>().find("uid 65534"), std::string::npos);
  EXPECT_NE(priv->at("fix").get<std::string>().find("root"), std::string::npos);
  for (const char* name : {"bpf_load", "uprobe"}) {
    const json* c = find_check(report, name);
    ASSERT_NE(c, nullptr) << name;
    EXPECT_EQ(c->at("status"), "warn") << name;
    EXPECT_NE(c->at("detail").get<std::string>().find("needs root"), std::string::npos) << name;
  }
  EXPECT_EQ(status_of(report, "btf"), "ok");  // readable without root
  // The ldconfig cache is readable by anyone: libraries are still found.
  EXPECT_NE(find_library(report, "libcudart", "/usr/local/cuda/lib64/libcudart.so.13"), nullptr);
}

// The same probe in-process: load, attach to causeway_check_probe_target in
// this test binary, 3 calls, 3 hits.
TEST(CheckE2E, InProcessBpfLoadAndUprobeFire) {
  REQUIRE_ROOT();
  causeway::Privileges root{0, true, true, true};
  auto results = causeway::attach::check_bpf_load_and_uprobe(root);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].status, causeway::discover::CheckStatus::Ok) << results[0].detail;
  EXPECT_EQ(results[1].status, causeway::discover::CheckStatus::Ok) << results[1].detail;
  EXPECT_EQ(results[1].detail, "attached to this binary and fired 3 of 3 times");
}

// What an entry probe costs by the instruction it replaces, measured on this
// kernel (6.18 emulates push, branches and nops; a CI VM takes ~14 us to
// single-step the rest, against ~0.4 us): every class measured, and the
// stand-in libcuda's cuStreamSynchronize (a leaf that begins with a load)
// named as single-stepped, its cuLaunchKernel (begins with a push) not. A
// sync comes every step: a warning.
TEST(CheckE2E, ProbeCostsByInstructionNameTheSingleSteppedFunctions) {
  REQUIRE_ROOT();
  using causeway::discover::EntryInsn;
  std::string err;
  const auto costs = causeway::attach::measure_trap_costs(&err, /*with_pair=*/true);
  ASSERT_TRUE(costs) << err;
  EXPECT_EQ(costs->ns.size(), 6u);
  EXPECT_TRUE(costs->single_steps(EntryInsn::Other)) << costs->of(EntryInsn::Other);
  for (auto k : {EntryInsn::Push, EntryInsn::Branch, EntryInsn::Nop})
    EXPECT_FALSE(costs->single_steps(k)) << causeway::discover::entry_insn_name(k) << " " << costs->of(k);
  EXPECT_GT(costs->of(EntryInsn::Push), 0);
  // The return probe traps again: a pair costs more than its entry alone.
  EXPECT_GT(costs->pair_ns, costs->of(EntryInsn::Push));

  // This process maps the stand-in: check finds it among the processes.
  const std::string standin = std::string(CAUSEWAY_BINARY_DIR) + "/workloads/lib/libcuda.so.1";
  void* lib = ::dlopen(standin.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << ::dlerror();
  CommandRun r = run(std::string(CAUSEWAY_BIN) + " check --json");
  ::dlclose(lib);
  ASSERT_TRUE(r.exited);
  json report = json::parse(r.out);
  const json* cost = find_check(report, "uprobe_cost");
  ASSERT_NE(cost, nullptr) << r.out;
  EXPECT_EQ(cost->at("status"), "ok");
  const std::string detail = cost->at("detail");
  const size_t stepped = detail.find("; single-stepped ");
  ASSERT_NE(stepped, std::string::npos) << detail;
  EXPECT_LT(detail.find("push "), stepped) << detail;
  EXPECT_GT(detail.find("other "), stepped) << detail;
  EXPECT_NE(detail.find("; an entry and a return probe together (every traced call): "), std::string::npos) << detail;
  const json* entries = find_check(report, "probe_entries");
  ASSERT_NE(entries, nullptr) << r.out;
  EXPECT_EQ(entries->at("status"), "warn") << *entries;
  const std::string names = entries->at("detail");
  EXPECT_NE(names.find("libcuda.so.1: "), std::string::npos) << names;
  EXPECT_NE(names.find("cuStreamSynchronize (other)"), std::string::npos) << names;
  EXPECT_EQ(names.find("cuLaunchKernel ("), std::string::npos) << names;
  EXPECT_FALSE(entries->at("fix").get<std::string>().empty());
}

namespace {
struct ScratchDir {
  fs::path path;
  ScratchDir() {
    std::string tmpl = (fs::temp_directory_path() / "cw_discover_e2e_XXXXXX").string();
    path = ::mkdtemp(tmpl.data());
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};
}  // namespace

// A library deleted while mapped (upgraded under a running process) is still
// found, through /proc/PID/map_files (needs CAP_SYS_ADMIN), with its identity.
TEST(DiscoverE2E, DeletedMappedLibraryIsFoundThroughMapFiles) {
  REQUIRE_ROOT();
  ScratchDir dir;
  const fs::path copy = dir.path / "libcudart.so.13";
  fs::copy_file("/usr/local/cuda/lib64/libcudart.so.13", copy);
  auto id = causeway::discover::file_id(copy.string());
  ASSERT_TRUE(id.has_value());
  void* handle = ::dlopen(copy.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << ::dlerror();
  fs::remove(copy);

  const uint32_t self = static_cast<uint32_t>(::getpid());
  auto libs = causeway::discover::libraries_mapped_by(self);
  auto it = std::find_if(libs.begin(), libs.end(), [&](const auto& f) { return f.id == *id; });
  ASSERT_NE(it, libs.end());
  EXPECT_EQ(it->kind, causeway::LibraryKind::Cudart);
  EXPECT_TRUE(it->path.starts_with("/proc/" + std::to_string(self) + "/map_files/")) << it->path;
  EXPECT_EQ(it->found_by, (std::vector<std::string>{"maps"}));
  ::dlclose(handle);
}

// A process in another mount namespace maps a libcudart that exists at the
// same path here as a different file: discovery must report the file it
// really maps, opened through /proc/PID/root.
TEST(DiscoverE2E, LibraryInAnotherMountNamespaceIsOpenedThroughProcRoot) {
  REQUIRE_ROOT();
  ScratchDir dir;
  const fs::path libdir = dir.path / "lib", theirs = dir.path / "theirs";
  fs::create_directories(libdir);
  fs::create_directories(theirs);
  fs::copy_file("/usr/local/cuda/lib64/libcudart.so.13", theirs / "libcudart.so.13");
  std::ofstream(libdir / "libcudart.so.13") << "not the mapped file";
  auto their_id = causeway::discover::file_id((theirs / "libcudart.so.13").string());
  ASSERT_TRUE(their_id.has_value());

  // The child bind-mounts `theirs` over `lib` in its own mount namespace,
  // maps lib/libcudart.so.13 and waits for us to close its stdin.
  const std::string script = "mount --bind " + theirs.string() + " " + libdir.string() +
                             " && exec /usr/bin/python3 -c \"import ctypes,sys; ctypes.CDLL('" +
                             (libdir / "libcudart.so.13").string() +
                             "'); print('mapped', flush=True); sys.stdin.read()\"";
  int to_child[2], from_child[2];
  ASSERT_EQ(::pipe(to_child), 0);
  ASSERT_EQ(::pipe(from_child), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::dup2(to_child[0], 0);
    ::dup2(from_child[1], 1);
    ::close(to_child[1]);
    ::close(from_child[0]);
    ::execlp("unshare", "unshare", "--mount", "--propagation", "private", "sh", "-c", script.c_str(),
             static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(to_child[0]);
  ::close(from_child[1]);
  char ready[16] = {};
  ssize_t n = ::read(from_child[0], ready, sizeof ready - 1);  // blocks until the library is mapped
  std::vector<causeway::discover::LibraryFile> libs;
  if (n > 0) libs = causeway::discover::libraries_mapped_by(static_cast<uint32_t>(child));
  ::close(to_child[1]);
  ::close(from_child[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_GT(n, 0) << "child did not map the library (exit status " << status << ")";
  EXPECT_EQ(std::string(ready, 6), "mapped");

  ASSERT_EQ(libs.size(), 1u);
  EXPECT_EQ(libs[0].kind, causeway::LibraryKind::Cudart);
  EXPECT_EQ(libs[0].id, *their_id);
  EXPECT_EQ(libs[0].path, "/proc/" + std::to_string(child) + "/root" + (libdir / "libcudart.so.13").string());
  EXPECT_EQ(libs[0].pids, (std::vector<uint32_t>{static_cast<uint32_t>(child)}));
}
