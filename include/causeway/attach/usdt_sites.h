// SPDX-License-Identifier: Apache-2.0
#pragma once
// A USDT probe's locations in one file, ready for one uprobe_multi link: the
// file offset of each nop, of its semaphore (the kernel raises it while the
// probe is attached), and where each argument is, in the layout of libbpf's
// <bpf/usdt.bpf.h> spec map (bpf_usdt_arg and bpf_usdt_cookie read it,
// keyed by the site's attach cookie). libbpf 1.1 attaches a USDT probe as
// one perf-event uprobe per site; detaching those in a launch window stalled
// a PyTorch training step 20-40 ms per probe on the H100 host
// (docs/performance.md §6c), a uprobe_multi link does not.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "causeway/discover/elf_symbols.h"

namespace causeway::attach {

// struct __bpf_usdt_arg_spec / __bpf_usdt_spec of <bpf/usdt.bpf.h>, byte for
// byte (Probes checks the map's value size against it).
struct UsdtArgSpec {
  uint64_t val_off = 0;
  uint32_t arg_type = 0;  // 0 constant, 1 register, 2 memory at register + val_off
  int16_t reg_off = 0;    // offset of the register in struct pt_regs (x86-64)
  bool arg_signed = false;
  int8_t arg_bitshift = 0;  // 64 - 8 x the argument's size
};
struct UsdtSpec {
  static constexpr int kMaxArgs = 12;
  UsdtArgSpec args[kMaxArgs];
  uint64_t usdt_cookie = 0;
  int16_t arg_cnt = 0;
};
static_assert(sizeof(UsdtArgSpec) == 16);
static_assert(sizeof(UsdtSpec) == 208);

// The SDT argument string of an x86-64 note ("-8@%rax 8@-16(%rbp) -4@$5"),
// or nullopt for a form the BPF side cannot read (rip-relative, indexed, an
// unknown register, more than kMaxArgs).
std::optional<UsdtSpec> parse_usdt_args(std::string_view args);

struct UsdtSite {
  uint64_t offset = 0;       // of the nop, in the file
  uint64_t ref_ctr = 0;      // of the semaphore, in the file (0: none)
  UsdtSpec spec;
};
// Every location of provider:name in the file; empty when it has none or one
// of them cannot be placed or read (the caller then falls back to libbpf).
std::vector<UsdtSite> usdt_sites(const discover::ElfSymbols& elf, std::string_view provider, std::string_view name);

}  // namespace causeway::attach
