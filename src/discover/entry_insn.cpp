// SPDX-License-Identifier: Apache-2.0
#include "causeway/discover/entry_insn.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>

#include "causeway/discover/elf_symbols.h"

namespace causeway::discover {

std::string_view entry_insn_name(EntryInsn k) {
  switch (k) {
    case EntryInsn::Push: return "push";
    case EntryInsn::Branch: return "branch";
    case EntryInsn::Nop: return "nop";
    case EntryInsn::LongNop: return "nopl";
    case EntryInsn::Endbr: return "endbr64";
    case EntryInsn::Other: return "other";
  }
  return "other";
}

EntryInsn classify_entry_insn(std::span<const uint8_t> c) {
  const size_t n = c.size();
  if (n >= 1 && c[0] >= 0x50 && c[0] <= 0x57) return EntryInsn::Push;
  if (n >= 2 && c[0] == 0x41 && c[1] >= 0x50 && c[1] <= 0x57) return EntryInsn::Push;
  if (n >= 1 && (c[0] == 0xe8 || c[0] == 0xe9 || c[0] == 0xeb || (c[0] >= 0x70 && c[0] <= 0x7f)))
    return EntryInsn::Branch;
  if (n >= 2 && c[0] == 0x0f && c[1] >= 0x80 && c[1] <= 0x8f) return EntryInsn::Branch;
  if (n >= 1 && c[0] == 0x90) return EntryInsn::Nop;
  if (n >= 2 && c[0] == 0x66 && c[1] == 0x90) return EntryInsn::Nop;
  // nopl: 0f 1f with ModRM.reg 0, after any 66 prefixes (66 0f 1f 44 00 00).
  size_t i = 0;
  while (i < n && c[i] == 0x66) ++i;
  if (i + 2 < n && c[i] == 0x0f && c[i + 1] == 0x1f && ((c[i + 2] >> 3) & 7) == 0) return EntryInsn::LongNop;
  if (n >= 4 && c[0] == 0xf3 && c[1] == 0x0f && c[2] == 0x1e && c[3] == 0xfa) return EntryInsn::Endbr;
  return EntryInsn::Other;
}

std::optional<std::vector<uint8_t>> read_entry_bytes(const std::string& path, const ElfSymbols& elf, uint64_t vaddr) {
  const auto off = elf.offset_of_vaddr(vaddr);
  if (!off) return std::nullopt;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::vector<uint8_t> bytes(16);
  const ssize_t n = ::pread(fd, bytes.data(), bytes.size(), off_t(*off));
  ::close(fd);
  if (n <= 0) return std::nullopt;
  bytes.resize(size_t(n));
  return bytes;
}

std::vector<ProbedEntry> probed_entries(const std::string& path, LibraryKind kind) {
  std::vector<ProbedEntry> out;
  auto elf = ElfSymbols::open(path);
  if (!elf) return out;
  std::vector<uint64_t> seen;
  for (const auto& op : all_ops()) {
    if (op.library != kind || !op.in_default_set) continue;
    const auto vaddr = elf->symbol_value(op.symbol);
    // Aliases (two names at one address) are one probe: keep the first.
    if (!vaddr || std::find(seen.begin(), seen.end(), *vaddr) != seen.end()) continue;
    const auto bytes = read_entry_bytes(path, *elf, *vaddr);
    if (!bytes) continue;
    seen.push_back(*vaddr);
    out.push_back({std::string(op.symbol), op.cls, classify_entry_insn(*bytes)});
  }
  return out;
}

}  // namespace causeway::discover
