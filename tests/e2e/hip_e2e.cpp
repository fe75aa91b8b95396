// SPDX-License-Identifier: Apache-2.0
// `causeway trace` on the real Debian libamdhip64.so.5: without an AMD GPU
// every call fails with 101, the arguments are real. HIP rows are cuda_calls
// rows with layer 'hip'.
#include "e2e_util.h"

using namespace causeway;
using namespace causeway::e2e;

TEST(TraceHip, RecordsHipCallsAsCudaCallsWithLayerHip) {
  CAUSEWAY_REQUIRE_ROOT();
  const std::string lib = "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5";
  TempDir dir;
  const std::string db = dir / "hip.db";
  // Every launch a row: this test checks each one's decoded arguments.
  auto r = run(kBin + " trace --live off --launch-sampling off --db " + db + " -- " + kWorkloads +
               "/hip_calls " + lib);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  store::Connection c(db, store::Connection::Mode::ReadOnly);
  auto rows = [&](const std::string& where) {
    return query_int(c, "SELECT count(*) FROM cuda_calls WHERE layer = 'hip' AND " + where);
  };
  EXPECT_EQ(rows("op = 'hipMalloc' AND ret = 101"), 2);
  EXPECT_EQ(rows("op = 'hipMalloc' AND bytes = 1048576"), 1);
  EXPECT_EQ(rows("op = 'hipMalloc' AND bytes = 4096"), 1);
  EXPECT_EQ(rows("op = 'hipFree'"), 1);
  EXPECT_EQ(rows("op = 'hipMemcpy' AND bytes = 4096 AND kind = 'HtoD'"), 1);
  EXPECT_EQ(rows("op = 'hipMemcpy' AND bytes = 8192 AND kind = 'DtoH'"), 1);
  EXPECT_EQ(rows("op = 'hipMemcpyAsync' AND bytes = 65536 AND kind = 'DtoD' AND stream = 17476"), 1);
  EXPECT_EQ(rows("op = 'hipMemset' AND bytes = 777"), 1);
  EXPECT_EQ(rows("op = 'hipMemsetAsync' AND bytes = 333 AND stream = 17476"), 1);
  EXPECT_EQ(rows("op = 'hipDeviceSynchronize'"), 1);
  EXPECT_EQ(rows("op = 'hipStreamSynchronize' AND stream = 17476"), 1);
  EXPECT_EQ(rows("op = 'hipGraphLaunch' AND stream = 17476"), 1);
  EXPECT_EQ(rows("op = 'hipLaunchKernel' AND grid_x = 4 AND grid_y = 2 AND grid_z = 1 AND "
                 "block_x = 256 AND block_y = 1 AND block_z = 1 AND shared_mem = 1024 AND "
                 "stream = 17476 AND kernel = 'hip_vector_add_stub'"),
            2);
  EXPECT_EQ(rows("op = 'hipModuleLaunchKernel' AND grid_x = 8 AND block_x = 64 AND "
                 "shared_mem = 512 AND stream = 17476"),
            1);
  EXPECT_EQ(rows("1"), 14);
  EXPECT_EQ(rows("ret != 101"), 0);
  EXPECT_EQ(query_int(c, "SELECT count(*) FROM cuda_calls WHERE layer != 'hip'"), 0);
}
