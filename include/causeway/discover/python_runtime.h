// SPDX-License-Identifier: Apache-2.0
#pragma once
// Finding the CPython runtime in a process (docs/python.md):
// the ELF that defines _PyRuntime (the python executable for static builds,
// libpython3.X.so for shared ones, whatever path pyenv/venv/conda put it at),
// its load address in the process, the version, and the struct offsets the
// BPF walker and the user-space frame decoder need: from the runtime's own
// _Py_DebugOffsets (3.13+) or from per-version tables (3.10-3.12).
#include <cstdint>
#include <optional>
#include <string>

#include "causeway/model/stacks.h"

namespace causeway::discover {

// Fields the user-space decoder reads from code objects, bytes and strings.
struct PyObjectLayout {
  static constexpr uint16_t kNone = 0xffff;
  uint16_t ob_type = 8;
  uint16_t var_size = 16;        // PyVarObject.ob_size
  uint16_t co_filename = 0, co_name = 0, co_qualname = kNone, co_firstlineno = 0,
           co_linetable = 0;
  uint16_t co_code = kNone;      // 3.10: bytes object holding the bytecode
  uint16_t co_adaptive = kNone;  // 3.11+: inline bytecode, Py_SIZE(code) code units
  uint16_t bytes_sval = 32;
  uint16_t unicode_length = 16, unicode_state = 32;
  uint16_t ascii_size = 40;      // sizeof(PyASCIIObject): compact ASCII data follows
  uint16_t compact_size = 56;    // sizeof(PyCompactUnicodeObject): other compact data follows
  bool linetable_310 = false;    // (start delta, line delta) pairs; else the 3.11+ location table
};

struct PythonRuntime {
  uint32_t pid = 0;
  int major = 3, minor = 0;
  std::string elf_path;          // the file that defines _PyRuntime, as opened from here
  uint64_t load_bias = 0;
  uint64_t runtime_addr = 0;     // &_PyRuntime in the process
  uint64_t code_type = 0, unicode_type = 0, bytes_type = 0;  // &PyCode_Type etc. in the process
  cw_py_proc bpf{};              // what the BPF walker needs (py_procs map value)
  PyObjectLayout objects;
};

// The Python runtime of a process; nullopt when it is not a CPython process
// or its version is not supported (why says which).
std::optional<PythonRuntime> find_python_runtime(uint32_t pid, std::string* why = nullptr,
                                                 const std::string& proc_root = "/proc");

// Offsets for one version from an ELF that defines _PyRuntime at runtime_vaddr
// (link-time address). debug_offsets: the first bytes of _PyRuntime when it
// starts with the "xdebugpy" cookie (3.13+), else empty. Exposed for tests.
bool python_layout_for(int major, int minor, const uint8_t* debug_offsets, size_t n,
                       PythonRuntime& rt, std::string* why);

}  // namespace causeway::discover
