// SPDX-License-Identifier: Apache-2.0
#include "causeway/attach/versioned_symbol.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <memory>

namespace causeway::attach {

std::optional<uint64_t> default_version_offset(const std::string& path, const std::string& symbol) {
  if (elf_version(EV_CURRENT) == EV_NONE) return std::nullopt;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::unique_ptr<Elf, decltype(&elf_end)> elf(elf_begin(fd, ELF_C_READ_MMAP, nullptr), elf_end);
  auto result = [&]() -> std::optional<uint64_t> {
    if (!elf || elf_kind(elf.get()) != ELF_K_ELF) return std::nullopt;
    Elf_Data *syms = nullptr, *versyms = nullptr;
    size_t nsyms = 0, strtab = 0;
    for (Elf_Scn* scn = nullptr; (scn = elf_nextscn(elf.get(), scn)) != nullptr;) {
      GElf_Shdr sh;
      if (!gelf_getshdr(scn, &sh)) continue;
      if (sh.sh_type == SHT_DYNSYM && sh.sh_entsize) {
        syms = elf_getdata(scn, nullptr);
        nsyms = sh.sh_size / sh.sh_entsize;
        strtab = sh.sh_link;
      } else if (sh.sh_type == SHT_GNU_versym) {
        versyms = elf_getdata(scn, nullptr);
      }
    }
    if (!syms) return std::nullopt;
    std::optional<uint64_t> vaddr;
    for (size_t i = 0; i < nsyms; i++) {
      GElf_Sym s;
      if (!gelf_getsym(syms, int(i), &s)) break;
      if (s.st_shndx == SHN_UNDEF || GELF_ST_TYPE(s.st_info) != STT_FUNC) continue;
      const char* name = elf_strptr(elf.get(), strtab, s.st_name);
      if (!name || symbol != name) continue;
      GElf_Versym v = 0;
      if (versyms && gelf_getversym(versyms, int(i), &v) && (v & 0x8000)) continue;  // VERSYM_HIDDEN
      vaddr = s.st_value;
      break;
    }
    if (!vaddr) return std::nullopt;
    size_t nphdr = 0;
    if (elf_getphdrnum(elf.get(), &nphdr) != 0) return std::nullopt;
    for (size_t i = 0; i < nphdr; i++) {
      GElf_Phdr ph;
      if (!gelf_getphdr(elf.get(), int(i), &ph) || ph.p_type != PT_LOAD) continue;
      if (*vaddr >= ph.p_vaddr && *vaddr < ph.p_vaddr + ph.p_filesz)
        return *vaddr - ph.p_vaddr + ph.p_offset;
    }
    return std::nullopt;
  }();
  elf.reset();
  ::close(fd);
  return result;
}

}  // namespace causeway::attach
