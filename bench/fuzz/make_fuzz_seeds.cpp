// SPDX-License-Identifier: Apache-2.0
// Seeds for the fuzzers: well-formed ring records of every type and op (the
// event decoder's input format: [u16 length][record]...), a small real trace
// file written through the same TraceWriter `trace` uses, and for each
// supported CPython a Python stack record with the process memory its code
// objects live in (fuzz_py_frames' format, py_frames_input.h).
// usage: make_fuzz_seeds OUT_DIR
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "causeway/common/op_table.h"
#include "causeway/discover/python_runtime.h"
#include "causeway/model/records.h"
#include "causeway/store/sqlite.h"
#include "causeway/store/trace_writer.h"
#include "py_frames_input.h"
#include "python_debug_offsets.h"

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


// A fake process image for fuzz_py_frames: objects laid out as CPython 3.minor
// lays them out (offsets from python_layout_for), 16-byte aligned.
class PyImage {
 public:
  explicit PyImage(const causeway::discover::PythonRuntime& rt) : o_(rt.objects) {}
  uint64_t alloc(size_t n) {
    uint64_t at = causeway::fuzz::kImageBase + bytes_.size();
    bytes_.resize(bytes_.size() + ((n + 15) & ~size_t(15)));
    return at;
  }
  template <typename T>
  void put(uint64_t addr, T v) {
    std::memcpy(bytes_.data() + (addr - causeway::fuzz::kImageBase), &v, sizeof v);
  }
  // A compact str of the smallest kind that holds every code point.
  uint64_t str(const std::u32string& s) {
    uint32_t widest = 0;
    for (char32_t c : s) widest = std::max<uint32_t>(widest, c);
    const unsigned kind = widest < 0x100 ? 1 : widest < 0x10000 ? 2 : 4;
    const bool ascii = widest < 0x80;
    const size_t head = ascii ? o_.ascii_size : o_.compact_size;
    uint64_t at = alloc(head + (s.size() + 1) * kind);
    put<uint64_t>(at + o_.ob_type, causeway::fuzz::kStrType);
    put<int64_t>(at + o_.unicode_length, int64_t(s.size()));
    put<uint32_t>(at + o_.unicode_state, kind << 2 | 1u << 5 | uint32_t(ascii) << 6);
    for (size_t i = 0; i < s.size(); i++)
      std::memcpy(bytes_.data() + (at + head + i * kind - causeway::fuzz::kImageBase), &s[i], kind);
    return at;
  }
  uint64_t bytes(const std::vector<uint8_t>& b) {
    uint64_t at = alloc(o_.bytes_sval + b.size() + 1);
    put<uint64_t>(at + o_.ob_type, causeway::fuzz::kBytesType);
    put<int64_t>(at + o_.var_size, int64_t(b.size()));
    std::memcpy(bytes_.data() + (at + o_.bytes_sval - causeway::fuzz::kImageBase), b.data(), b.size());
    return at;
  }
  // A code object of `units` code units with this line table.
  uint64_t code(const std::u32string& name, const std::u32string& file, int firstlineno,
                const std::vector<uint8_t>& linetable, int64_t units) {
    const uint16_t none = causeway::discover::PyObjectLayout::kNone;
    size_t size = 0;
    for (uint16_t f : {o_.ob_type, o_.var_size, o_.co_filename, o_.co_name, o_.co_qualname,
                       o_.co_firstlineno, o_.co_linetable, o_.co_code})
      if (f != none) size = std::max<size_t>(size, f + 8u);
    const uint64_t name_p = str(name), file_p = str(file), table_p = bytes(linetable);
    const uint64_t bytecode_p = o_.co_code != none ? bytes(std::vector<uint8_t>(units * 2, 0x64)) : 0;
    uint64_t at = alloc(size);
    put<uint64_t>(at + o_.ob_type, causeway::fuzz::kCodeType);
    put<int64_t>(at + o_.var_size, units);
    put<int32_t>(at + o_.co_firstlineno, firstlineno);
    put<uint64_t>(at + o_.co_name, name_p);
    if (o_.co_qualname != none) put<uint64_t>(at + o_.co_qualname, name_p);
    put<uint64_t>(at + o_.co_filename, file_p);
    put<uint64_t>(at + o_.co_linetable, table_p);
    if (bytecode_p) put<uint64_t>(at + o_.co_code, bytecode_p);
    return at;
  }
  const std::vector<uint8_t>& data() const { return bytes_; }

 private:
  causeway::discover::PyObjectLayout o_;
  std::vector<uint8_t> bytes_;
};

// A stack of three frames in two eval-loop invocations over two code
// objects (ASCII and latin-1 names; UCS-2 and UCS-4 ones), the line tables
// in 3.minor's format with every kind of entry.
std::vector<uint8_t> python_frames_seed(int minor) {
  using causeway::testing::debug_blob;
  std::vector<uint8_t> debug;
  if (minor == 13) debug = debug_blob(causeway::testing::kDebug313);
  if (minor == 14) debug = debug_blob(causeway::testing::kDebug314);
  causeway::discover::PythonRuntime rt;
  std::string why;
  if (!causeway::discover::python_layout_for(3, minor, debug.data(), debug.size(), rt, &why)) {
    std::fprintf(stderr, "make_fuzz_seeds: no layout for 3.%d: %s\n", minor, why.c_str());
    std::exit(1);
  }
  std::vector<uint8_t> table;
  int64_t units = 0;
  if (rt.objects.linetable_310) {
    // (bytecode bytes, line delta) pairs; -128 = no line
    table = {6, 1, 8, 0, 4, 0x80, 10, 2, 6, 0xff};
    units = (6 + 8 + 4 + 10 + 6) / 2;
  } else {
    // 1CCCCLLL entries: no-column (13) +1; short (0); one-line (11) +1 with
    // columns; none (15); long (14) -1; no-column +70 (a two-byte varint).
    table = {0xe9, 0x02, 0x80, 0x05, 0xda, 0x04, 0x10, 0xf8, 0xf1, 0x03, 0x00, 0x05, 0x09, 0xe8, 0x4c, 0x02};
    units = 2 + 1 + 3 + 1 + 2 + 1;
  }
  PyImage img(rt);
  const uint64_t forward = img.code(U"Model.forward", U"/src/mod\u00e8l.py", 10, table, units);
  const uint64_t module = img.code(U"<\u043c\u043e\u0434\u0443\u043b\u044c>", U"/src/\U0001F680.py", 1, table, units);
  causeway::fuzz::PyFramesHeader h{};
  h.minor = uint8_t(minor - 10);
  h.debug_len = uint16_t(debug.size());
  h.tid = 4243;
  h.ts_ns = 1'000'000'000;
  h.nframes = 3;
  h.code[0] = forward;
  h.lasti[0] = 4;
  h.firstlineno[0] = 10;
  h.code[1] = forward;
  h.lasti[1] = 12;
  h.firstlineno[1] = 10;
  h.code[2] = module;
  h.lasti[2] = 0;
  h.firstlineno[2] = 1;
  h.entry_mask = 1u << 1;  // frame 1 ends the first eval-loop invocation
  std::vector<uint8_t> out(sizeof h);
  std::memcpy(out.data(), &h, sizeof h);
  out.insert(out.end(), debug.begin(), debug.end());
  out.insert(out.end(), img.data().begin(), img.data().end());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  namespace fs = std::filesystem;
  const fs::path out = argv[1];
  fs::create_directories(out / "events");
  fs::create_directories(out / "db");
  fs::create_directories(out / "sql");
  fs::create_directories(out / "py");
  fs::create_directories(out / "mcp");
  for (int minor = 10; minor <= 14; minor++)
    save(out / "py" / ("py3" + std::to_string(minor)), python_frames_seed(minor));
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
  // MCP lines: a session, a batch, the malformed messages of issue 66, and
  // the dispatcher's large and failing methods (fuzz_mcp_messages).
  const char* mcp[] = {
      R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}})" "\n"
      R"({"jsonrpc":"2.0","method":"notifications/initialized"})" "\n"
      R"({"jsonrpc":"2.0","id":"2","method":"echo","params":{"a":[1,{"b":null}],"c":"\u00e9\"["}})" "\n",
      R"([{"jsonrpc":"2.0","id":3,"method":"echo"},{"jsonrpc":"2.0","method":"x"},{"jsonrpc":"2.0","id":4,"method":"throw"}])" "\n",
      R"({"jsonrpc":2,"id":5,"method":"echo"})" "\n" R"({"jsonrpc":null,"id":6,"method":"echo"})" "\n",
      R"({"jsonrpc":"2.0","id":{"x":1},"method":"echo","params":[1]})" "\n" R"({"jsonrpc":"2.0","id":7,"method":7,"params":"p"})" "\n",
      R"({"jsonrpc":"2.0","id":8,"method":"big","params":{"a":1,"b":2,"c":3}})" "\n"
      R"({"jsonrpc":"2.0","id":9,"method":"echo","params":{"x":[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]}})" "\n",
      "[]\n{not json\n\n[1,\"x\",null]\n",
  };
  for (size_t i = 0; i < std::size(mcp); i++) {
    const std::string text = mcp[i];
    save(out / "mcp" / ("m" + std::to_string(i)), std::vector<uint8_t>(text.begin(), text.end()));
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
  // A record of every family that decodes from its record alone.
  causeway::model::for_each_table([&]<typename T>() {
    if constexpr (requires { T::kEventType; typename T::Event; }) {
      auto e = with_header<typename T::Event>(T::kEventType);
      e.hdr.ts_ns = 1000;
      append(host, &e, sizeof e);
    }
  });
  for (uint32_t t : {CW_EV_PROC_EXEC, CW_EV_PROC_FORK, CW_EV_PROC_EXIT}) {
    auto p = with_header<cw_proc_event>(t);
    std::strcpy(p.comm, "python3");
    std::strcpy(p.filename, "/usr/bin/python3");
    append(host, &p, sizeof p);
  }
  auto py = with_header<cw_pystack_event>(CW_EV_PYSTACK);
  py.nframes = 2;
  py.py_version = 3 << 8 | 12;
  append(host, &py, sizeof py);
  save(out / "events" / "host_all", host);

  // A small trace: one session, a row in every table the readers read
  // (calls with kernels, copies, NCCL ranks, off-CPU, I/O, TCP, a stack),
  // drops and op counts.
  const fs::path db = out / "db" / "trace.db";
  fs::remove(db);
  {
    causeway::store::TraceWriter w(db.string());
    causeway::model::SessionInfo s;
    s.host = "fuzz";
    s.start_ts_ns = 1'000'000'000;
    w.begin_session(s);
    causeway::model::Batch b;
    b.of<causeway::model::ProcessInfo>().push_back({.pid = 4242, .comm = "python3", .cmdline = "python3 train.py"});
    for (int i = 0; i < 12; i++) {
      causeway::model::CudaCall c;
      c.ts_ns = 1'000'000'000 + i * 1000;
      c.dur_ns = 100 + i;
      c.pid = 4242;
      c.tid = 4243;
      c.op_id = causeway::find_op(i % 3 == 0 ? "cudaMalloc" : i % 3 == 1 ? "cudaLaunchKernel" : "cudaMemcpy")->id;
      c.bytes = 4096;
      if (i % 3 == 2) c.kind = 1;  // HtoD
      if (i % 3 == 1) {
        c.kernel = "vector_add";
        c.grid = causeway::model::Dim3{4, 1, 1};
        c.block = causeway::model::Dim3{256, 1, 1};
      }
      if (i == 0) c.stack_id = 1;
      b.of<causeway::model::CudaCall>().push_back(c);
    }
    for (int rank = 0; rank < 2; rank++) {
      causeway::model::NcclCall n;
      n.ts_ns = 1'000'010'000 + rank * 300;
      n.dur_ns = 2000;
      n.pid = 4242 + rank;
      n.tid = 4243 + rank;
      n.op_id = causeway::find_op("ncclAllReduce")->id;
      n.comm_hash = "c0ffee";
      n.rank = rank;
      n.nranks = 2;
      n.seq = 0;
      n.count = 1024;
      n.datatype = "float32";
      n.redop = "sum";
      n.bytes = 4096;
      b.of<causeway::model::NcclCall>().push_back(n);
    }
    causeway::model::add_stack(b, 1, {{.kind = "python", .func = "step", .file = "train.py", .line = 12},
                                      {.kind = "native", .func = "main", .module = "python3"}});
    causeway::model::OffCpuInterval o;
    o.ts_ns = 1'000'000'500;
    o.dur_ns = 300;
    o.pid = 4242;
    o.tid = 4243;
    o.by_comm = "hog";
    b.of<causeway::model::OffCpuInterval>().push_back(o);
    b.of<causeway::model::IoRequest>().push_back({.ts_ns = 1'000'000'700, .dur_ns = 900, .pid = 4242, .dev = "259:0",
                    .bytes = 65536, .op = "read"});
    b.of<causeway::model::TcpRetransmit>().push_back({.ts_ns = 1'000'000'800, .pid = 4242, .saddr = "10.0.0.1", .daddr = "10.0.0.2",
                     .sport = 40000, .dport = 29500, .state = "ESTABLISHED"});
    b.of<causeway::model::Drop>().push_back({1'000'001'000, "libcall", 3});
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
