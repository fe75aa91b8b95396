// SPDX-License-Identifier: Apache-2.0
// Retention (--max-db-size) in the writer, and the ring-free decoder seam the
// fuzzer uses: malformed records are counted, never decoded or crashed on.
#include <gtest/gtest.h>

#include "temp_db.h"

#include <cstring>
#include <filesystem>
#include <vector>

#include "causeway/model/records.h"
#include "causeway/common/op_table.h"
#include "causeway/consume/consumer.h"
#include "causeway/store/trace_writer.h"

using namespace causeway;
using namespace causeway::store;
using namespace causeway::model;

namespace {

Batch calls(int64_t first_ts, int n) {
  Batch b;
  for (int i = 0; i < n; i++) {
    CudaCall c;
    c.ts_ns = first_ts + i;
    c.dur_ns = 10;
    c.pid = 1;
    c.tid = 1;
    c.op_id = find_op("cudaMalloc")->id;
    c.bytes = 4096;
    b.of<model::CudaCall>().push_back(c);
  }
  return b;
}

int64_t live_bytes(Connection& db) {
  return (*db.query_int("PRAGMA page_count") - *db.query_int("PRAGMA freelist_count")) *
         *db.query_int("PRAGMA page_size");
}
}  // namespace

TEST(Retention, UnderTheLimitNothingIsDeleted) {
  TempDb t;
  TraceWriter w(t.path);
  w.begin_session(SessionInfo{.host = "h"});
  w.write(calls(0, 1000));
  EXPECT_EQ(w.enforce_max_size(64 << 20), 0);
  EXPECT_EQ(w.connection().query_int("SELECT count(*) FROM cuda_call_events"), 1000);
  EXPECT_EQ(w.connection().query_int("SELECT count(*) FROM drops"), 0);
}

TEST(Retention, PastTheLimitTheOldestRowsGoAndAreCounted) {
  TempDb t;
  TraceWriter w(t.path);
  w.begin_session(SessionInfo{.host = "h"});
  const int64_t limit = 1 << 20;
  int64_t written = 0, deleted = 0;
  for (int i = 0; i < 40; i++) {
    w.write(calls(written, 2000));
    written += 2000;
    deleted += w.enforce_max_size(limit);
    EXPECT_LE(live_bytes(w.connection()), limit + (512 << 10)) << "after batch " << i;
  }
  auto& db = w.connection();
  const int64_t kept = *db.query_int("SELECT count(*) FROM cuda_call_events");
  EXPECT_GT(deleted, 0);
  EXPECT_EQ(kept + deleted, written);
  EXPECT_EQ(db.query_int("SELECT sum(count) FROM drops WHERE source = 'retention'"), deleted);
  // What is kept is the newest: timestamps are written-1 down to written-kept.
  EXPECT_EQ(db.query_int("SELECT min(ts_ns) FROM cuda_call_events"), written - kept);
  EXPECT_EQ(db.query_int("SELECT max(ts_ns) FROM cuda_call_events"), written - 1);
  // Under 3/4 of the limit right after a deletion round, so not every batch deletes.
  EXPECT_LT(*db.query_int("SELECT count(*) FROM drops WHERE source = 'retention'"), 40);
}

TEST(DecoderSeam, MalformedRecordsAreCountedNotDecoded) {
  consume::EventConsumer c(0);
  EXPECT_EQ(c.drain(), 0);  // no rings: nothing to drain
  const uint8_t tiny[3] = {1, 0, 0};
  c.handle(tiny, sizeof tiny);  // shorter than a header
  cw_call_event e;
  std::memset(&e, 0, sizeof e);
  e.hdr.type = CW_EV_CALL;
  e.op = 0xffff;  // no such op
  c.handle(&e, sizeof e);
  e.op = find_op("cudaMalloc")->id;
  c.handle(&e, sizeof e - 1);  // a call record cut short
  e.hdr.type = 0x7777;  // no such type
  c.handle(&e, sizeof e);
  EXPECT_EQ(c.malformed(), 4);
  EXPECT_EQ(c.take_batch().size(), 0u);
  // A well-formed one is decoded.
  e.hdr.type = CW_EV_CALL;
  e.hdr.pid = 5;
  e.args[1] = 4096;
  c.handle(&e, sizeof e);
  auto b = c.take_batch();
  ASSERT_EQ(b.of<model::CudaCall>().size(), 1u);
  EXPECT_EQ(b.of<model::CudaCall>()[0].bytes, 4096);
  EXPECT_EQ(c.malformed(), 4);
}

// Found by fuzz_event_decoder: an exit record with pid 0xffffffff made the
// per-process erase range run backwards (pid + 1 wrapped to 0).
TEST(DecoderSeam, ExitOfTheLargestPidForgetsOnlyThatProcess) {
  consume::EventConsumer c(0);
  cw_call_event call;
  std::memset(&call, 0, sizeof call);
  call.hdr.type = CW_EV_CALL;
  call.op = find_op("cudaMalloc")->id;
  for (uint32_t pid : {7u, 0xffffffffu}) {
    call.hdr.pid = pid;
    c.handle(&call, sizeof call);
  }
  cw_proc_event exit_event;
  std::memset(&exit_event, 0, sizeof exit_event);
  exit_event.hdr.type = CW_EV_PROC_EXIT;
  exit_event.hdr.pid = 0xffffffffu;
  c.handle(&exit_event, sizeof exit_event);
  auto b = c.take_batch();
  EXPECT_EQ(b.of<model::CudaCall>().size(), 2u);
  ASSERT_EQ(b.of<model::ProcessInfo>().size(), 1u);
  EXPECT_EQ(b.of<model::ProcessInfo>()[0].pid, 0xffffffffu);
  EXPECT_EQ(c.malformed(), 0);
}
