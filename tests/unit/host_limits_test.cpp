// SPDX-License-Identifier: Apache-2.0
// Reading a process's memory limit and its CPUs (discover/cgroup_memory.h,
// discover/process_cpus.h): the kernel's files as this kernel writes them
// (v2 memory.stat, v1 memory.stat, PSI, CPU lists), a limit on an ancestor,
// a hybrid host's PSI beside a v1 controller, and a line we cannot read
// named in the error.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "causeway/common/error.h"
#include "causeway/discover/cgroup_memory.h"
#include "causeway/discover/process_cpus.h"

using namespace causeway;
using namespace causeway::discover;
namespace fs = std::filesystem;

namespace {

struct Tree {
  fs::path root;
  Tree() {
    char tmpl[] = "/tmp/causeway-limits-XXXXXX";
    root = mkdtemp(tmpl);
  }
  ~Tree() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  void put(const std::string& rel, const std::string& text) const {
    fs::create_directories((root / rel).parent_path());
    std::ofstream(root / rel) << text;
  }
};

// A v2 memory.stat, abridged, as kernel 6.x writes it.
const char* kStatV2 =
    "anon 12910592\nfile 99414016\nkernel 1187840\nshmem 0\nfile_mapped 0\n"
    "workingset_refault_anon 0\nworkingset_refault_file 263552\nworkingset_activate_file 12\n"
    "pgscan 401233\npgsteal 398120\npgfault 9821\npgmajfault 3\n";

}  // namespace

TEST(HostLimitFiles, KeyValuesOfMemoryStatAndEvents) {
  auto m = parse_key_values(kStatV2);
  EXPECT_EQ(m.at("file"), 99414016);
  EXPECT_EQ(m.at("workingset_refault_file"), 263552);
  EXPECT_EQ(m.at("pgscan"), 401233);
  EXPECT_EQ(m.at("pgsteal"), 398120);
  auto ev = parse_key_values("low 0\nhigh 0\nmax 8171\noom 0\noom_kill 0\noom_group_kill 0\n");
  EXPECT_EQ(ev.at("max"), 8171);
  EXPECT_EQ(parse_key_values("").size(), 0u);
}

TEST(HostLimitFiles, AKeyValueLineWeCannotReadIsNamed) {
  try {
    parse_key_values("file 10\npgscan lots\n");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "not a \"key value\" line of a cgroup file: \"pgscan lots\"");
  }
}

TEST(HostLimitFiles, PressureTotals) {
  auto p = parse_pressure(
      "some avg10=1.52 avg60=0.80 avg300=0.21 total=4218834\n"
      "full avg10=1.20 avg60=0.61 avg300=0.15 total=3377120\n");
  EXPECT_EQ(p.some_us, 4218834);
  EXPECT_EQ(p.full_us, 3377120);
  // cpu.pressure at the root has no "full" line on older kernels.
  auto some = parse_pressure("some avg10=0.00 avg60=0.00 avg300=0.00 total=12\n");
  EXPECT_EQ(some.some_us, 12);
  EXPECT_FALSE(some.full_us);
  try {
    parse_pressure("some avg10=0.00\n");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "not a pressure line (\"some|full ... total=N\"): \"some avg10=0.00\"");
  }
}

TEST(HostLimitFiles, MemoryLimitValues) {
  EXPECT_EQ(parse_memory_limit("100663296\n"), 100663296);
  EXPECT_FALSE(parse_memory_limit("max\n"));
  EXPECT_FALSE(parse_memory_limit("9223372036854771712\n"));  // v1's "no limit"
  EXPECT_THROW(parse_memory_limit("96M"), Error);
}

TEST(HostLimitFiles, CpuLists) {
  EXPECT_EQ(count_cpu_list("0-1\n"), 2);
  EXPECT_EQ(count_cpu_list("0-3,8,10-11"), 7);
  EXPECT_EQ(count_cpu_list("5"), 1);
  EXPECT_EQ(count_cpu_list(""), 0);
  try {
    count_cpu_list("3-1");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "not a CPU list (\"0-3,8\"): \"3-1\"");
  }
  EXPECT_THROW(count_cpu_list("0-"), Error);
  EXPECT_THROW(count_cpu_list("a"), Error);
}

TEST(HostLimitFiles, ProcessCpusFromStatus) {
  Tree t;
  t.put("proc/42/status", "Name:\tpython3\nThreads:\t17\nCpus_allowed:\t3\nCpus_allowed_list:\t0-1\n");
  auto c = read_process_cpus(42, t.root / "proc");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->pid, 42u);
  EXPECT_EQ(c->threads, 17);
  EXPECT_EQ(c->cpus, 2);
  EXPECT_EQ(c->cpu_list, "0-1");
  EXPECT_GT(c->online_cpus, 0);
  EXPECT_FALSE(read_process_cpus(43, t.root / "proc"));  // gone
}

// v2: the pod's limit (an ancestor's memory.max) is the tightest; its
// counters are the ones read, with its events and PSI.
TEST(HostLimitFiles, V2LimitOnAnAncestor) {
  Tree t;
  t.put("proc/7/cgroup", "0::/kubepods/pod1/ctr\n");
  t.put("cg/kubepods/memory.max", "max\n");
  t.put("cg/kubepods/pod1/memory.max", "1073741824\n");
  t.put("cg/kubepods/pod1/memory.high", "max\n");
  t.put("cg/kubepods/pod1/memory.current", "1070000000\n");
  t.put("cg/kubepods/pod1/memory.stat", kStatV2);
  t.put("cg/kubepods/pod1/memory.events", "low 0\nhigh 0\nmax 8171\noom 0\noom_kill 0\n");
  t.put("cg/kubepods/pod1/memory.pressure",
        "some avg10=1.52 avg60=0.80 avg300=0.21 total=4218834\nfull avg10=1.20 avg60=0.61 avg300=0.15 total=3377120\n");
  t.put("cg/kubepods/pod1/ctr/memory.max", "max\n");
  t.put("cg/kubepods/pod1/ctr/memory.stat", "file 1\n");
  auto s = read_cgroup_memory(7, t.root / "proc", t.root / "cg");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->version, 2);
  EXPECT_EQ(s->cgroup, "/kubepods/pod1");
  EXPECT_EQ(s->limit_bytes, 1073741824);
  EXPECT_FALSE(s->high_bytes);
  EXPECT_EQ(s->current_bytes, 1070000000);
  EXPECT_EQ(s->file_bytes, 99414016);
  EXPECT_EQ(s->pgscan, 401233);
  EXPECT_EQ(s->pgsteal, 398120);
  EXPECT_EQ(s->refault_file, 263552);
  EXPECT_EQ(s->limit_hits, 8171);
  EXPECT_EQ(s->psi_some_us, 4218834);
  EXPECT_EQ(s->psi_full_us, 3377120);
}

// v1 (this CI host's kind, hybrid): the limit from hierarchical_memory_limit,
// the cgroup that sets it found on the way up, failcnt as its hits, and PSI
// from the process's cgroup in the v2 hierarchy mounted at unified/.
TEST(HostLimitFiles, V1LimitWithPressureFromTheUnifiedHierarchy) {
  Tree t;
  t.put("proc/9/cgroup", "9:name=systemd:/\n4:memory:/job/step\n1:cpu:/\n0::/job-psi\n");
  t.put("cg/memory/job/memory.limit_in_bytes", "100663296\n");
  t.put("cg/memory/job/memory.usage_in_bytes", "100400000\n");
  t.put("cg/memory/job/memory.failcnt", "5120\n");
  t.put("cg/memory/job/memory.stat",
        "cache 90000000\nworkingset_refault_file 10\nhierarchical_memory_limit 100663296\n"
        "total_cache 95000000\ntotal_workingset_refault_file 77000\n");
  t.put("cg/memory/job/step/memory.limit_in_bytes", "9223372036854771712\n");
  t.put("cg/memory/job/step/memory.stat",
        "cache 95000000\nworkingset_refault_file 77000\nhierarchical_memory_limit 100663296\n"
        "total_cache 95000000\ntotal_workingset_refault_file 77000\n");
  t.put("cg/unified/job-psi/memory.pressure",
        "some avg10=0.00 avg60=0.00 avg300=0.00 total=900\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=800\n");
  auto s = read_cgroup_memory(9, t.root / "proc", t.root / "cg");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->version, 1);
  EXPECT_EQ(s->cgroup, "/job");
  EXPECT_EQ(s->limit_bytes, 100663296);
  EXPECT_EQ(s->current_bytes, 100400000);
  EXPECT_EQ(s->file_bytes, 95000000);
  EXPECT_EQ(s->refault_file, 77000);
  EXPECT_EQ(s->limit_hits, 5120);
  EXPECT_FALSE(s->pgscan);
  EXPECT_EQ(s->psi_some_us, 900);
  EXPECT_EQ(s->psi_full_us, 800);
  // Where it was, kept while it lived, reads the same cgroup after it
  // exits (its /proc entry gone): the counters as they rose since.
  const auto where = read_proc_cgroup(9, t.root / "proc", "memory");
  ASSERT_TRUE(where);
  std::filesystem::remove_all(t.root / "proc/9");
  EXPECT_FALSE(read_cgroup_memory(9, t.root / "proc", t.root / "cg"));
  t.put("cg/memory/job/memory.stat",
        "cache 90000000\nworkingset_refault_file 10\nhierarchical_memory_limit 100663296\n"
        "total_cache 95000000\ntotal_workingset_refault_file 81000\n");
  auto after = read_cgroup_memory_in(*where, t.root / "cg");
  ASSERT_TRUE(after);
  EXPECT_EQ(after->cgroup, "/job");
  EXPECT_EQ(after->limit_bytes, 100663296);
  EXPECT_EQ(after->refault_file, 81000);
  EXPECT_EQ(after->psi_some_us, 900);
  EXPECT_EQ(after->pid, 0u);
}

TEST(HostLimitFiles, NoLimitAndNoController) {
  Tree t;
  t.put("proc/5/cgroup", "0::/user.slice\n");
  t.put("cg/user.slice/memory.max", "max\n");
  t.put("cg/user.slice/memory.stat", "file 4096\nworkingset_refault_file 0\n");
  auto s = read_cgroup_memory(5, t.root / "proc", t.root / "cg");
  ASSERT_TRUE(s);
  EXPECT_FALSE(s->limit_bytes);
  EXPECT_EQ(s->cgroup, "/user.slice");
  EXPECT_EQ(s->file_bytes, 4096);
  t.put("proc/6/cgroup", "0::/elsewhere\n");
  EXPECT_FALSE(read_cgroup_memory(6, t.root / "proc", t.root / "cg"));  // no memory controller there
  EXPECT_FALSE(read_cgroup_memory(8, t.root / "proc", t.root / "cg"));  // gone
}
