// SPDX-License-Identifier: Apache-2.0
// The threads family through the real tracepoints: a traced process's new
// thread names itself, then calls libcudart; the trace holds the thread's
// creation and its new name, and its calls are on that thread.
#include "e2e_util.h"

using namespace causeway;
using namespace causeway::e2e;

TEST(Threads, ANewThreadAndItsNameAreRecorded) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  const std::string db = dir / "threads.db";
  auto r = run(kBin + " trace --live off --db " + db + " -- " + kWorkloads + "/named_threads " + kCudart +
               " cw-dispatch");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  store::Connection c(db, store::Connection::Mode::ReadOnly);
  // The two syncs: the main thread's, then the named thread's.
  auto st = c.prepare("SELECT pid, tid FROM cuda_calls WHERE op = 'cudaStreamSynchronize' ORDER BY ts_ns");
  ASSERT_TRUE(st.step());
  const int64_t pid = st.col_int(0);
  EXPECT_EQ(st.col_int(1), pid);
  ASSERT_TRUE(st.step());
  const int64_t tid = st.col_int(1);
  EXPECT_NE(tid, pid);
  const std::string where = " FROM threads WHERE pid = " + std::to_string(pid) + " AND tid = " + std::to_string(tid);
  EXPECT_EQ(query_int(c, "SELECT count(*)" + where + " AND what = 0 AND comm = 'named_threads'"), 1);
  EXPECT_EQ(query_int(c, "SELECT count(*)" + where + " AND what = 1 AND comm = 'cw-dispatch'"), 1);
  // The name it had at its call: the latest before the call.
  EXPECT_EQ(query_int(c, "SELECT count(*) FROM cuda_calls k JOIN threads t ON t.tid = k.tid AND t.ts_ns = "
                         "(SELECT max(ts_ns) FROM threads WHERE tid = k.tid AND ts_ns <= k.ts_ns) "
                         "WHERE k.op = 'cudaStreamSynchronize' AND t.comm = 'cw-dispatch'"),
            1);
}
