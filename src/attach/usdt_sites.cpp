// SPDX-License-Identifier: Apache-2.0
#include "causeway/attach/usdt_sites.h"

#include <charconv>
#include <cstring>

namespace causeway::attach {
namespace {

// struct pt_regs (x86-64): r15 r14 r13 r12 bp bx r11 r10 r9 r8 ax cx dx si di
// orig_ax ip cs flags sp ss, 8 bytes each. Every width of a register reads
// its whole slot; the spec's bit shift keeps the argument's bytes.
std::optional<int16_t> pt_regs_offset(std::string_view reg) {
  struct Names {
    const char* names[4];
    int16_t off;
  };
  static const Names table[] = {
      {{"rax", "eax", "ax", "al"}, 80},   {{"rbx", "ebx", "bx", "bl"}, 40},   {{"rcx", "ecx", "cx", "cl"}, 88},
      {{"rdx", "edx", "dx", "dl"}, 96},   {{"rsi", "esi", "si", "sil"}, 104}, {{"rdi", "edi", "di", "dil"}, 112},
      {{"rbp", "ebp", "bp", "bpl"}, 32},  {{"rsp", "esp", "sp", "spl"}, 152}, {{"r8", "r8d", "r8w", "r8b"}, 72},
      {{"r9", "r9d", "r9w", "r9b"}, 64},  {{"r10", "r10d", "r10w", "r10b"}, 56}, {{"r11", "r11d", "r11w", "r11b"}, 48},
      {{"r12", "r12d", "r12w", "r12b"}, 24}, {{"r13", "r13d", "r13w", "r13b"}, 16},
      {{"r14", "r14d", "r14w", "r14b"}, 8}, {{"r15", "r15d", "r15w", "r15b"}, 0},
  };
  for (const auto& n : table)
    for (const char* name : n.names)
      if (reg == name) return n.off;
  return std::nullopt;
}

template <typename T>
bool parse_number(std::string_view s, T& out) {
  if (s.empty()) return false;
  bool neg = s[0] == '-';
  if (neg) s.remove_prefix(1);
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    s.remove_prefix(2);
    base = 16;
  }
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (ec != std::errc() || p != s.data() + s.size()) return false;
  out = T(neg ? uint64_t(0) - v : v);
  return true;
}

// One "SIZE@LOCATION".
std::optional<UsdtArgSpec> parse_arg(std::string_view a) {
  const size_t at = a.find('@');
  if (at == std::string_view::npos) return std::nullopt;
  int size = 0;
  if (!parse_number(a.substr(0, at), size) || size == 0) return std::nullopt;
  const int bytes = size < 0 ? -size : size;
  if (bytes != 1 && bytes != 2 && bytes != 4 && bytes != 8) return std::nullopt;
  UsdtArgSpec s;
  s.arg_signed = size < 0;
  s.arg_bitshift = int8_t(64 - 8 * bytes);
  std::string_view loc = a.substr(at + 1);
  if (!loc.empty() && loc[0] == '$') {  // a constant
    if (!parse_number(loc.substr(1), s.val_off)) return std::nullopt;
    s.arg_type = 0;
    return s;
  }
  if (!loc.empty() && loc[0] == '%') {  // a register
    auto off = pt_regs_offset(loc.substr(1));
    if (!off) return std::nullopt;
    s.arg_type = 1;
    s.reg_off = *off;
    return s;
  }
  // OFFSET(%reg) or (%reg): memory at a register plus an offset
  const size_t open = loc.find('(');
  if (open == std::string_view::npos || loc.size() < open + 3 || loc.back() != ')' || loc[open + 1] != '%')
    return std::nullopt;
  std::string_view reg = loc.substr(open + 2, loc.size() - open - 3);
  auto off = pt_regs_offset(reg);  // "rip" and "base,index,scale" forms are not registers here
  if (!off) return std::nullopt;
  int64_t disp = 0;
  if (open > 0 && !parse_number(loc.substr(0, open), disp)) return std::nullopt;
  s.arg_type = 2;
  s.reg_off = *off;
  s.val_off = uint64_t(disp);
  return s;
}

}  // namespace

std::optional<UsdtSpec> parse_usdt_args(std::string_view args) {
  UsdtSpec spec;
  while (!args.empty()) {
    while (!args.empty() && args[0] == ' ') args.remove_prefix(1);
    if (args.empty()) break;
    const size_t end = args.find(' ');
    auto a = parse_arg(args.substr(0, end));
    if (!a || spec.arg_cnt >= UsdtSpec::kMaxArgs) return std::nullopt;
    spec.args[spec.arg_cnt++] = *a;
    args = end == std::string_view::npos ? std::string_view() : args.substr(end);
  }
  return spec;
}

std::vector<UsdtSite> usdt_sites(const discover::ElfSymbols& elf, std::string_view provider, std::string_view name) {
  std::vector<UsdtSite> sites;
  for (const auto& u : elf.usdt_probes()) {
    if (u.provider != provider || u.name != name) continue;
    // A prelinked file moved .stapsdt.base: the nop moved with it (the
    // semaphore's address is taken as it stands, as libbpf does).
    uint64_t pc = u.pc;
    const uint64_t sem = u.semaphore;
    if (u.base) {
      auto base = elf.section_addr(".stapsdt.base");
      if (!base) return {};
      pc += *base - u.base;
    }
    auto off = elf.offset_of_vaddr(pc);
    auto spec = parse_usdt_args(u.args);
    if (!off || !spec) return {};
    UsdtSite s{*off, 0, *spec};
    if (sem) {
      auto ref = elf.offset_of_vaddr(sem);
      if (!ref) return {};
      s.ref_ctr = *ref;
    }
    sites.push_back(s);
  }
  return sites;
}

}  // namespace causeway::attach
