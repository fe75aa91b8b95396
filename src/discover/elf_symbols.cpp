// SPDX-License-Identifier: Apache-2.0
#include "causeway/discover/elf_symbols.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <cstring>
#include <memory>

namespace causeway::discover {
namespace {

struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};
struct ElfEnd {
  void operator()(Elf* e) const { elf_end(e); }
};
using ElfHandle = std::unique_ptr<Elf, ElfEnd>;

// Value of a defined `symbol` in the first section of `section_type`
// (SHT_DYNSYM or SHT_SYMTAB). libelf bounds-checks the section data, so a
// truncated or corrupt file yields nullopt, not a crash.
std::optional<uint64_t> find_in(Elf* elf, Elf64_Word section_type, const std::string& symbol) {
  Elf_Scn* scn = nullptr;
  while ((scn = elf_nextscn(elf, scn)) != nullptr) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) == nullptr || shdr.sh_type != section_type) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (data == nullptr || shdr.sh_entsize == 0) return std::nullopt;
    size_t count = shdr.sh_size / shdr.sh_entsize;
    for (size_t i = 0; i < count; ++i) {
      GElf_Sym sym;
      if (gelf_getsym(data, static_cast<int>(i), &sym) == nullptr) break;
      if (sym.st_shndx == SHN_UNDEF || sym.st_name == 0) continue;
      const char* name = elf_strptr(elf, shdr.sh_link, sym.st_name);
      if (name != nullptr && symbol == name) return sym.st_value;
    }
    return std::nullopt;
  }
  return std::nullopt;
}

template <typename F>
auto with_elf(const std::string& path, F&& f) -> decltype(f(static_cast<Elf*>(nullptr))) {
  static const bool version_ok = elf_version(EV_CURRENT) != EV_NONE;
  if (!version_ok) return {};
  FdCloser fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (fd.fd < 0) return {};
  ElfHandle elf(elf_begin(fd.fd, ELF_C_READ_MMAP, nullptr));
  if (!elf || elf_kind(elf.get()) != ELF_K_ELF) return {};
  return f(elf.get());
}

}  // namespace

bool elf_exports(const std::string& path, const std::string& symbol) {
  auto v = with_elf(path, [&](Elf* e) { return find_in(e, SHT_DYNSYM, symbol); });
  return v.has_value();
}

std::optional<uint64_t> elf_symbol_value(const std::string& path, const std::string& symbol) {
  return with_elf(path, [&](Elf* e) -> std::optional<uint64_t> {
    if (auto v = find_in(e, SHT_DYNSYM, symbol)) return v;
    return find_in(e, SHT_SYMTAB, symbol);
  });
}

}  // namespace causeway::discover
