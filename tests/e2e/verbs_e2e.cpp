// SPDX-License-Identifier: Apache-2.0
// `causeway trace` on the real libibverbs.so.1 (no HCA here: see
// workloads/verbs_calls.c for what can run), plus RDMA port counters read
// from a fake sysfs tree given with --sysfs-root.
#include <filesystem>
#include <fstream>

#include "e2e_util.h"

using namespace causeway;
using namespace causeway::e2e;

TEST(TraceVerbs, RecordsAsyncEventsAndPortCounters) {
  CAUSEWAY_REQUIRE_ROOT();
  const std::string lib = "/usr/lib/x86_64-linux-gnu/libibverbs.so.1";
  TempDir dir;
  const std::string db = dir / "verbs.db";
  const std::string sys = dir / "sys";
  auto counters = std::filesystem::path(sys) / "class/infiniband/mlx5_0/ports/1/counters";
  std::filesystem::create_directories(counters);
  std::ofstream(counters / "port_rcv_errors") << "17\n";
  std::ofstream(counters / "link_downed") << "2\n";

  auto r = run(kBin + " trace --live off --sysfs-root " + sys + " --db " + db + " -- " +
               kWorkloads + "/verbs_calls " + lib);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  store::Connection c(db, store::Connection::Mode::ReadOnly);
  auto rows = [&](const std::string& where) {
    return query_int(c,
                     "SELECT count(*) FROM verbs_events e JOIN ops o ON o.id = e.op_id WHERE " + where);
  };
  // The versioned symbols (@@IBVERBS_1.1) were attached.
  EXPECT_EQ(rows("o.name = 'ibv_get_async_event' AND e.ret = -1 AND e.dur_ns > 0"), 1);
  EXPECT_EQ(rows("o.name = 'ibv_ack_async_event' AND e.detail = 'PORT_ERR fatal port=1'"), 1);
  EXPECT_EQ(rows("o.name = 'ibv_ack_async_event' AND e.detail LIKE 'QP_FATAL fatal qp=0x%'"), 1);
  EXPECT_EQ(rows("1"), 3);
  // Counters: the first sample stores every counter, the final one again.
  EXPECT_EQ(query_int(c, "SELECT count(*) FROM ib_counters WHERE device = 'mlx5_0' AND port = 1 AND "
                         "counter = 'port_rcv_errors' AND value = 17"),
            2);
  EXPECT_EQ(query_int(c, "SELECT count(*) FROM ib_counters WHERE counter = 'link_downed' AND value = 2"), 2);
}
