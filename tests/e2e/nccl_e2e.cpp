// SPDX-License-Identifier: Apache-2.0
// `causeway trace` on the real libnccl.so.2 (no GPU: inits fail with 1 and
// leave the handle the caller passed, collectives fail argument checks with 4;
// every argument is real). Asserts the exact nccl_calls rows of workloads/nccl_calls.c.
#include <regex>

#include "e2e_util.h"

using namespace causeway;
using namespace causeway::e2e;

namespace {
const std::string kNccl = "/usr/local/cuda/lib64/libnccl.so.2";

uint64_t fnv1a_bytes(uint8_t byte, size_t n) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < n; i++) {
    h ^= byte;
    h *= 0x100000001b3ULL;
  }
  return h;
}
}  // namespace

TEST(TraceNccl, RecordsCollectivesWithCommunicatorRankAndSequence) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  const std::string db = dir / "nccl.db";
  auto r = run(kBin + " trace --live off --db " + db + " -- " + kWorkloads + "/nccl_calls " + kNccl);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex("comm_a ([0-9a-f]{16})"))) << r.out;
  const std::string hash_a = m[1];
  char hash_b[17];
  std::snprintf(hash_b, sizeof hash_b, "%016llx", (unsigned long long)fnv1a_bytes(0x5a, 128));
  ASSERT_NE(r.out.find(std::string("comm_b ") + hash_b), std::string::npos) << r.out;

  store::Connection c(db, store::Connection::Mode::ReadOnly);
  auto rows = [&](const std::string& where) {
    return query_int(c, "SELECT count(*) FROM nccl_calls WHERE " + where);
  };
  const std::string a = "comm_hash = '" + hash_a + "' AND rank = 2 AND nranks = 4";
  // Init: rank, nranks and the uniqueId hash (the id passed by value on the stack).
  EXPECT_EQ(rows("op = 'ncclCommInitRank' AND ret = 1 AND seq IS NULL AND " + a), 1);
  // Collectives: per-communicator sequence, count, type, op, bytes, stream, root.
  EXPECT_EQ(rows("op = 'ncclAllReduce' AND count = 1024 AND datatype = 'float32' AND redop = 'sum' "
                 "AND bytes = 4096 AND stream = 22136 AND ret = 4 AND " + a),
            3);
  EXPECT_EQ(rows("op = 'ncclAllReduce' AND seq IN (0, 1, 2) AND " + a), 3);
  EXPECT_EQ(rows("op = 'ncclAllGather' AND seq = 3 AND count = 10 AND datatype = 'bfloat16' AND "
                 "redop IS NULL AND bytes = 20 AND stream = 22136 AND " + a),
            1);
  EXPECT_EQ(rows("op = 'ncclReduceScatter' AND seq = 4 AND redop = 'max' AND bytes = 20 AND " + a), 1);
  EXPECT_EQ(rows("op = 'ncclBroadcast' AND seq = 5 AND datatype = 'int8' AND bytes = 100 AND "
                 "peer = 1 AND stream = 22136 AND " + a),
            1);
  EXPECT_EQ(rows("op = 'ncclBcast' AND seq = 6 AND datatype = 'float64' AND bytes = 128 AND peer = 3 "
                 "AND stream = 22136 AND " + a),
            1);
  EXPECT_EQ(rows("op = 'ncclReduce' AND seq = 7 AND datatype = 'int64' AND redop = 'min' AND "
                 "bytes = 64 AND peer = 0 AND stream = 22136 AND " + a),
            1);
  // Point-to-point inside a group: own sequence per (direction, peer).
  EXPECT_EQ(rows("op IN ('ncclSend', 'ncclRecv') AND seq = 0 AND peer = 3 AND datatype = 'float16' "
                 "AND bytes = 64 AND " + a),
            2);
  EXPECT_EQ(rows("op = 'ncclGroupStart' AND ret = 0 AND comm_hash IS NULL"), 1);
  EXPECT_EQ(rows("op = 'ncclGroupEnd'"), 1);
  // Second communicator through ncclCommInitRankConfig: its own hash and sequence.
  const std::string b = std::string("comm_hash = '") + hash_b + "' AND rank = 1 AND nranks = 2";
  EXPECT_EQ(rows("op = 'ncclCommInitRankConfig' AND " + b), 1);
  EXPECT_EQ(rows("op = 'ncclAllReduce' AND seq = 0 AND count = 256 AND datatype = 'int32' AND "
                 "bytes = 1024 AND " + b),
            1);
  EXPECT_EQ(rows("op = 'ncclCommInitAll' AND nranks = 2 AND rank = 0 AND ret = 1"), 1);
  EXPECT_EQ(rows("op = 'ncclCommSplit' AND ret = 1"), 1);
  EXPECT_EQ(rows("op IN ('ncclCommDestroy', 'ncclCommAbort') AND ret = 0 AND comm_hash IS NULL"), 2);
  // Exactly the workload's calls (ncclBcast enters ncclBroadcast inside: folded, counted as nested).
  EXPECT_EQ(rows("1"), 19);
  EXPECT_EQ(rows("dur_ns <= 0"), 0);
  EXPECT_EQ(query_int(c, "SELECT calls FROM op_stats WHERE op = 'ncclAllReduce'"), 4);
  EXPECT_EQ(query_int(c, "SELECT errors FROM op_stats WHERE op = 'ncclAllReduce'"), 4);
  EXPECT_EQ(query_int(c, "SELECT coalesce(sum(count), 0) FROM drops"), 0);
}
