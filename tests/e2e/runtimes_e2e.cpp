// SPDX-License-Identifier: Apache-2.0
// Every copy of the CUDA runtime a process carries is probed: the runtime
// linked statically into an executable (the real libcudart_static.a, nvcc's
// default), and two shared copies at two paths in one process. No GPU: each
// call fails with 35 (no driver), its arguments are real.
#include <filesystem>
#include <nlohmann/json.hpp>

#include "e2e_util.h"

using namespace causeway;
using namespace causeway::e2e;

namespace {

int64_t q(store::Connection& c, const std::string& sql) { return query_int(c, sql); }

}  // namespace

TEST(Runtimes, AStaticallyLinkedRuntimeIsProbedThroughItsOwnSymbols) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  const std::string db = dir / "static.db";
  auto r = run(kBin + " trace --live off --launch-sampling off --db " + db + " -- " + kWorkloads +
               "/cuda_static_runtime");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  // The workload's own check: every call failed (no driver here).
  ASSERT_NE(r.out.find("16 calls failed"), std::string::npos) << r.out;
  // The summary says how the process was seen.
  EXPECT_NE(r.out.find("runtime linked into cuda_static_runtime"), std::string::npos) << r.out;
  store::Connection c(db, store::Connection::Mode::ReadOnly);
  const std::string pid = " AND pid = (SELECT pid FROM processes WHERE comm = 'cuda_static_run')";
  auto n = [&](const std::string& where) { return q(c, "SELECT count(*) FROM cuda_calls WHERE " + where + pid); };
  EXPECT_EQ(n("op = 'cudaMalloc' AND layer = 'runtime' AND ret = 35"), 3) << r.out;
  EXPECT_EQ(n("op = 'cudaMalloc' AND bytes = 1048576"), 1);
  EXPECT_EQ(n("op = 'cudaMalloc' AND bytes = 2097152"), 1);
  EXPECT_EQ(n("op = 'cudaMalloc' AND bytes = 4096"), 1);
  EXPECT_EQ(n("op = 'cudaMemcpy' AND kind = 'HtoD' AND bytes = 4096"), 1);
  EXPECT_EQ(n("op = 'cudaMemcpy' AND kind = 'DtoH' AND bytes = 8192"), 1);
  EXPECT_EQ(n("op = 'cudaMemcpyAsync' AND kind = 'DtoH' AND bytes = 512"), 1);
  EXPECT_EQ(n("op = 'cudaStreamSynchronize'"), 3);
  EXPECT_EQ(n("op = 'cudaDeviceSynchronize'"), 2);
  EXPECT_EQ(n("op = 'cudaHostAlloc' AND bytes = 65536"), 1);
  EXPECT_EQ(n("op = 'cudaFreeHost'"), 1);
  EXPECT_EQ(n("op = 'cudaFree'"), 3);
  // Each call once: 16 rows, all failed, and the kernel's counters agree
  // (a runtime entry point that calls another is not counted twice).
  EXPECT_EQ(n("1"), 16);
  EXPECT_EQ(n("ret = 0"), 0);
  EXPECT_EQ(q(c, "SELECT calls - nested FROM op_stats WHERE op = 'cudaMalloc'"), 3);
  EXPECT_EQ(q(c, "SELECT errors FROM op_stats WHERE op = 'cudaDeviceSynchronize'"), 2);
  // The failures are a diagnosis: nothing worked in this process.
  auto e = run(kBin + " explain --json --db " + db);
  ASSERT_EQ(e.exit_code, 0) << e.out;
  EXPECT_NE(e.out.find("\"root_cause\": \"call_failures\""), std::string::npos) << e.out;
  // No Python here: the chain's frame is the program's own function that
  // called the runtime (the runtime's entry points, in the same file, are not it).
  auto j = nlohmann::json::parse(e.out);
  EXPECT_EQ(j["chains"][0]["frame"]["func"], "main") << j["chains"][0];
  EXPECT_EQ(j["chains"][0]["frame"]["file"], kWorkloads + "/cuda_static_runtime");
}

TEST(Runtimes, TwoCopiesOfTheSharedRuntimeInOneProcessAreBothProbed) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  const std::string db = dir / "two.db";
  // A copy under another path is another file (device + inode).
  const std::string copy = dir / "bundled/libcudart.so.13";
  std::filesystem::create_directories(dir / "bundled");
  std::filesystem::copy_file(kCudart, copy);
  auto r = run(kBin + " trace --live off --db " + db + " -- " + kWorkloads + "/two_cudarts " + kCudart + " " +
               copy + " 2500");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("runtime: shared, 2 copies"), std::string::npos) << r.out;
  store::Connection c(db, store::Connection::Mode::ReadOnly);
  EXPECT_EQ(q(c, "SELECT count(*) FROM cuda_calls WHERE op = 'cudaMalloc' AND bytes = 1000"), 3) << r.out;
  EXPECT_EQ(q(c, "SELECT count(*) FROM cuda_calls WHERE op = 'cudaMalloc' AND bytes = 2000"), 2) << r.out;
}
