// SPDX-License-Identifier: Apache-2.0
// Native call sites' stacks through the probes' site cache (bpf/pystack.bpf.h
// cw_native_site): a native process's call site is fingerprinted by its
// return address and its callers' (frame pointers), and walked again only now
// and then. Each call path must keep its own stack: the same call site
// reached from two callers is two stacks, every call has one.
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "e2e_util.h"

using namespace causeway;
using namespace causeway::e2e;

namespace {

std::set<std::string> native_funcs(store::Connection& c, int64_t stack_id) {
  std::set<std::string> out;
  auto st = c.prepare("SELECT func FROM stack_frames WHERE kind = 'native' AND stack_id = ?1");
  st.bind(1, stack_id);
  while (st.step()) out.insert(st.col_text(0));
  return out;
}

}  // namespace

TEST(NativeStacks, EachCallPathKeepsItsStackThroughTheSiteCache) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (BPF)";
  TempDir dir;
  const std::string db = dir / "t.db";
  // Each path 100 times in a row: a cache keyed on the call site alone would
  // serve path_two path_one's stack until its next recheck (the 128th call).
  const int rounds = 100;
  auto r = run(kBin + " trace --live off --db " + db + " -- " + kBuild + "/workloads/native_sites " + kCudart + " " +
               std::to_string(rounds));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  store::Connection c(db, store::Connection::Mode::ReadOnly);
  std::vector<int64_t> ids;
  auto st = c.prepare("SELECT coalesce(stack_id, -1) FROM cuda_calls WHERE op = 'cudaStreamSynchronize' ORDER BY ts_ns");
  while (st.step()) ids.push_back(st.col_int(0));
  ASSERT_EQ(ids.size(), size_t(3 * rounds)) << r.out;
  // path_one -> sync_at_a, then path_two -> sync_at_a, then sync_at_b.
  for (size_t i = 0; i < ids.size(); i++) {
    ASSERT_GE(ids[i], 0) << "call " << i << " has no stack";
    ASSERT_EQ(ids[i], ids[i / rounds * rounds]) << "call " << i << " took another path's stack";
  }
  EXPECT_EQ(std::set<int64_t>(ids.begin(), ids.end()).size(), 3u);
  const std::map<int, std::pair<std::string, std::string>> path = {
      {0, {"path_one", "path_two"}}, {1, {"path_two", "path_one"}}, {2, {"sync_at_b", "sync_at_a"}}};
  for (const auto& [i, want] : path) {
    const auto funcs = native_funcs(c, ids[size_t(i * rounds)]);
    EXPECT_TRUE(funcs.count(want.first)) << i << ": " << ::testing::PrintToString(funcs);
    EXPECT_FALSE(funcs.count(want.second)) << i << ": " << ::testing::PrintToString(funcs);
    EXPECT_TRUE(funcs.count("cudaStreamSynchronize")) << i << ": " << ::testing::PrintToString(funcs);
  }
}
