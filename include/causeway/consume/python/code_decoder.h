// SPDX-License-Identifier: Apache-2.0
#pragma once
// Turning (code object address, instruction offset) pairs captured in BPF
// into function, file and line, by reading the code object from the process
// (docs/python.md). Nothing read is trusted: the object must have PyCode_Type as
// its type, its strings PyUnicode_Type and its line table PyBytes_Type, every
// size is capped and every loop bounded. A code object that does not validate
// is dropped (nullopt), never guessed.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "causeway/discover/python_runtime.h"
#include "causeway/model/stacks.h"

namespace causeway::consume::python {

// Reads another process's memory; false when any byte is unreadable.
class ProcessMemory {
 public:
  virtual ~ProcessMemory() = default;
  virtual bool read(uint64_t addr, void* buf, size_t n) = 0;
};

// /proc/PID/mem (pread), one open file per process.
std::unique_ptr<ProcessMemory> open_process_memory(uint32_t pid, const std::string& proc_root = "/proc");
// A process that is gone: every read fails.
ProcessMemory& no_process_memory();

struct CodeInfo {
  std::string name;       // co_qualname (3.11+), co_name (3.10)
  std::string filename;
  int firstlineno = 0;
  std::vector<uint8_t> linetable;
  uint32_t code_bytes = 0;  // size of the bytecode: offsets at or past it are invalid
  // False when the kernel's copy was cut (a long file name or line table) and
  // the process could not be read for the rest: names end in "…", lines past
  // the copied table are unknown.
  bool complete = true;
};

// Line of the instruction at byte offset lasti; nullopt when the table has none.
std::optional<int> line_from_table_310(const std::vector<uint8_t>& table, int firstlineno, uint32_t lasti);
std::optional<int> line_from_locations(const std::vector<uint8_t>& table, int firstlineno, uint32_t lasti);

class CodeDecoder {
 public:
  CodeDecoder(const discover::PythonRuntime& rt, ProcessMemory& mem) : rt_(rt), mem_(mem) {}
  // Cached per address and first line (cw_code_key: an address reused by
  // another code object is another key). A code object the kernel copied
  // (learn) is served from that copy; one it cut short, or never sent, is
  // read from the process while it lives, if it is still that code object.
  const CodeInfo* code(uint64_t addr, uint32_t firstlineno);
  // The kernel's copy of a code object (bpf/pystack.bpf.h), validated like
  // one read from the process. False when it does not validate.
  bool learn(const cw_pycode_event& e);
  std::optional<int> line(const CodeInfo& c, uint32_t lasti) const;

  static constexpr size_t kMaxString = 4096;
  static constexpr size_t kMaxLineTable = 1 << 20;
  static constexpr size_t kMaxCache = 1 << 16;

 private:
  std::optional<CodeInfo> decode(uint64_t addr, uint32_t firstlineno);
  std::optional<std::string> read_str(uint64_t addr);
  // The text of a compact str from its state bits and raw character data.
  static std::optional<std::string> str_text(uint32_t state, int64_t length, const uint8_t* raw,
                                             size_t n);
  std::optional<std::vector<uint8_t>> read_bytes(uint64_t addr, size_t max);
  bool read_ptr(uint64_t addr, uint64_t& out) { return mem_.read(addr, &out, sizeof(out)); }
  bool type_is(uint64_t obj, uint64_t type);

  discover::PythonRuntime rt_;
  ProcessMemory& mem_;
  std::unordered_map<uint64_t, std::optional<CodeInfo>> cache_;
};

}  // namespace causeway::consume::python
