// SPDX-License-Identifier: Apache-2.0
#include "causeway/consume/python/native_symbolizer.h"

#include <sys/stat.h>

#include <cinttypes>
#include <cstdio>

namespace causeway::consume::python {

const discover::MappedRegion* NativeSymbolizer::mapping(uint32_t pid, uint64_t addr, bool& reread) {
  auto it = maps_.find(pid);
  if (it == maps_.end()) it = maps_.emplace(pid, discover::read_proc_maps(pid, proc_root_)).first;
  for (const auto& m : it->second)
    if (addr >= m.start && addr < m.end) return &m;
  if (reread) return nullptr;  // maps re-read at most once per stack (dlopen since last read)
  reread = true;
  it->second = discover::read_proc_maps(pid, proc_root_);
  for (const auto& m : it->second)
    if (addr >= m.start && addr < m.end) return &m;
  return nullptr;
}

discover::ElfSymbols* NativeSymbolizer::elf_for(uint32_t pid, const discover::MappedRegion& m) {
  auto key = std::make_pair(m.path, m.inode);
  auto it = elfs_.find(key);
  if (it != elfs_.end()) return it->second.get();
  char range[64];
  std::snprintf(range, sizeof(range), "%" PRIx64 "-%" PRIx64, m.start, m.end);
  std::string pid_dir = proc_root_ + "/" + std::to_string(pid);
  std::unique_ptr<discover::ElfSymbols> elf;
  struct stat st {};
  for (const std::string& p : {pid_dir + "/map_files/" + range, m.path, pid_dir + "/root" + m.path}) {
    if (stat(p.c_str(), &st) == 0 && st.st_ino == m.inode && (elf = discover::ElfSymbols::open(p)))
      break;
  }
  return elfs_.emplace(key, std::move(elf)).first->second.get();
}

store::Stack NativeSymbolizer::symbolize(uint32_t pid, const uint64_t* addrs, size_t n) {
  store::Stack out;
  bool reread = false;
  for (size_t i = 0; i < n; i++) {
    // A return address points after the call: look up the call itself.
    uint64_t a = i == 0 ? addrs[i] : addrs[i] - 1;
    const discover::MappedRegion* m = mapping(pid, a, reread);
    if (!m || !m->executable()) break;
    store::StackFrame f;
    f.kind = "native";
    f.module = m->path;
    if (m->path.empty() || m->path[0] == '[') {
      f.func = m->path.empty() ? "[anon]" : m->path;  // JIT code, [vdso]
      out.push_back(std::move(f));
      continue;
    }
    uint64_t off = a - m->start + m->offset;
    const discover::ElfSymbol* sym = nullptr;
    if (auto* elf = elf_for(pid, *m))
      if (auto v = elf->vaddr_of_offset(off)) sym = elf->function_at(*v);
    if (sym) {
      f.func = discover::demangle(std::string(sym->name));
    } else {
      char buf[32];
      std::snprintf(buf, sizeof(buf), "0x%" PRIx64, off);  // file offset: symbolize offline
      f.func = buf;
    }
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace causeway::consume::python
