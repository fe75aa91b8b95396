// SPDX-License-Identifier: Apache-2.0
#include "causeway/discover/elf_symbols.h"

#include <cxxabi.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace causeway::discover {

namespace {

// Bounds-checked view of a struct in the file; nullptr when it does not fit.
template <typename T>
const T* at(const uint8_t* data, size_t size, uint64_t off) {
  if (off > size || size - off < sizeof(T)) return nullptr;
  // ELF requires aligned headers; a misaligned one is a corrupt file (and
  // reading it through T* is undefined: found by fuzz_elf_symbols).
  if (reinterpret_cast<uintptr_t>(data + off) % alignof(T) != 0) return nullptr;
  return reinterpret_cast<const T*>(data + off);
}

}  // namespace

ElfSymbols::~ElfSymbols() {
  if (map_) munmap(map_, size_);
}

std::unique_ptr<ElfSymbols> ElfSymbols::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
    ::close(fd);
    return nullptr;
  }
  void* m = mmap(nullptr, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (m == MAP_FAILED) return nullptr;
  std::unique_ptr<ElfSymbols> e(new ElfSymbols());
  e->map_ = m;
  e->data_ = static_cast<const uint8_t*>(m);
  e->size_ = st.st_size;
  e->load();
  return e->segments_.empty() ? nullptr : std::move(e);
}

std::unique_ptr<ElfSymbols> ElfSymbols::parse(std::vector<uint8_t> bytes) {
  std::unique_ptr<ElfSymbols> e(new ElfSymbols());
  e->owned_ = std::move(bytes);
  e->data_ = e->owned_.data();
  e->size_ = e->owned_.size();
  e->load();
  return e->segments_.empty() ? nullptr : std::move(e);
}

void ElfSymbols::load() {
  auto* eh = at<Elf64_Ehdr>(data_, size_, 0);
  if (!eh || std::memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64)
    return;
  type_dyn_ = eh->e_type == ET_DYN;
  if (eh->e_phentsize == sizeof(Elf64_Phdr)) {
    for (unsigned i = 0; i < eh->e_phnum; i++) {
      auto* ph = at<Elf64_Phdr>(data_, size_, eh->e_phoff + uint64_t(i) * sizeof(Elf64_Phdr));
      if (!ph) break;
      if (ph->p_type == PT_LOAD)
        segments_.push_back({ph->p_vaddr, ph->p_offset, ph->p_filesz, ph->p_memsz,
                             (ph->p_flags & PF_X) != 0});
    }
  }
  if (eh->e_shentsize != sizeof(Elf64_Shdr)) return;
  // .gnu.version marks the non-default versions of a name (libibverbs has
  // ibv_create_qp@IBVERBS_1.0 beside the default @@IBVERBS_1.1): a name
  // resolves to its default version, whatever the .dynsym order.
  const uint16_t* versym = nullptr;
  uint64_t n_versym = 0;
  for (unsigned i = 0; i < eh->e_shnum; i++) {
    auto* sh = at<Elf64_Shdr>(data_, size_, eh->e_shoff + uint64_t(i) * sizeof(Elf64_Shdr));
    if (sh && sh->sh_type == SHT_GNU_versym && sh->sh_offset <= size_ && sh->sh_offset % 2 == 0 &&
        size_ - sh->sh_offset >= sh->sh_size) {
      versym = reinterpret_cast<const uint16_t*>(data_ + sh->sh_offset);
      n_versym = sh->sh_size / sizeof(uint16_t);
    }
  }
  for (unsigned i = 0; i < eh->e_shnum; i++) {
    auto* sh = at<Elf64_Shdr>(data_, size_, eh->e_shoff + uint64_t(i) * sizeof(Elf64_Shdr));
    if (!sh) break;
    if ((sh->sh_type != SHT_SYMTAB && sh->sh_type != SHT_DYNSYM) || sh->sh_entsize != sizeof(Elf64_Sym))
      continue;
    auto* strh = at<Elf64_Shdr>(data_, size_, eh->e_shoff + uint64_t(sh->sh_link) * sizeof(Elf64_Shdr));
    if (!strh || sh->sh_link >= eh->e_shnum || strh->sh_offset > size_ ||
        size_ - strh->sh_offset < strh->sh_size)
      continue;
    const char* strtab = reinterpret_cast<const char*>(data_ + strh->sh_offset);
    uint64_t nsyms = sh->sh_size / sizeof(Elf64_Sym);
    for (uint64_t k = 1; k < nsyms; k++) {
      auto* sym = at<Elf64_Sym>(data_, size_, sh->sh_offset + k * sizeof(Elf64_Sym));
      if (!sym) break;
      int type = ELF64_ST_TYPE(sym->st_info);
      if (sym->st_shndx == SHN_UNDEF || sym->st_name >= strh->sh_size) continue;
      if (type != STT_FUNC && type != STT_OBJECT && type != STT_TLS) continue;
      const char* nm = strtab + sym->st_name;
      size_t len = strnlen(nm, strh->sh_size - sym->st_name);
      if (len == 0 || len == strh->sh_size - sym->st_name) continue;  // empty or unterminated
      const bool hidden_version =
          sh->sh_type == SHT_DYNSYM && versym && k < n_versym && (versym[k] & 0x8000);
      symbols_.push_back({std::string_view(nm, len), sym->st_value, sym->st_size, type == STT_FUNC,
                          hidden_version});
    }
  }
  for (unsigned i = 0; i < eh->e_shnum; i++) {
    auto* sh = at<Elf64_Shdr>(data_, size_, eh->e_shoff + uint64_t(i) * sizeof(Elf64_Shdr));
    if (sh && sh->sh_type == SHT_NOTE) load_usdt_notes(sh->sh_offset, sh->sh_size);
  }
  for (size_t i = 0; i < symbols_.size(); i++)
    if (symbols_[i].is_function && symbols_[i].value) functions_.push_back(i);
  std::sort(functions_.begin(), functions_.end(), [&](size_t a, size_t b) {
    if (symbols_[a].value != symbols_[b].value) return symbols_[a].value < symbols_[b].value;
    return symbols_[a].size > symbols_[b].size;
  });
}

// Notes of owner "stapsdt", type 3: pc, base, semaphore (8 bytes each), then
// provider, name and arguments, each NUL-terminated. Anything that does not
// fit ends the section's walk.
void ElfSymbols::load_usdt_notes(uint64_t off, uint64_t size) {
  if (off > size_ || size_ - off < size) return;
  const uint8_t* p = data_ + off;
  const uint8_t* end = p + size;
  auto align4 = [](uint64_t n) { return (n + 3) & ~uint64_t(3); };
  while (end - p >= 12) {
    uint32_t namesz, descsz, type;
    std::memcpy(&namesz, p, 4);
    std::memcpy(&descsz, p + 4, 4);
    std::memcpy(&type, p + 8, 4);
    p += 12;
    if (uint64_t(end - p) < align4(namesz)) return;
    const uint8_t* name = p;
    p += align4(namesz);
    if (uint64_t(end - p) < align4(descsz)) return;
    const uint8_t* desc = p;
    p += align4(descsz);
    if (type != 3 || namesz != 8 || std::memcmp(name, "stapsdt", 8) != 0 || descsz < 24 + 3) continue;
    ElfUsdtProbe u;
    std::memcpy(&u.pc, desc, 8);
    std::memcpy(&u.base, desc + 8, 8);
    std::memcpy(&u.semaphore, desc + 16, 8);
    const char* s = reinterpret_cast<const char*>(desc + 24);
    const char* s_end = reinterpret_cast<const char*>(desc + descsz);
    std::string* fields[] = {&u.provider, &u.name, &u.args};
    bool whole = true;
    for (std::string* f : fields) {
      const char* z = static_cast<const char*>(std::memchr(s, 0, size_t(s_end - s)));
      if (!z) {
        whole = false;
        break;
      }
      f->assign(s, z);
      s = z + 1;
    }
    if (whole) usdt_.push_back(std::move(u));
  }
}

bool ElfSymbols::has_usdt(std::string_view provider, std::string_view name) const {
  for (const auto& u : usdt_)
    if (u.provider == provider && u.name == name) return true;
  return false;
}

std::optional<uint64_t> ElfSymbols::section_addr(std::string_view name) const {
  auto* eh = at<Elf64_Ehdr>(data_, size_, 0);
  if (!eh || eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shstrndx >= eh->e_shnum) return std::nullopt;
  auto* strh = at<Elf64_Shdr>(data_, size_, eh->e_shoff + uint64_t(eh->e_shstrndx) * sizeof(Elf64_Shdr));
  if (!strh || strh->sh_offset > size_ || size_ - strh->sh_offset < strh->sh_size) return std::nullopt;
  const char* names = reinterpret_cast<const char*>(data_ + strh->sh_offset);
  for (unsigned i = 0; i < eh->e_shnum; i++) {
    auto* sh = at<Elf64_Shdr>(data_, size_, eh->e_shoff + uint64_t(i) * sizeof(Elf64_Shdr));
    if (!sh || sh->sh_name >= strh->sh_size) continue;
    const char* n = names + sh->sh_name;
    if (strnlen(n, strh->sh_size - sh->sh_name) == name.size() && std::memcmp(n, name.data(), name.size()) == 0)
      return sh->sh_addr;
  }
  return std::nullopt;
}

std::optional<uint64_t> ElfSymbols::symbol_value(std::string_view name) const {
  for (const auto& s : symbols_)
    if (s.name == name && !s.non_default_version) return s.value;
  return std::nullopt;
}

const ElfSymbol* ElfSymbols::function_at(uint64_t vaddr) const {
  auto it = std::upper_bound(functions_.begin(), functions_.end(), vaddr,
                             [&](uint64_t v, size_t i) { return v < symbols_[i].value; });
  // The few symbols just below: aliases at one address, a sized one covering it.
  for (int k = 0; k < 8 && it != functions_.begin(); k++) {
    --it;
    const ElfSymbol& s = symbols_[*it];
    if (s.size && vaddr < s.value + s.size) return &s;
  }
  // Size-0 symbols (hand-written assembly) cover up to the next symbol, inside text only.
  it = std::upper_bound(functions_.begin(), functions_.end(), vaddr,
                        [&](uint64_t v, size_t i) { return v < symbols_[i].value; });
  if (it == functions_.begin()) return nullptr;
  const ElfSymbol& s = symbols_[*(it - 1)];
  if (s.size) return nullptr;
  for (const auto& seg : segments_)
    if (seg.executable && vaddr >= seg.vaddr && vaddr < seg.vaddr + seg.memsz &&
        s.value >= seg.vaddr)
      return &s;
  return nullptr;
}

std::optional<uint64_t> ElfSymbols::vaddr_of_offset(uint64_t off) const {
  for (const auto& seg : segments_)
    if (off >= seg.offset && off < seg.offset + std::max(seg.filesz, uint64_t(1)))
      return seg.vaddr + (off - seg.offset);
  return std::nullopt;
}

std::optional<uint64_t> ElfSymbols::offset_of_vaddr(uint64_t vaddr) const {
  for (const auto& seg : segments_)
    if (vaddr >= seg.vaddr && vaddr < seg.vaddr + seg.filesz) return seg.offset + (vaddr - seg.vaddr);
  return std::nullopt;
}

bool elf_exports(const std::string& path, const std::string& symbol) {
  return elf_symbol_value(path, symbol).has_value();
}

std::optional<uint64_t> elf_symbol_value(const std::string& path, const std::string& symbol) {
  auto elf = ElfSymbols::open(path);
  return elf ? elf->symbol_value(symbol) : std::nullopt;
}

std::optional<std::vector<uint8_t>> ElfSymbols::read_vaddr(uint64_t vaddr, size_t n) const {
  for (const auto& seg : segments_) {
    if (vaddr < seg.vaddr || vaddr - seg.vaddr >= seg.filesz || seg.filesz - (vaddr - seg.vaddr) < n)
      continue;
    uint64_t off = seg.offset + (vaddr - seg.vaddr);
    if (off > size_ || size_ - off < n) return std::nullopt;
    return std::vector<uint8_t>(data_ + off, data_ + off + n);
  }
  return std::nullopt;
}

std::string demangle(const std::string& name) {
  if (name.size() < 2 || name[0] != '_' || name[1] != 'Z') return name;
  int status = 0;
  char* out = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  if (status != 0 || !out) return name;
  std::string r(out);
  std::free(out);
  return r;
}

}  // namespace causeway::discover
