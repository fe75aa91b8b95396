// SPDX-License-Identifier: Apache-2.0
#include "causeway/discover/elf_symbol_table.h"

#include "causeway/discover/proc_maps.h"

#include <cxxabi.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

namespace causeway::discover {

ElfSymbolTable::ElfSymbolTable(const std::string& path) {
  if (elf_version(EV_CURRENT) == EV_NONE) return;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  Elf* elf = elf_begin(fd, ELF_C_READ, nullptr);
  if (elf && elf_kind(elf) == ELF_K_ELF) {
    size_t phnum = 0;
    elf_getphdrnum(elf, &phnum);
    for (size_t i = 0; i < phnum; i++) {
      GElf_Phdr ph;
      if (gelf_getphdr(elf, int(i), &ph) && ph.p_type == PT_LOAD)
        segments_.push_back({ph.p_offset, ph.p_vaddr, ph.p_filesz});
    }
    Elf_Scn* scn = nullptr;
    while ((scn = elf_nextscn(elf, scn))) {
      GElf_Shdr sh;
      if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM))
        continue;
      Elf_Data* data = elf_getdata(scn, nullptr);
      if (!data || !sh.sh_entsize) continue;
      const size_t n = sh.sh_size / sh.sh_entsize;
      for (size_t i = 0; i < n; i++) {
        GElf_Sym sym;
        if (!gelf_getsym(data, int(i), &sym)) continue;
        const int type = GELF_ST_TYPE(sym.st_info);
        if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym.st_value == 0 ||
            sym.st_shndx == SHN_UNDEF)
          continue;
        const char* name = elf_strptr(elf, sh.sh_link, sym.st_name);
        if (!name || !*name) continue;
        syms_.push_back({sym.st_value, sym.st_size, name});
        by_name_.emplace(name, sym.st_value);
      }
    }
  }
  if (elf) elf_end(elf);
  ::close(fd);
  std::sort(syms_.begin(), syms_.end(), [](const auto& a, const auto& b) {
    return a.addr != b.addr ? a.addr < b.addr : a.name.size() < b.name.size();
  });
  // .symtab and .dynsym repeat each other: keep one entry per address.
  syms_.erase(std::unique(syms_.begin(), syms_.end(),
                          [](const auto& a, const auto& b) { return a.addr == b.addr; }),
              syms_.end());
}

const ElfSymbol* ElfSymbolTable::at_vaddr(uint64_t vaddr) const {
  auto it = std::upper_bound(syms_.begin(), syms_.end(), vaddr,
                             [](uint64_t v, const ElfSymbol& s) { return v < s.addr; });
  if (it == syms_.begin()) return nullptr;
  --it;
  // size 0 symbols (hand-written asm) cover up to the next symbol
  if (it->size && vaddr >= it->addr + it->size) return nullptr;
  return &*it;
}

const ElfSymbol* ElfSymbolTable::at_file_offset(uint64_t off, uint64_t* vaddr) const {
  for (const auto& s : segments_) {
    if (off < s.offset || off >= s.offset + s.filesz) continue;
    if (vaddr) *vaddr = off - s.offset + s.vaddr;
    return at_vaddr(off - s.offset + s.vaddr);
  }
  return nullptr;
}

std::optional<uint64_t> ElfSymbolTable::file_offset_of(const std::string& name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return std::nullopt;
  for (const auto& s : segments_)
    if (it->second >= s.vaddr && it->second < s.vaddr + s.filesz) return it->second - s.vaddr + s.offset;
  return std::nullopt;
}

std::string demangle(const std::string& name) {
  if (name.rfind("_Z", 0) != 0) return name;
  int status = 0;
  char* out = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  if (status != 0 || !out) return name;
  std::string s(out);
  std::free(out);
  return s;
}

std::vector<Mapping> read_proc_maps(uint32_t pid, const std::string& proc_root) {
  std::ifstream f(proc_root + "/" + std::to_string(pid) + "/maps");
  std::vector<Mapping> out;
  for (auto& r : discover::parse_proc_maps(f))
    if (!r.path.empty() && r.path[0] == '/') out.push_back({r.start, r.end, r.offset, std::move(r.path)});
  return out;
}

const std::vector<Mapping>& ProcessSymbolizer::maps_of(uint32_t pid, bool refresh) {
  auto it = maps_.find(pid);
  if (it == maps_.end() || refresh) it = maps_.insert_or_assign(pid, read_proc_maps(pid)).first;
  return it->second;
}

std::optional<ProcessSymbolizer::Resolved> ProcessSymbolizer::resolve(uint32_t pid, uint64_t addr) {
  for (int attempt = 0; attempt < 2; attempt++) {
    for (const auto& m : maps_of(pid, attempt == 1)) {
      if (addr < m.start || addr >= m.end) continue;
      auto& syms = files_[m.path];
      if (!syms)
        syms = std::make_shared<ElfSymbolTable>("/proc/" + std::to_string(pid) + "/root" + m.path);
      Resolved r;
      r.module = m.path;
      uint64_t vaddr = 0;
      if (const ElfSymbol* s = syms->at_file_offset(addr - m.start + m.offset, &vaddr)) {
        r.func = demangle(s->name);
        r.offset = vaddr - s->addr;
      }
      return r;
    }
  }
  return std::nullopt;
}

}  // namespace causeway::discover
