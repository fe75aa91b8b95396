// SPDX-License-Identifier: Apache-2.0
#pragma once
// A small trace with known rows, written through the store API, shared by the
// query/export/mcp/report tests.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "causeway/store/trace_writer.h"

namespace causeway::testing {

constexpr int64_t kBase = 1'790'000'000'000'000'000;  // 2026-09-21T...Z

inline model::Batch known_batch() {
  using namespace model;
  Batch b;
  b.of<model::ProcessInfo>().push_back({.pid = 100, .comm = "train", .cmdline = "python train.py"});
  b.of<model::ProcessInfo>().push_back({.pid = 101, .comm = "loader", .cmdline = "loader --fast"});
  CudaCall malloc1{.ts_ns = kBase + 1000, .dur_ns = 5000, .pid = 100, .tid = 100, .op_id = 5};
  malloc1.bytes = 1 << 20;
  CudaCall copy{.ts_ns = kBase + 20000, .dur_ns = 20000, .pid = 100, .tid = 100, .op_id = 12};
  copy.bytes = 4096;
  copy.kind = 1;
  copy.stack_id = 7;
  CudaCall launch{.ts_ns = kBase + 50000, .dur_ns = 3000, .pid = 100, .tid = 102, .op_id = 1};
  launch.grid = Dim3{1, 2, 3};
  launch.block = Dim3{128, 1, 1};
  launch.stream = 0;
  launch.kernel = "gemm_kernel";
  CudaCall malloc2{.ts_ns = kBase + 60000, .dur_ns = 9000, .pid = 101, .tid = 101, .op_id = 5};
  malloc2.bytes = 512;
  b.of<model::CudaCall>() = {malloc1, copy, launch, malloc2};
  b.of<model::OffCpuInterval>().push_back({.ts_ns = kBase + 22000, .dur_ns = 15000, .pid = 100, .tid = 100, .cpu = 3,
                      .state = 0, .by_pid = 555, .by_comm = "stress-ng", .waker_pid = 0});
  b.of<model::IoRequest>().push_back({.ts_ns = kBase + 25000, .dur_ns = 8000, .pid = 100, .dev = "259:0",
                  .bytes = 65536, .op = "read"});
  b.of<model::Reclaim>().push_back({.ts_ns = kBase + 23000, .dur_ns = 2000, .pid = 100, .tid = 100,
                        .nr_reclaimed = 32});
  b.of<model::TcpRetransmit>().push_back({.ts_ns = kBase + 30000, .pid = 101, .saddr = "10.0.0.1", .daddr = "10.0.0.2",
                   .sport = 40000, .dport = 29500, .state = "ESTABLISHED"});
  add_stack(b, 7, {{.kind = "python", .func = "load_batch", .file = "train.py", .line = 42},
                   {.kind = "python", .func = "main", .file = "train.py", .line = 90}});
  return b;
}

struct TempTrace {
  std::filesystem::path dir, path;
  TempTrace() {
    char tmpl[] = "/tmp/causeway-test-XXXXXX";
    dir = ::mkdtemp(tmpl);
    path = dir / "trace.db";
  }
  ~TempTrace() { std::filesystem::remove_all(dir); }
  // Writes `b` in one session and closes the writer.
  void write(const model::Batch& b) {
    store::TraceWriter w(path.string());
    model::SessionInfo s;
    s.host = "testhost";
    s.boot_id = "boot";
    s.version = "test";
    s.command_line = "causeway trace";
    s.start_ts_ns = kBase;
    s.source = "demo";
    w.begin_session(s);
    w.write(b);
    w.end_session(kBase + 1'000'000);
  }
};

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace causeway::testing

namespace causeway::testing {

// Two ranks of one communicator: rank 1 enters collective seq 1, 2, 3 late by
// 500, 500 and 7000 ns; rank 0 alone reaches seq 4. The NCCL op is looked up
// (or, before the op table has NCCL ops, added) as id 128.
inline std::string add_nccl_rows(TempTrace& t) {
  {
    store::TraceWriter w(t.path.string());
    model::SessionInfo s;
    s.host = "testhost";
    s.start_ts_ns = kBase;
    w.begin_session(s);
    model::Batch b;
    const int64_t late[] = {500, 500, 7000};
    for (int seq = 1; seq <= 4; seq++) {
      for (int rank = 0; rank < 2; rank++) {
        if (seq == 4 && rank == 1) continue;
        model::NcclCall c{.ts_ns = kBase + 100000 + seq * 10000 + (rank ? late[seq - 1] : 0),
                          .dur_ns = 3000, .pid = uint32_t(200 + rank), .tid = uint32_t(200 + rank),
                          .op_id = 128};
        c.comm_hash = "c0ffee";
        c.rank = rank;
        c.nranks = 2;
        c.seq = seq;
        c.bytes = 1 << 20;
        c.datatype = "float32";
        c.redop = "sum";
        b.of<model::NcclCall>().push_back(c);
      }
    }
    w.write(b);
    w.end_session(kBase + 1'000'000);
  }
  store::Connection c(t.path.string(), store::Connection::Mode::ReadWriteCreate);
  c.exec("INSERT OR IGNORE INTO ops(id, name, layer) VALUES (128, 'ncclAllReduce', 'nccl')");
  auto st = c.prepare("SELECT name FROM ops WHERE id = 128");
  st.step();
  return st.col_text(0);
}

}  // namespace causeway::testing

namespace causeway::testing {

// CPU contention the explain engine must find: pid 300 "trainer" makes 100
// cudaStreamSynchronize calls of 50 us, 10 ms apart; every tenth (i % 10 == 5)
// takes 5 ms, 4 ms of it runnable but preempted by stress-ng (pid 999).
inline model::Batch contention_batch() {
  model::Batch b;
  b.of<model::ProcessInfo>().push_back({.pid = 300, .comm = "trainer", .cmdline = "python trainer.py"});
  b.of<model::ProcessInfo>().push_back({.pid = 999, .comm = "stress-ng", .cmdline = "stress-ng --cpu 8"});
  for (int i = 0; i < 100; i++) {
    const bool slow = i % 10 == 5;
    const int64_t ts = kBase + 1'000'000 + int64_t(i) * 10'000'000;
    b.of<model::CudaCall>().push_back({.ts_ns = ts, .dur_ns = slow ? 5'000'000 : 50'000, .pid = 300,
                            .tid = 300, .op_id = 16});
    if (slow)
      b.of<model::OffCpuInterval>().push_back({.ts_ns = ts + 200'000, .dur_ns = 4'000'000, .pid = 300, .tid = 300,
                          .cpu = 2, .state = 0, .by_pid = 999, .by_comm = "stress-ng"});
  }
  return b;
}

}  // namespace causeway::testing
