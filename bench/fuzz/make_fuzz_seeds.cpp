// SPDX-License-Identifier: Apache-2.0
// Seeds for the fuzzers: well-formed ring records of every type and op (the
// event decoder's input format: [u16 length][record]...), and a small real
// trace file written through the same TraceWriter `trace` uses.
// usage: make_fuzz_seeds OUT_DIR
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "causeway/common/op_table.h"
#include "causeway/events.h"
#include "causeway/store/sqlite.h"
#include "causeway/store/trace_writer.h"

namespace {

void append(std::vector<uint8_t>& out, const void* rec, size_t size) {
  out.push_back(uint8_t(size & 0xff));
  out.push_back(uint8_t(size >> 8));
  auto* p = static_cast<const uint8_t*>(rec);
  out.insert(out.end(), p, p + size);
}

void save(const std::filesystem::path& file, const std::vector<uint8_t>& bytes) {
  FILE* f = std::fopen(file.c_str(), "wb");
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}

template <typename T>
T with_header(uint32_t type) {
  T e;
  std::memset(&e, 0, sizeof e);
  e.hdr.type = type;
  e.hdr.ts_ns = 1'000'000'000;
  e.hdr.pid = 4242;
  e.hdr.tid = 4243;
  return e;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  namespace fs = std::filesystem;
  const fs::path out = argv[1];
  fs::create_directories(out / "events");
  fs::create_directories(out / "db");
  fs::create_directories(out / "sql");
  const char* sql[] = {
      "SELECT op, count(*), avg(dur_ns) FROM cuda_calls GROUP BY op ORDER BY 2 DESC",
      "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT n FROM r",
      "SELECT * FROM op_stats JOIN sessions ON sessions.id = op_stats.session_id",
      "PRAGMA table_info(cuda_call_events)",
      "SELECT k.name, c.grid_x FROM cuda_calls c LEFT JOIN kernels k ON k.name = c.kernel LIMIT 5",
      "DELETE FROM cuda_call_events; SELECT 1",
      "ATTACH 'x.db' AS x",
      "SELECT load_extension('x')",
      "CREATE TEMP TABLE t(a)",
      "VALUES (1, 'a', x'00ff', NULL, 2.5)",
  };
  for (size_t i = 0; i < std::size(sql); i++) {
    const std::string text = sql[i];
    save(out / "sql" / ("q" + std::to_string(i)), std::vector<uint8_t>(text.begin(), text.end()));
  }
  // One seed per op: a call with plausible arguments (a size, a stream, a
  // dim3 in the stack words), then one per host record type.
  for (const auto& op : causeway::all_ops()) {
    auto e = with_header<cw_call_event>(CW_EV_CALL);
    e.op = op.id;
    e.dur_ns = 12345;
    e.args[0] = 0x7f0000001000;
    e.args[1] = 1 << 20;
    e.args[2] = 0x0000000100000004;  // packed dim3 {4, 1}
    e.args[3] = 1;
    e.args[4] = 0x5678;
    for (auto& w : e.stack) w = 0x100;
    std::memcpy(e.deref, "vector_add_kernel", 18);
    std::vector<uint8_t> bytes;
    append(bytes, &e, sizeof e);
    save(out / "events" / ("call_" + std::string(op.name)), bytes);
  }
  std::vector<uint8_t> host;
  auto off = with_header<cw_offcpu_event>(CW_EV_OFFCPU);
  off.dur_ns = 5000;
  std::strcpy(off.by_comm, "hog");
  append(host, &off, sizeof off);
  auto io = with_header<cw_block_io_event>(CW_EV_BLOCK_IO);
  io.bytes = 4096;
  append(host, &io, sizeof io);
  auto tcp = with_header<cw_tcp_retrans_event>(CW_EV_TCP_RETRANS);
  tcp.family = 2;
  append(host, &tcp, sizeof tcp);
  for (uint32_t t : {CW_EV_PROC_EXEC, CW_EV_PROC_FORK, CW_EV_PROC_EXIT}) {
    auto p = with_header<cw_proc_event>(t);
    std::strcpy(p.comm, "python3");
    std::strcpy(p.filename, "/usr/bin/python3");
    append(host, &p, sizeof p);
  }
  auto rec = with_header<cw_reclaim_event>(CW_EV_RECLAIM);
  append(host, &rec, sizeof rec);
  auto py = with_header<cw_pystack_event>(CW_EV_PYSTACK);
  py.nframes = 2;
  py.py_version = 3 << 8 | 12;
  append(host, &py, sizeof py);
  save(out / "events" / "host_all", host);

  // A small trace: one session, calls with kernels, off-CPU, drops, op counts.
  const fs::path db = out / "db" / "trace.db";
  fs::remove(db);
  {
    causeway::store::TraceWriter w(db.string());
    causeway::store::SessionInfo s;
    s.host = "fuzz";
    s.start_ts_ns = 1'000'000'000;
    w.begin_session(s);
    causeway::store::Batch b;
    for (int i = 0; i < 50; i++) {
      causeway::store::CudaCall c;
      c.ts_ns = 1'000'000'000 + i * 1000;
      c.dur_ns = 100 + i;
      c.pid = 4242;
      c.tid = 4243;
      c.op_id = causeway::find_op("cudaMalloc")->id;
      c.bytes = 4096;
      c.kernel = i % 2 ? "vector_add" : "";
      b.cuda_calls.push_back(c);
    }
    causeway::store::OffCpuInterval o;
    o.ts_ns = 1'000'000'500;
    o.dur_ns = 300;
    o.by_comm = "hog";
    b.offcpu.push_back(o);
    b.drops.push_back({1'000'001'000, "libcall", 3});
    w.write(b);
    w.write_op_counts({{causeway::find_op("cudaMalloc")->id, 53, 0, 5000, 0, 3}});
    w.end_session(1'000'002'000);
  }
  {
    // Small pages and no WAL: a ~20 KB seed mutates and opens many times faster.
    causeway::store::Connection c(db.string(), causeway::store::Connection::Mode::ReadWriteCreate);
    c.exec("PRAGMA journal_mode=DELETE");
    c.exec("PRAGMA page_size=512");
    c.exec("VACUUM");
  }
  fs::remove(db.string() + "-wal");
  fs::remove(db.string() + "-shm");
  std::printf("seeds in %s\n", out.c_str());
  return 0;
}
