// SPDX-License-Identifier: Apache-2.0
#pragma once
// What a uprobe costs depends on the instruction it replaces. The kernel
// emulates a few x86-64 instructions after the trap (push of a register,
// jumps, calls, conditional jumps, a one-byte nop); any other instruction is
// copied out of line and single-stepped, which takes a second exception — on
// a VM that intercepts debug exceptions, about 14 us against 0.4 us for an
// emulated one (docs/performance.md §6e). A probed function's first
// instruction says which it pays: this classifies it from the bytes.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "causeway/common/op_table.h"

namespace causeway::discover {

enum class EntryInsn : uint8_t {
  Push,     // push %reg (50-57, 41 50-57)
  Branch,   // jmp, call, jcc with a relative target
  Nop,      // 90 (and 66 90)
  LongNop,  // 0f 1f /0: nopl, the multi-byte nop (USDT probes sit on these)
  Endbr,    // f3 0f 1e fa: endbr64, first in every function built for CET
  Other,    // anything else (mov, sub, lea, test, ...)
};

std::string_view entry_insn_name(EntryInsn k);
// The class of the instruction at the start of `code` (x86-64 machine code).
EntryInsn classify_entry_insn(std::span<const uint8_t> code);

class ElfSymbols;

// The first bytes of the function at link-time address `vaddr` of the ELF
// file `path`, read from the file itself: a mapping of a file with uprobes on
// it (ElfSymbols maps it) holds their breakpoints (int3) in place of the
// instructions, the file's own pages never do.
std::optional<std::vector<uint8_t>> read_entry_bytes(const std::string& path, const ElfSymbols& elf, uint64_t vaddr);

// A probed function of a library and the class of its first instruction.
struct ProbedEntry {
  std::string symbol;
  OpClass cls;
  EntryInsn insn;
};

// The default-set functions causeway probes in `path` (a library of `kind`),
// each with its first instruction's class; those it cannot find are left out.
std::vector<ProbedEntry> probed_entries(const std::string& path, LibraryKind kind);

}  // namespace causeway::discover
