// SPDX-License-Identifier: Apache-2.0
// src/analyze/rules/memory_pressure.cpp: slow calls whose thread did direct
// reclaim inside them are explained by it; reclaim on another thread or
// outside the calls is not.
#include <gtest/gtest.h>

#include "temp_db.h"

#include "causeway/analyze/engine.h"
#include "causeway/common/op_table.h"
#include "causeway/store/trace_writer.h"

using namespace causeway;

namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kT0 = 1'800'000'000'000'000'000;

// 40 cudaMalloc of pid/tid 100 every 100 ms: 1 ms each, every 4th 30 ms.
// reclaim_tid: the thread whose reclaims (25 ms, 64 pages, inside each slow
// call) are recorded.
analyze::Explanation explain_with_reclaims(uint32_t reclaim_tid) {
  TempDb db;
  model::Batch b;
  for (int i = 0; i < 40; i++) {
    model::CudaCall c;
    c.ts_ns = kT0 + i * 100 * kMs;
    c.dur_ns = i % 4 == 3 ? 30 * kMs : 1 * kMs;
    c.pid = c.tid = 100;
    c.op_id = find_op("cudaMalloc")->id;
    c.bytes = 1 << 20;
    b.add(c);
    if (i % 4 == 3) b.add(model::Reclaim{c.ts_ns + 2 * kMs, 25 * kMs, 100, reclaim_tid, 64});
  }
  {
    store::TraceWriter w(db.path);
    w.begin_session({.host = "h", .node_id = "h", .boot_id = "b", .version = "v", .command_line = "c"});
    w.write(b);
    w.end_session(kT0 + 4000 * kMs);
  }
  return analyze::explain_file(db.path, {});
}

const analyze::CausalChain* chain(const analyze::Explanation& e, const std::string& cause) {
  for (const auto& c : e.chains)
    if (c.root_cause == cause) return &c;
  return nullptr;
}

}  // namespace

TEST(MemoryPressure, ReclaimInsideTheSlowCallsExplainsThem) {
  auto e = explain_with_reclaims(100);
  EXPECT_EQ(e.data.slow_calls, 10);
  const auto* c = chain(e, "memory_pressure");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->symptom.op, "cudaMalloc");
  EXPECT_EQ(c->impact_ns, 10 * 25 * kMs);
  ASSERT_FALSE(c->evidence.empty());
  EXPECT_EQ(c->evidence[0].data["reclaims"], 10);
  EXPECT_EQ(c->evidence[0].data["pages"], 640);
  // 250 ms of the 290 ms excess: more than half, and > 2% of the 3.9 s span.
  EXPECT_EQ(c->severity, analyze::Severity::High);
}

TEST(MemoryPressure, AnotherThreadsReclaimExplainsNothing) {
  auto e = explain_with_reclaims(101);
  EXPECT_EQ(e.data.slow_calls, 10);
  EXPECT_EQ(chain(e, "memory_pressure"), nullptr);
}
