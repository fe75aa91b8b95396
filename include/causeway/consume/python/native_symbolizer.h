// SPDX-License-Identifier: Apache-2.0
#pragma once
// Native user stacks (frame-pointer walks captured in BPF) to function names:
// the mapping that holds each address (/proc/PID/maps, re-read when an address
// is not covered: dlopen), the function symbol of that file (.symtab/.dynsym),
// demangled. ELF files are cached by identity and shared between processes.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "causeway/discover/elf_symbols.h"
#include "causeway/discover/proc_maps.h"
#include "causeway/store/records.h"

namespace causeway::consume::python {

class NativeSymbolizer {
 public:
  explicit NativeSymbolizer(std::string proc_root = "/proc") : proc_root_(std::move(proc_root)) {}
  // addrs[0] is the probed pc, the rest return addresses. The walk stops at
  // the first address outside an executable mapping: past it, a frame-pointer
  // walk through code built without frame pointers is garbage.
  store::Stack symbolize(uint32_t pid, const uint64_t* addrs, size_t n);
  void forget(uint32_t pid) { maps_.erase(pid); }

 private:
  const discover::MappedRegion* mapping(uint32_t pid, uint64_t addr, bool& reread);
  discover::ElfSymbols* elf_for(uint32_t pid, const discover::MappedRegion& m);

  std::string proc_root_;
  std::unordered_map<uint32_t, std::vector<discover::MappedRegion>> maps_;
  std::map<std::pair<std::string, uint64_t>, std::unique_ptr<discover::ElfSymbols>> elfs_;  // (path, inode)
};

}  // namespace causeway::consume::python
