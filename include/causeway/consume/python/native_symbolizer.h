// SPDX-License-Identifier: Apache-2.0
#pragma once
// Native user stacks (frame-pointer walks captured in BPF) to function names.
// The kernel names the file of each frame's mapping (device, inode, mapping
// start and file offset, file name), so a frame resolves to a file offset even
// after its process is gone; the file itself is opened through the process
// (/proc/PID/map_files) while it lives, else by a path seen for that file
// (any process's maps, the probed libraries), else by its name in the folders
// such files live in. Then the function symbol (.symtab/.dynsym), demangled.
// ELF files are cached by identity and shared between processes.
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "causeway/discover/elf_symbols.h"
#include "causeway/discover/proc_maps.h"
#include "causeway/model/stacks.h"
#include "causeway/model/records.h"

namespace causeway::consume::python {

class NativeSymbolizer {
 public:
  explicit NativeSymbolizer(std::string proc_root = "/proc") : proc_root_(std::move(proc_root)) {}
  // e.native[0] is the probed pc, the rest return addresses. A frame the
  // kernel found no file for is looked up in the process's maps; the walk
  // stops at the first address in no executable mapping: past it, a
  // frame-pointer walk through code built without frame pointers is garbage.
  model::Stack symbolize(const cw_pystack_event& e);
  // Addresses alone, through /proc/PID/maps (fuzzing, records without modules).
  model::Stack symbolize(uint32_t pid, const uint64_t* addrs, size_t n);

  // Read a live process's maps now: its files stay findable after it exits.
  void remember_process(uint32_t pid);
  // A file known by path (a probed library): findable by its identity.
  void remember_file(const std::string& path);
  void forget(uint32_t pid) { maps_.erase(pid); }

 private:
  using FileKey = std::pair<uint64_t, uint64_t>;  // (major << 32 | minor, inode)
  const discover::MappedRegion* mapping(uint32_t pid, uint64_t addr, bool& reread);
  discover::ElfSymbols* elf_for(uint32_t pid, const discover::MappedRegion& m);
  discover::ElfSymbols* elf_for_module(uint32_t pid, const cw_native_module& m, std::string& path);
  void remember_maps(const std::vector<discover::MappedRegion>& maps);
  model::StackFrame frame_at(discover::ElfSymbols* elf, uint64_t file_offset, std::string module);

  std::string proc_root_;
  std::unordered_map<uint32_t, std::vector<discover::MappedRegion>> maps_;
  std::map<std::pair<std::string, uint64_t>, std::unique_ptr<discover::ElfSymbols>> elfs_;  // (path, inode)
  struct ModuleFile {
    std::string path;  // empty: not found
    std::unique_ptr<discover::ElfSymbols> elf;
  };
  std::map<FileKey, ModuleFile> modules_;
  std::map<FileKey, std::string> paths_;  // every file seen mapped or probed
  std::set<std::string> dirs_;            // the folders of those files
};

}  // namespace causeway::consume::python
