// SPDX-License-Identifier: Apache-2.0
#pragma once
// The symbol table of one ELF file (.symtab and .dynsym), read once: address
// -> function (symbolizing a user-space address inside a mapping) and name ->
// file offset (where a uprobe goes).
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace causeway::discover {

struct ElfSymbol {
  uint64_t addr = 0;  // st_value (ELF virtual address)
  uint64_t size = 0;
  std::string name;   // as stored (mangled)
};

class ElfSymbolTable {
 public:
  // Reads the file; an unreadable or non-ELF file yields an empty table.
  explicit ElfSymbolTable(const std::string& path);
  // The function containing this file offset (from a /proc/PID/maps mapping).
  // `vaddr`, when given, receives the ELF virtual address of that offset.
  const ElfSymbol* at_file_offset(uint64_t file_offset, uint64_t* vaddr = nullptr) const;
  const ElfSymbol* at_vaddr(uint64_t vaddr) const;
  // File offset of a defined function symbol (for uprobes), nullopt if absent.
  std::optional<uint64_t> file_offset_of(const std::string& name) const;
  size_t size() const { return syms_.size(); }

 private:
  struct Segment {
    uint64_t offset, vaddr, filesz;
  };
  std::vector<ElfSymbol> syms_;  // sorted by addr, one per address
  std::map<std::string, uint64_t> by_name_;  // every function name -> addr
  std::vector<Segment> segments_;
};

// "_Z6matmulPfS_i" -> "matmul(float*, float*, int)"; unchanged if not mangled.
std::string demangle(const std::string& name);

struct Mapping {
  uint64_t start = 0, end = 0, offset = 0;
  std::string path;
};

// Address -> symbol for live processes: /proc/PID/maps + a cache of symbol tables
// per file, opened through /proc/PID/root so containers resolve correctly.
class ProcessSymbolizer {
 public:
  struct Resolved {
    std::string module;  // file path
    std::string func;    // demangled; empty if no symbol covers the address
    uint64_t offset = 0; // address - symbol start
  };
  std::optional<Resolved> resolve(uint32_t pid, uint64_t addr);
  void forget(uint32_t pid) { maps_.erase(pid); }

 private:
  const std::vector<Mapping>& maps_of(uint32_t pid, bool refresh);
  std::map<uint32_t, std::vector<Mapping>> maps_;
  std::map<std::string, std::shared_ptr<ElfSymbolTable>> files_;
};

std::vector<Mapping> read_proc_maps(uint32_t pid, const std::string& proc_root = "/proc");

}  // namespace causeway::discover
