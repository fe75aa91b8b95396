// SPDX-License-Identifier: Apache-2.0
// The user-space half of the Python walker: line tables of each format, code
// objects read from (fake) process memory, _Py_DebugOffsets parsing, and
// fuzzing with random and mutated memory: garbage must never crash, hang or
// produce a frame from an object that does not validate.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <sstream>

#include "causeway/model/records.h"
#include "causeway//consume/python/call_stack_resolver.h"
#include "causeway/consume/python/code_decoder.h"
#include "causeway/discover/elf_symbols.h"
#include "causeway/discover/python_runtime.h"
#include "python_debug_offsets.h"

using namespace causeway;
using consume::python::CodeDecoder;
using consume::python::line_from_locations;
using consume::python::line_from_table_310;
using causeway::testing::debug_blob;
using causeway::testing::kDebug313;
using causeway::testing::kDebug314;

namespace {

std::vector<uint8_t> unhex(const std::string& h) {
  std::vector<uint8_t> v;
  for (size_t i = 0; i + 1 < h.size(); i += 2) v.push_back(uint8_t(std::stoi(h.substr(i, 2), nullptr, 16)));
  return v;
}

std::vector<int> ints(const std::string& csv) {
  std::vector<int> v;
  std::stringstream ss(csv);
  std::string x;
  while (std::getline(ss, x, ',')) v.push_back(std::stoi(x));
  return v;
}

// Line tables of one function (a loop, a 70-line gap, a two-line expression),
// with the line of every code unit as each CPython reports it (co_lines /
// co_positions), captured from the real interpreters.
struct LineVector {
  const char* version;
  bool format_310;
  const char* table;
  const char* lines;
};
const LineVector kVectors[] = {
    {"3.10", true, "04010c010a010247020104ff0402", "2,2,3,3,3,3,3,3,4,4,4,4,4,75,76,75,75,77,77"},
    {"3.11", false,
     "8000d808098041dd0d12903189588c58f00001050ff00001050f8801d808098851890688018801f04e02000a0bd8090af103010a0b8041e00b0c8048",
     "1,2,2,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,4,4,4,4,4,4,75,76,75,75,75,77,77"},
    {"3.13", false,
     "8000d808098041dc0d1290318e588801d8080989068a01f103000e16f05002000a0bd8090af103010a0b8041e00b0c8048",
     "1,2,2,3,3,3,3,3,3,3,3,3,3,3,3,3,3,4,4,4,4,4,4,3,3,75,76,75,75,75,77,77"},
    {"3.14", false,
     "8000d808098041dc0d1290318e588801d808098d068a01f103000e16f05002000a0bd8090af503010a0b8041e00b0c8048",
     "1,2,2,3,3,3,3,3,3,3,3,3,3,3,3,3,3,4,4,4,4,4,4,4,4,4,4,3,3,75,76,75,75,75,75,75,75,75,77,77"},
};

TEST(PythonLineTable, MatchesCPythonForEveryInstruction) {
  for (const auto& v : kVectors) {
    SCOPED_TRACE(v.version);
    auto table = unhex(v.table);
    auto want = ints(v.lines);
    for (size_t unit = 0; unit < want.size(); unit++) {
      auto got = v.format_310 ? line_from_table_310(table, 1, unit * 2) : line_from_locations(table, 1, unit * 2);
      ASSERT_TRUE(got.has_value()) << "unit " << unit;
      EXPECT_EQ(*got, want[unit]) << "unit " << unit;
    }
    // past the end of the table: no line, not a guess
    auto past = v.format_310 ? line_from_table_310(table, 1, want.size() * 2)
                             : line_from_locations(table, 1, want.size() * 2);
    EXPECT_FALSE(past.has_value());
  }
}

TEST(PythonLineTable, RandomTablesNeverCrashAndGiveOnlyPositiveLines) {
  std::mt19937_64 rng(42);
  for (int i = 0; i < 200000; i++) {
    std::vector<uint8_t> t(rng() % 64);
    for (auto& b : t) b = uint8_t(rng());
    uint32_t lasti = uint32_t(rng() % 512);
    int first = int(rng() % 1000);
    for (auto got : {line_from_table_310(t, first, lasti), line_from_locations(t, first, lasti)})
      if (got) {
        EXPECT_GT(*got, 0);
      }
  }
}

// Process memory made of a few regions; reads must fall inside one.
class FakeMemory : public consume::python::ProcessMemory {
 public:
  std::map<uint64_t, std::vector<uint8_t>> regions;
  bool read(uint64_t addr, void* buf, size_t n) override {
    auto it = regions.upper_bound(addr);
    if (it == regions.begin()) return false;
    --it;
    uint64_t off = addr - it->first;
    if (off > it->second.size() || it->second.size() - off < n) return false;
    std::memcpy(buf, it->second.data() + off, n);
    return true;
  }
  template <typename T>
  void put(uint64_t addr, T v) {
    auto it = std::prev(regions.upper_bound(addr));
    std::memcpy(it->second.data() + (addr - it->first), &v, sizeof(v));
  }
};

constexpr uint64_t kCodeType = 0x7000'1000, kStrType = 0x7000'2000, kBytesType = 0x7000'3000;
constexpr uint64_t kCode = 0x10000, kName = 0x20000, kFile = 0x21000, kTable = 0x22000;

discover::PythonRuntime runtime_311() {
  discover::PythonRuntime rt;
  std::string why;
  EXPECT_TRUE(discover::python_layout_for(3, 11, nullptr, 0, rt, &why)) << why;
  rt.code_type = kCodeType;
  rt.unicode_type = kStrType;
  rt.bytes_type = kBytesType;
  return rt;
}

void put_ascii(FakeMemory& m, uint64_t at, const std::string& s, const discover::PyObjectLayout& o) {
  m.regions[at] = std::vector<uint8_t>(o.ascii_size + s.size() + 1);
  m.put<uint64_t>(at + 8, kStrType);
  m.put<int64_t>(at + o.unicode_length, int64_t(s.size()));
  m.put<uint32_t>(at + o.unicode_state, (1u << 2) | (1u << 5) | (1u << 6));  // kind 1, compact, ascii
  std::memcpy(m.regions[at].data() + o.ascii_size, s.data(), s.size());
}

// A 3.11 code object "Model.forward" in "/src/modèl.py" (latin-1, not ASCII)
// with the 3.11 vector's line table.
FakeMemory valid_memory(const discover::PythonRuntime& rt) {
  const auto& o = rt.objects;
  FakeMemory m;
  auto table = unhex(kVectors[1].table);
  m.regions[kCode] = std::vector<uint8_t>(o.co_adaptive + 66);
  m.put<uint64_t>(kCode + 8, kCodeType);
  m.put<int64_t>(kCode + o.var_size, 33);  // code units
  m.put<int32_t>(kCode + o.co_firstlineno, 1);
  m.put<uint64_t>(kCode + o.co_qualname, kName);
  m.put<uint64_t>(kCode + o.co_name, kName + 0x800);
  m.put<uint64_t>(kCode + o.co_filename, kFile);
  m.put<uint64_t>(kCode + o.co_linetable, kTable);
  put_ascii(m, kName, "Model.forward", o);
  std::string file = "/src/mod\xe8l.py";  // latin-1 è
  m.regions[kFile] = std::vector<uint8_t>(o.compact_size + file.size() + 1);
  m.put<uint64_t>(kFile + 8, kStrType);
  m.put<int64_t>(kFile + o.unicode_length, int64_t(file.size()));
  m.put<uint32_t>(kFile + o.unicode_state, (1u << 2) | (1u << 5));  // kind 1, compact
  std::memcpy(m.regions[kFile].data() + o.compact_size, file.data(), file.size());
  m.regions[kTable] = std::vector<uint8_t>(o.bytes_sval + table.size() + 1);
  m.put<uint64_t>(kTable + 8, kBytesType);
  m.put<int64_t>(kTable + o.var_size, int64_t(table.size()));
  std::memcpy(m.regions[kTable].data() + o.bytes_sval, table.data(), table.size());
  return m;
}

TEST(PythonCodeDecoder, DecodesAValidCodeObject) {
  auto rt = runtime_311();
  FakeMemory m = valid_memory(rt);
  CodeDecoder d(rt, m);
  const auto* c = d.code(kCode, 1);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->name, "Model.forward");
  EXPECT_EQ(c->filename, "/src/mod\xc3\xa8l.py");  // as UTF-8
  EXPECT_EQ(c->code_bytes, 66u);
  EXPECT_EQ(d.line(*c, 52), 75);  // unit 26
  EXPECT_FALSE(d.line(*c, 66).has_value());          // past the bytecode
  EXPECT_FALSE(d.line(*c, 0xffffffffu).has_value());  // 3.10's "no instruction yet"
}

TEST(PythonCodeDecoder, ObjectsOfTheWrongTypeAreDropped) {
  auto rt = runtime_311();
  for (uint64_t field : {uint64_t(kCode), kName, kFile, kTable}) {
    FakeMemory m = valid_memory(rt);
    m.put<uint64_t>(field + 8, 0x7000'9000);  // some other type
    CodeDecoder d(rt, m);
    EXPECT_EQ(d.code(kCode, 1), nullptr) << std::hex << field;
  }
  FakeMemory m = valid_memory(rt);
  CodeDecoder d(rt, m);
  EXPECT_EQ(d.code(kCode + 8, 1), nullptr);  // misaligned / not an object
  EXPECT_EQ(d.code(0, 1), nullptr);
  EXPECT_EQ(d.code(0x999999, 1), nullptr);   // unmapped
}

TEST(PythonCodeDecoder, RandomMemoryYieldsNoFrames) {
  auto rt = runtime_311();
  std::mt19937_64 rng(7);
  FakeMemory m;
  for (uint64_t base = 0x10000; base < 0x10000 + 64 * 0x1000; base += 0x1000) {
    std::vector<uint8_t> r(0x1000);
    for (auto& b : r) b = uint8_t(rng());
    m.regions[base] = r;
  }
  CodeDecoder d(rt, m);
  for (int i = 0; i < 20000; i++) {
    uint64_t addr = 0x10000 + (rng() % (64 * 0x1000));
    EXPECT_EQ(d.code(addr & ~7ULL, 1), nullptr);
  }
}

TEST(PythonCodeDecoder, MutatedObjectsNeverCrashAndNeverPassWithABrokenType) {
  auto rt = runtime_311();
  const FakeMemory good = valid_memory(rt);
  std::mt19937_64 rng(1234);
  int decoded = 0, dropped = 0;
  for (int iter = 0; iter < 20000; iter++) {
    FakeMemory m = good;
    bool type_broken = false;
    int flips = 1 + int(rng() % 8);
    for (int k = 0; k < flips; k++) {
      auto it = std::next(m.regions.begin(), long(rng() % m.regions.size()));
      size_t at = rng() % it->second.size();
      uint8_t old = it->second[at];
      it->second[at] = uint8_t(rng());
      if (at >= 8 && at < 16 && it->second[at] != old) type_broken = true;
    }
    CodeDecoder d(rt, m);
    const auto* c = d.code(kCode, 1);
    if (!c) {
      dropped++;
      continue;
    }
    decoded++;
    EXPECT_FALSE(type_broken) << "an object with a corrupted type validated";
    EXPECT_LE(c->name.size(), CodeDecoder::kMaxString * 4);
    EXPECT_LE(c->filename.size(), CodeDecoder::kMaxString * 4);
    for (uint32_t lasti = 0; lasti < 80; lasti += 2)
      if (auto line = d.line(*c, lasti)) {
        EXPECT_GT(*line, 0);
      }
  }
  // both outcomes happen: the fuzzer reaches the checks and the happy path
  EXPECT_GT(decoded, 100);
  EXPECT_GT(dropped, 100);
}

TEST(PythonRuntimeLayout, ReadsDebugOffsets) {
  discover::PythonRuntime rt;
  std::string why;
  auto b13 = debug_blob(kDebug313);
  ASSERT_TRUE(discover::python_layout_for(3, 13, b13.data(), b13.size(), rt, &why)) << why;
  EXPECT_EQ(rt.bpf.rt_interp_head, 0x278);
  EXPECT_EQ(rt.bpf.is_threads_head, 0x1cb0);
  EXPECT_EQ(rt.bpf.ts_thread_id, 0xa0);
  EXPECT_EQ(rt.bpf.ts_frame, 0x48);
  EXPECT_EQ(rt.bpf.cframe_frame, CW_PY_NO_FIELD);
  EXPECT_EQ(rt.bpf.fr_previous, 8);
  EXPECT_EQ(rt.bpf.fr_code, 0);
  EXPECT_EQ(rt.bpf.fr_instr, 0x38);
  EXPECT_EQ(rt.bpf.fr_owner, 0x46);
  EXPECT_EQ(rt.bpf.co_adaptive, 0xc8);
  EXPECT_EQ(rt.objects.co_filename, 0x70);
  EXPECT_EQ(rt.objects.co_qualname, 0x80);
  EXPECT_EQ(rt.objects.co_firstlineno, 0x44);
  EXPECT_EQ(rt.bpf.version, 0x30du);

  auto b14 = debug_blob(kDebug314);
  ASSERT_TRUE(discover::python_layout_for(3, 14, b14.data(), b14.size(), rt, &why)) << why;
  EXPECT_EQ(rt.bpf.rt_interp_head, 0x328);
  EXPECT_EQ(rt.bpf.ts_next, 8);
  EXPECT_EQ(rt.bpf.fr_owner, 0x4a);
  EXPECT_EQ(rt.bpf.co_adaptive, 0xd0);
  EXPECT_TRUE(rt.bpf.flags & CW_PY_TAGGED_CODE);

  // a wrong cookie, a version that does not match, a truncated or absurd struct
  auto bad = b13;
  bad[0] = 'X';
  EXPECT_FALSE(discover::python_layout_for(3, 13, bad.data(), bad.size(), rt, &why));
  EXPECT_FALSE(discover::python_layout_for(3, 14, b13.data(), b13.size(), rt, &why));
  EXPECT_FALSE(discover::python_layout_for(3, 13, b13.data(), 64, rt, &why));
  bad = b13;
  uint64_t huge = 1ULL << 40;
  std::memcpy(bad.data() + 8 + 8 * 22, &huge, 8);  // thread_state.current_frame
  EXPECT_FALSE(discover::python_layout_for(3, 13, bad.data(), bad.size(), rt, &why));
  EXPECT_FALSE(discover::python_layout_for(3, 15, b14.data(), b14.size(), rt, &why));
  EXPECT_NE(why.find("unsupported Python version 3.15"), std::string::npos) << why;
}

TEST(PythonRuntimeLayout, TablesForThreeTenToThreeTwelve) {
  discover::PythonRuntime rt;
  std::string why;
  ASSERT_TRUE(discover::python_layout_for(3, 10, nullptr, 0, rt, &why));
  EXPECT_TRUE(rt.bpf.flags & CW_PY_MATCH_PTHREAD);
  EXPECT_TRUE(rt.objects.linetable_310);
  ASSERT_TRUE(discover::python_layout_for(3, 12, nullptr, 0, rt, &why));
  EXPECT_EQ(rt.bpf.owner_shim, 3);
  EXPECT_EQ(rt.bpf.cframe_frame, 0);
  EXPECT_FALSE(discover::python_layout_for(3, 9, nullptr, 0, rt, &why));
}

model::StackFrame nat(const std::string& f) { return {"native", f, "", std::nullopt, "lib"}; }
model::StackFrame py(const std::string& f, int line) { return {"python", f, "a.py", line, ""}; }

TEST(PythonInterleave, EvalFramesAreReplacedByTheirPythonGroups) {
  model::Stack native = {nat("cudaMalloc"), nat("ffi_call"), nat("_PyEval_EvalFrameDefault"),
                         nat("PyObject_Call"), nat("_PyEval_EvalFrameDefault"), nat("main")};
  std::vector<consume::python::PyGroup> groups = {{py("alloc", 3), py("step", 9)}, {py("<module>", 20)}};
  auto s = consume::python::interleave(native, groups);
  std::vector<std::string> got;
  for (const auto& f : s) got.push_back(f.func);
  EXPECT_EQ(got, (std::vector<std::string>{"cudaMalloc", "ffi_call", "alloc", "step", "PyObject_Call",
                                           "<module>", "main"}));
  // a native walk that stopped early: the Python frames follow it
  auto t = consume::python::interleave({nat("cudaMalloc")}, groups);
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[1].func, "alloc");
  EXPECT_EQ(t[3].func, "<module>");
}

// A resolver over valid_memory: one Python process, pid 77. resent collects
// what the resolver asks the kernel to send again.
using Resent = std::vector<std::pair<bool, cw_seen_key>>;
consume::python::CallStackResolver resolver_over(const discover::PythonRuntime& rt, const FakeMemory* m,
                                                 Resent* resent = nullptr) {
  consume::StackOptions opts;
  opts.native = false;
  if (resent) opts.resend = [resent](bool code, const cw_seen_key& k) { resent->emplace_back(code, k); };
  return consume::python::CallStackResolver(opts, "/nonexistent", [rt, m](uint32_t) {
    consume::python::PythonProcessAccess a;
    a.rt = rt;
    if (m) a.mem = std::make_unique<FakeMemory>(*m);  // else: the process is gone
    return a;
  });
}

constexpr uint64_t kHash = 0xabcdef12345;

cw_pystack_event pystack(uint64_t hash = kHash) {
  cw_pystack_event e{};
  e.hdr.type = CW_EV_PYSTACK;
  e.hdr.pid = 77;
  e.hdr.tid = 5;
  e.hdr.ts_ns = 100;
  e.nframes = 1;
  e.py_version = 3 << 8 | 11;
  e.code[0] = kCode;
  e.firstlineno[0] = 1;  // the code object's co_firstlineno, as the kernel reads it beside its address
  e.lasti[0] = 52;  // line 75
  e.hash = hash;
  return e;
}

cw_call_event call_with_stack(uint64_t hash, uint64_t ts) {
  cw_call_event c{};
  c.hdr.type = CW_EV_CALL;
  c.hdr.pid = 77;
  c.hdr.tid = 5;
  c.hdr.ts_ns = ts;
  c.flags = CW_CALL_HAS_PYSTACK;
  c.stack_hash = hash;
  return c;
}

// What bpf/pystack.bpf.h copies of valid_memory's code object.
cw_pycode_event pycode_from(const FakeMemory& m, const discover::PythonRuntime& rt) {
  const auto& o = rt.objects;
  FakeMemory mm = m;
  cw_pycode_event c{};
  c.hdr.type = CW_EV_PYCODE;
  c.hdr.pid = 77;
  c.code = kCode;
  mm.read(kCode + 8, &c.code_type, 8);
  mm.read(kCode + o.var_size, &c.code_units, 8);
  mm.read(kCode + o.co_firstlineno, &c.firstlineno, 4);
  auto str = [&](uint64_t obj, cw_pyobj_str& s, uint8_t* data, size_t cap) {
    mm.read(obj + 8, &s.type, 8);
    mm.read(obj + o.unicode_length, &s.length, 8);
    mm.read(obj + o.unicode_state, &s.state, 4);
    size_t n = std::min<size_t>(size_t(s.length) * ((s.state >> 2) & 7), cap);
    mm.read(obj + ((s.state >> 6) & 1 ? o.ascii_size : o.compact_size), data, n);
    s.copied = uint32_t(n);
  };
  str(kName, c.name, c.name_data, sizeof c.name_data);
  str(kFile, c.file, c.file_data, sizeof c.file_data);
  mm.read(kTable + 8, &c.table_type, 8);
  mm.read(kTable + o.var_size, &c.table_len, 8);
  c.table_copied = uint32_t(std::min<int64_t>(c.table_len, sizeof c.table_data));
  mm.read(kTable + o.bytes_sval, c.table_data, c.table_copied);
  return c;
}

// A code object freed (an exec'd one at import time, say) and another made at
// its address are two code objects: the kernel sends each with its first
// line, and the stack names each frame by address and first line.
TEST(PythonCodeDecoder, AnAddressReusedByAnotherCodeObjectIsAnotherCode) {
  auto rt = runtime_311();
  FakeMemory m = valid_memory(rt);
  CodeDecoder d(rt, m);
  cw_pycode_event old = pycode_from(m, rt);
  old.firstlineno = 7;
  const char name[] = "<module>";
  std::memcpy(old.name_data, name, sizeof name - 1);
  old.name.length = old.name.copied = sizeof name - 1;
  ASSERT_TRUE(d.learn(old));
  ASSERT_NE(d.code(kCode, 7), nullptr);
  EXPECT_EQ(d.code(kCode, 7)->name, "<module>");
  // The code object at that address now (first line 1) is read as itself.
  ASSERT_NE(d.code(kCode, 1), nullptr);
  EXPECT_EQ(d.code(kCode, 1)->name, "Model.forward");
  // One whose first line the process no longer shows is not made up.
  EXPECT_EQ(d.code(kCode, 9), nullptr);
}

TEST(PythonCallStack, ResolvesEachStackOnceAndEveryCallByItsHash) {
  auto rt = runtime_311();
  auto mem = valid_memory(rt);
  Resent resent;
  auto r = resolver_over(rt, &mem, &resent);
  model::Batch b;
  r.on_pystack(pystack(), b);
  ASSERT_EQ(model::stacks_in(b).size(), 1u);
  ASSERT_EQ(model::stacks_in(b)[0].second.size(), 1u);
  EXPECT_EQ(model::stacks_in(b)[0].second[0].func, "Model.forward");
  EXPECT_EQ(model::stacks_in(b)[0].second[0].line, 75);
  for (uint64_t ts : {100, 200, 300}) EXPECT_EQ(r.stack_for_call(call_with_stack(kHash, ts), b), model::stacks_in(b)[0].first);
  // The same frames under another hash (another thread's walk) are one stored stack.
  r.on_pystack(pystack(kHash + 1), b);
  EXPECT_EQ(model::stacks_in(b).size(), 1u);
  EXPECT_EQ(r.stack_for_call(call_with_stack(kHash + 1, 400), b), model::stacks_in(b)[0].first);
  EXPECT_TRUE(resent.empty());
  // A hash never received: no stack, and the kernel is asked for it again.
  EXPECT_FALSE(r.stack_for_call(call_with_stack(kHash + 2, 500), b).has_value());
  ASSERT_EQ(resent.size(), 1u);
  EXPECT_FALSE(resent[0].first);
  EXPECT_EQ(resent[0].second.pid, 77u);
  EXPECT_EQ(resent[0].second.id, kHash + 2);
  EXPECT_EQ(r.counters().unresolved, 1);
  EXPECT_EQ(r.counters().stacks, 2);
  // A call without a stack flag has none.
  cw_call_event plain = call_with_stack(kHash, 600);
  plain.flags = 0;
  EXPECT_FALSE(r.stack_for_call(plain, b).has_value());
}

// A process that exited before its records were read: its code objects come
// from the kernel's copies, validated against the runtime's types.
TEST(PythonCallStack, NamesFramesOfAProcessThatIsGoneFromTheKernelsCopy) {
  auto rt = runtime_311();
  const FakeMemory mem = valid_memory(rt);
  Resent resent;
  auto r = resolver_over(rt, nullptr, &resent);
  r.on_pycode(pycode_from(mem, rt));
  model::Batch b;
  r.on_pystack(pystack(), b);
  ASSERT_EQ(model::stacks_in(b).size(), 1u);
  ASSERT_EQ(model::stacks_in(b)[0].second.size(), 1u);
  EXPECT_EQ(model::stacks_in(b)[0].second[0].func, "Model.forward");
  EXPECT_EQ(model::stacks_in(b)[0].second[0].file, "/src/mod\xc3\xa8l.py");
  EXPECT_EQ(model::stacks_in(b)[0].second[0].line, 75);
  EXPECT_TRUE(resent.empty());
  EXPECT_EQ(r.counters().codes, 1);
  EXPECT_EQ(r.counters().codes_invalid, 0);
}

TEST(PythonCallStack, ACopyOfTheWrongTypeIsDroppedAndAskedForAgain) {
  auto rt = runtime_311();
  const FakeMemory mem = valid_memory(rt);
  Resent resent;
  auto r = resolver_over(rt, nullptr, &resent);
  for (int which = 0; which < 4; which++) {
    auto c = pycode_from(mem, rt);
    (which == 0 ? c.code_type : which == 1 ? c.name.type : which == 2 ? c.file.type : c.table_type) = kBytesType + 8;
    r.on_pycode(c);
  }
  EXPECT_EQ(r.counters().codes_invalid, 4);
  model::Batch b;
  r.on_pystack(pystack(), b);
  EXPECT_TRUE(model::stacks_in(b).empty()) << "no frame could be named";
  // the code object and the stack are asked for again
  ASSERT_EQ(resent.size(), 2u);
  EXPECT_TRUE(resent[0].first);
  EXPECT_EQ(resent[0].second.id, cw_code_key(kCode, 1));  // the kernel's code_seen key
  EXPECT_FALSE(resent[1].first);
  EXPECT_EQ(resent[1].second.id, kHash);
}

// A file name longer than the kernel copies: the process, while it lives,
// gives the rest; once it is gone, the name is marked cut.
TEST(PythonCallStack, ACutCopyIsCompletedFromTheLiveProcessElseMarked) {
  auto rt = runtime_311();
  const FakeMemory mem = valid_memory(rt);
  auto cut = pycode_from(mem, rt);
  cut.file.copied = 6;  // "/src/m"
  {
    auto r = resolver_over(rt, nullptr);
    r.on_pycode(cut);
    model::Batch b;
    r.on_pystack(pystack(), b);
    ASSERT_EQ(model::stacks_in(b).size(), 1u);
    EXPECT_EQ(model::stacks_in(b)[0].second[0].file, "/src/m\xe2\x80\xa6");  // "…"
    EXPECT_EQ(model::stacks_in(b)[0].second[0].line, 75);
  }
  {
    auto r = resolver_over(rt, &mem);
    r.on_pycode(cut);
    model::Batch b;
    r.on_pystack(pystack(), b);
    ASSERT_EQ(model::stacks_in(b).size(), 1u);
    EXPECT_EQ(model::stacks_in(b)[0].second[0].file, "/src/mod\xc3\xa8l.py");
  }
}

TEST(ElfSymbols, MutatedFilesNeverCrash) {
  std::ifstream in("/proc/self/exe", std::ios::binary);
  std::vector<uint8_t> self((std::istreambuf_iterator<char>(in)), {});
  ASSERT_GT(self.size(), 4096u);
  auto e = discover::ElfSymbols::parse(self);
  ASSERT_NE(e, nullptr);
  auto main_addr = e->symbol_value("main");
  ASSERT_TRUE(main_addr.has_value());
  const auto* f = e->function_at(*main_addr + 1);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->name, "main");
  std::vector<uint8_t> head(self.begin(), self.begin() + 4096);
  std::mt19937_64 rng(99);
  for (int i = 0; i < 3000; i++) {
    auto m = i % 2 ? head : std::vector<uint8_t>(self.begin(), self.begin() + 512 + rng() % 8192);
    for (int k = 0; k < 4; k++) m[rng() % std::min<size_t>(m.size(), 256)] = uint8_t(rng());
    if (auto p = discover::ElfSymbols::parse(std::move(m))) {
      p->symbol_value("main");
      p->function_at(rng());
      p->read_vaddr(rng() % 0x10000, 64);
    }
  }
}

TEST(ElfSymbols, Demangles) {
  EXPECT_EQ(discover::demangle("_ZN2at6native5emptyEv"), "at::native::empty()");
  EXPECT_EQ(discover::demangle("cudaMalloc"), "cudaMalloc");
  EXPECT_EQ(discover::demangle("_Zgarbage"), "_Zgarbage");
}

}  // namespace
