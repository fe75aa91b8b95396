// SPDX-License-Identifier: Apache-2.0
#include "causeway/discover/python_runtime.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <regex>
#include <set>

#include "causeway/discover/elf_symbols.h"
#include "causeway/discover/proc_maps.h"

namespace causeway::discover {

namespace {

constexpr uint16_t kNo = CW_PY_NO_FIELD;

std::string basename_of(const std::string& p) {
  auto s = p.rfind('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

bool looks_like_python(const std::string& path) {
  std::string b = basename_of(path);
  return b.rfind("libpython3", 0) == 0 || b.rfind("python", 0) == 0;
}

// 3.X from a file name: libpython3.12.so.1.0, python3.10, python3.11d.
std::optional<int> minor_from_name(const std::string& path) {
  static const std::regex re(R"((?:lib)?python3\.(\d+))");
  std::smatch m;
  std::string b = basename_of(path);
  if (std::regex_search(b, m, re)) return std::stoi(m[1]);
  return std::nullopt;
}

// A path that opens the file of this mapping from here: map_files is right
// for chroots, containers and deleted files; the plain paths are fallbacks.
std::string openable_path(uint32_t pid, const MappedRegion& m, const std::string& proc_root) {
  char range[64];
  std::snprintf(range, sizeof(range), "%" PRIx64 "-%" PRIx64, m.start, m.end);
  std::string pid_dir = proc_root + "/" + std::to_string(pid);
  struct stat st {};
  for (const std::string& p :
       {pid_dir + "/map_files/" + range, m.path, pid_dir + "/root" + m.path}) {
    if (stat(p.c_str(), &st) == 0 && st.st_ino == m.inode) return p;
  }
  return {};
}

// Table layouts for versions without _Py_DebugOffsets (from CPython's headers;
// 3.11 checked against the Debian build's debug info, see docs/python.md).
bool table_layout(int minor, PythonRuntime& rt) {
  cw_py_proc& b = rt.bpf;
  PyObjectLayout& o = rt.objects;
  b.ts_next = 8;
  b.fr_is_entry = kNo;
  switch (minor) {
    case 10:
      b.rt_interp_head = 32;        // _PyRuntimeState.interpreters.head
      b.is_threads_head = 8;        // PyInterpreterState.tstate_head
      b.ts_thread_id = 176;         // thread_id (pthread_self): no native_thread_id before 3.11
      b.ts_frame = 24;              // PyThreadState.frame
      b.cframe_frame = kNo;
      b.fr_previous = 24;           // PyFrameObject.f_back
      b.fr_code = 32;               // f_code
      b.fr_instr = 96;              // f_lasti (instruction index)
      b.fr_owner = kNo;
      b.co_adaptive = 0;
      b.owner_shim = 255;
      b.flags = CW_PY_LASTI_INDEX | CW_PY_MATCH_PTHREAD;
      o.co_filename = 104; o.co_name = 112; o.co_qualname = PyObjectLayout::kNone;
      o.co_firstlineno = 40; o.co_linetable = 120; o.co_code = 48;
      o.ascii_size = 48; o.compact_size = 72; o.linetable_310 = true;
      b.gil_off = 352; b.gil_size = 208; b.gil_flags = 0;  // _PyRuntime.ceval.gil
      return true;
    case 11:
      b.rt_interp_head = 40; b.is_threads_head = 16; b.ts_thread_id = 160;  // native_thread_id
      b.ts_frame = 56;              // cframe
      b.cframe_frame = 8;           // _PyCFrame.current_frame
      b.fr_previous = 48; b.fr_code = 32; b.fr_instr = 56;  // prev_instr
      b.fr_owner = kNo;             // no shim frames in 3.11: is_entry marks eval calls
      b.fr_is_entry = 68;
      b.co_adaptive = 184; b.owner_shim = 255; b.flags = 0;
      o.co_filename = 112; o.co_name = 120; o.co_qualname = 128; o.co_firstlineno = 72;
      o.co_linetable = 136; o.co_adaptive = 184;
      o.ascii_size = 48; o.compact_size = 72;
      b.gil_off = 360; b.gil_size = 208; b.gil_flags = 0;  // _PyRuntime.ceval.gil
      return true;
    case 12:
      b.rt_interp_head = 40; b.is_threads_head = 72; b.ts_thread_id = 144;
      b.ts_frame = 56; b.cframe_frame = 0;
      b.fr_previous = 8; b.fr_code = 0; b.fr_instr = 56; b.fr_owner = 70;
      b.co_adaptive = 192; b.owner_shim = 3;  // FRAME_OWNED_BY_CSTACK
      b.flags = 0;
      o.co_filename = 112; o.co_name = 120; o.co_qualname = 128; o.co_firstlineno = 68;
      o.co_linetable = 136; o.co_adaptive = 192;
      o.ascii_size = 40; o.compact_size = 56;
      b.gil_off = 384; b.gil_size = 208; b.gil_flags = CW_PY_GIL_VIA_INTERP;  // interp->ceval.gil
      return true;
    default:
      return false;
  }
}

// Indexes (in u64 words after the 8-byte cookie; word 0 = version) of the
// _Py_DebugOffsets fields we use. The struct grows between minor versions.
struct DebugIndex {
  int interp_head, threads_head, ts_next, ts_current_frame, ts_native_tid, fr_previous,
      fr_executable, fr_instr, fr_owner, co_size, co_filename, co_name, co_qualname, co_linetable,
      co_firstlineno, co_adaptive, last, ceval_gil;
};
// ceval_gil: interpreter_state.ceval_gil (3.14 added threads_main before it).
constexpr DebugIndex kDebug313{4, 8, 20, 22, 24, 28, 29, 30, 32, 33, 34, 35, 36, 37, 38, 42, 43, 13};
constexpr DebugIndex kDebug314{4, 8, 23, 25, 27, 31, 32, 33, 35, 38, 39, 40, 41, 42, 43, 47, 48, 14};

bool debug_layout(int minor, const uint8_t* d, size_t n, PythonRuntime& rt, std::string* why) {
  const DebugIndex& ix = minor == 13 ? kDebug313 : kDebug314;
  size_t need = 8 + 8 * size_t(ix.last + 1);
  if (!d || n < need || std::memcmp(d, "xdebugpy", 8) != 0) {
    if (why) *why = "no _Py_DebugOffsets cookie at _PyRuntime";
    return false;
  }
  auto word = [&](int i) {
    uint64_t v;
    std::memcpy(&v, d + 8 + 8 * i, 8);
    return v;
  };
  uint64_t version = word(0);
  if (int((version >> 24) & 0xff) != 3 || int((version >> 16) & 0xff) != minor) {
    if (why) *why = "_Py_DebugOffsets version does not match";
    return false;
  }
  if (minor >= 14 && word(1) != 0) {
    if (why) *why = "free-threaded CPython build (not supported)";
    return false;
  }
  // Every offset we use must be small: a garbage struct must not steer the walker.
  for (int i : {ix.interp_head, ix.threads_head, ix.ts_next, ix.ts_current_frame,
                ix.ts_native_tid, ix.fr_previous, ix.fr_executable, ix.fr_instr, ix.fr_owner,
                ix.co_filename, ix.co_name, ix.co_qualname, ix.co_linetable, ix.co_firstlineno,
                ix.co_adaptive}) {
    if (word(i) >= 0xff00) {
      if (why) *why = "implausible _Py_DebugOffsets field";
      return false;
    }
  }
  cw_py_proc& b = rt.bpf;
  b.rt_interp_head = word(ix.interp_head);
  b.is_threads_head = word(ix.threads_head);
  b.ts_next = word(ix.ts_next);
  b.ts_thread_id = word(ix.ts_native_tid);
  b.ts_frame = word(ix.ts_current_frame);
  b.cframe_frame = kNo;
  b.fr_previous = word(ix.fr_previous);
  b.fr_code = word(ix.fr_executable);
  b.fr_instr = word(ix.fr_instr);
  b.fr_owner = word(ix.fr_owner);
  b.fr_is_entry = kNo;
  b.co_adaptive = word(ix.co_adaptive);
  b.owner_shim = 3;  // 3.13 FRAME_OWNED_BY_CSTACK; 3.14 INTERPRETER (3) and CSTACK (4)
  // interp->ceval.gil, a pointer to the interpreter's _gil (208 bytes in 3.13).
  if (word(ix.ceval_gil) < 0xff00) {
    b.gil_off = uint16_t(word(ix.ceval_gil));
    b.gil_size = 208;
    b.gil_flags = CW_PY_GIL_VIA_INTERP;
  }
  b.flags = minor >= 14 ? CW_PY_TAGGED_CODE : 0;
  PyObjectLayout& o = rt.objects;
  o.co_filename = word(ix.co_filename);
  o.co_name = word(ix.co_name);
  o.co_qualname = word(ix.co_qualname);
  o.co_linetable = word(ix.co_linetable);
  o.co_firstlineno = word(ix.co_firstlineno);
  o.co_adaptive = word(ix.co_adaptive);
  o.ascii_size = 40;
  o.compact_size = 56;
  return true;
}

}  // namespace

bool python_layout_for(int major, int minor, const uint8_t* debug_offsets, size_t n,
                       PythonRuntime& rt, std::string* why) {
  rt.major = major;
  rt.minor = minor;
  rt.bpf.version = uint32_t(major) << 8 | uint32_t(minor);
  if (major != 3 || minor < 10 || minor > 14) {
    if (why) *why = "unsupported Python version " + std::to_string(major) + "." + std::to_string(minor);
    return false;
  }
  const bool ok = minor >= 13 ? debug_layout(minor, debug_offsets, n, rt, why) : table_layout(minor, rt);
  if (!ok) return false;
  // The object fields the BPF side copies a code object with (cw_pycode_event),
  // the same ones the user-space decoder reads.
  static_assert(PyObjectLayout::kNone == CW_PY_NO_FIELD);
  const PyObjectLayout& o = rt.objects;
  cw_py_proc& b = rt.bpf;
  b.ob_type = o.ob_type;
  b.var_size = o.var_size;
  b.co_name = o.co_qualname != PyObjectLayout::kNone ? o.co_qualname : o.co_name;
  b.co_filename = o.co_filename;
  b.co_firstlineno = o.co_firstlineno;
  b.co_linetable = o.co_linetable;
  b.co_code = o.co_code;
  b.bytes_sval = o.bytes_sval;
  b.str_length = o.unicode_length;
  b.str_state = o.unicode_state;
  b.str_ascii_data = o.ascii_size;
  b.str_compact_data = o.compact_size;
  return true;
}

std::optional<PythonRuntime> find_python_runtime(uint32_t pid, std::string* why,
                                                 const std::string& proc_root) {
  auto maps = read_proc_maps(pid, proc_root);
  if (maps.empty()) {
    if (why) *why = "cannot read maps";
    return std::nullopt;
  }
  // libpython first (shared builds: the executable is only a stub), then the rest.
  std::vector<const MappedRegion*> order;
  for (int pass = 0; pass < 2; pass++)
    for (const auto& m : maps)
      if (!m.path.empty() && m.path[0] == '/' && looks_like_python(m.path) &&
          (basename_of(m.path).rfind("libpython", 0) == 0) == (pass == 0))
        order.push_back(&m);
  std::set<std::string> tried;
  for (const MappedRegion* m : order) {
    if (!tried.insert(m->path).second) continue;
    // The mapping of this file at the lowest offset gives the load bias.
    const MappedRegion* first = m;
    for (const auto& o : maps)
      if (o.path == m->path && o.offset < first->offset) first = &o;
    std::string path = openable_path(pid, *first, proc_root);
    if (path.empty()) continue;
    auto elf = ElfSymbols::open(path);
    if (!elf) continue;
    auto runtime = elf->symbol_value("_PyRuntime");
    if (!runtime) continue;

    PythonRuntime rt;
    rt.pid = pid;
    rt.elf_path = path;
    auto vaddr = elf->vaddr_of_offset(first->offset);
    if (!vaddr) continue;
    rt.load_bias = elf->is_shared() ? first->start - (*vaddr & ~0xfffULL) : 0;
    rt.runtime_addr = rt.load_bias + *runtime;

    // Version: _Py_DebugOffsets (3.13+), Py_Version (3.11+), or the file name.
    int major = 0, minor = -1;
    auto head = elf->read_vaddr(*runtime, 8 + 8 * 64);
    if (head && std::memcmp(head->data(), "xdebugpy", 8) == 0) {
      uint64_t v;
      std::memcpy(&v, head->data() + 8, 8);
      major = (v >> 24) & 0xff;
      minor = (v >> 16) & 0xff;
    } else if (auto pv = elf->symbol_value("Py_Version")) {
      if (auto bytes = elf->read_vaddr(*pv, 4)) {
        uint32_t v;
        std::memcpy(&v, bytes->data(), 4);
        major = (v >> 24) & 0xff;
        minor = (v >> 16) & 0xff;
      }
    }
    if (minor < 0) {
      if (auto m2 = minor_from_name(m->path)) {
        major = 3;
        minor = *m2;
      }
    }
    if (minor < 0) {
      if (why) *why = "cannot tell the Python version of " + m->path;
      return std::nullopt;
    }
    if (!python_layout_for(major, minor, head ? head->data() : nullptr, head ? head->size() : 0, rt,
                           why))
      return std::nullopt;
    rt.bpf.runtime = rt.runtime_addr;

    auto code = elf->symbol_value("PyCode_Type");
    auto uni = elf->symbol_value("PyUnicode_Type");
    auto bytes = elf->symbol_value("PyBytes_Type");
    if (!code || !uni || !bytes) {
      if (why) *why = "type objects not found in " + m->path;
      return std::nullopt;
    }
    rt.code_type = rt.load_bias + *code;
    rt.unicode_type = rt.load_bias + *uni;
    rt.bytes_type = rt.load_bias + *bytes;

    // The thread ids CPython stores are those of the process's pid namespace.
    struct stat mine {}, theirs {};
    std::string ns = proc_root + "/" + std::to_string(pid) + "/ns/pid";
    if (stat("/proc/self/ns/pid", &mine) == 0 && stat(ns.c_str(), &theirs) == 0 &&
        mine.st_ino != theirs.st_ino) {
      rt.bpf.pidns_dev = theirs.st_dev;
      rt.bpf.pidns_ino = theirs.st_ino;
    }
    return rt;
  }
  if (why) *why = "no _PyRuntime in any mapped file (not CPython)";
  return std::nullopt;
}

}  // namespace causeway::discover
