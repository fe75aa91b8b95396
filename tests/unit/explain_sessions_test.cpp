// SPDX-License-Identifier: Apache-2.0
// explain on a merged file: host context of one node never explains calls
// of another, even when pid, tid and wall time coincide.
#include <gtest/gtest.h>

#include "temp_db.h"

#include "causeway/analyze/engine.h"
#include "causeway/common/op_table.h"
#include "causeway/store/trace_writer.h"

using namespace causeway;

namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kT0 = 1'800'000'000'000'000'000;

// 20 syncs of pid/tid 100, every 100 ms: 15 of 1 ms, 5 of 50 ms.
model::Batch slow_syncs() {
  model::Batch b;
  for (int i = 0; i < 20; i++) {
    model::CudaCall c;
    c.ts_ns = kT0 + i * 100 * kMs;
    c.dur_ns = i % 4 == 3 ? 50 * kMs : 1 * kMs;
    c.pid = c.tid = 100;
    c.op_id = find_op("cudaStreamSynchronize")->id;
    b.of<model::CudaCall>().push_back(c);
  }
  return b;
}

// Runnable (preempted) 45 ms inside each slow sync's time, tid 100.
model::Batch preemptions() {
  model::Batch b;
  for (int i = 3; i < 20; i += 4)
    b.of<model::OffCpuInterval>().push_back({kT0 + i * 100 * kMs + 2 * kMs, 45 * kMs, 100, 100, 0, 0, 555, "hog", 0});
  return b;
}

void session(const std::string& path, const std::string& node, const model::Batch& b) {
  store::TraceWriter w(path);
  model::SessionInfo s;
  s.host = s.node_id = node;
  s.boot_id = s.version = s.command_line = "t";
  w.begin_session(s);
  w.write(b);
  w.end_session(kT0 + 3000 * kMs);
}

bool has_chain(const analyze::Explanation& e, const std::string& cause) {
  for (const auto& c : e.chains)
    if (c.root_cause == cause) return true;
  return false;
}

}  // namespace

TEST(ExplainSessions, PreemptionOnTheSameNodeExplainsTheSlowCalls) {
  TempDb db;
  model::Batch b = slow_syncs();
  b.append(preemptions());
  session(db.path, "node-a", b);
  auto e = analyze::explain_file(db.path, {});
  EXPECT_TRUE(has_chain(e, "cpu_contention"));
  EXPECT_EQ(e.data.slow_calls, 5);
}

TEST(ExplainSessions, PreemptionOnAnotherNodeExplainsNothing) {
  TempDb db;
  session(db.path, "node-a", slow_syncs());
  session(db.path, "node-b", preemptions());  // same pid/tid and times, another node
  auto e = analyze::explain_file(db.path, {});
  EXPECT_EQ(e.data.slow_calls, 5);
  EXPECT_FALSE(has_chain(e, "cpu_contention"));
}
