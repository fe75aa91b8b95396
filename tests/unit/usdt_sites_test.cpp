// SPDX-License-Identifier: Apache-2.0
// USDT sites for one uprobe_multi link: the argument specs libbpf's BPF side
// reads (every x86-64 form compilers emit, and the ones it cannot read), and
// the sites of the stand-in libc10_cuda's pytorch:malloc/free.
#include <gtest/gtest.h>

#include "causeway/attach/usdt_sites.h"

using namespace causeway::attach;
using causeway::discover::ElfSymbols;

TEST(UsdtArgs, EveryFormTheBpfSideReads) {
  auto s = parse_usdt_args("-8@%rax 8@-16(%rbp) -4@$5 1@%dl 2@(%rsi) -4@%r9d 8@0x20(%r12)");
  ASSERT_TRUE(s);
  ASSERT_EQ(s->arg_cnt, 7);
  const UsdtArgSpec* a = s->args;
  // a register: pt_regs' ax at 80, signed, all 8 bytes
  EXPECT_EQ(a[0].arg_type, 1u);
  EXPECT_EQ(a[0].reg_off, 80);
  EXPECT_TRUE(a[0].arg_signed);
  EXPECT_EQ(a[0].arg_bitshift, 0);
  // memory at rbp - 16, unsigned
  EXPECT_EQ(a[1].arg_type, 2u);
  EXPECT_EQ(a[1].reg_off, 32);
  EXPECT_EQ(int64_t(a[1].val_off), -16);
  EXPECT_FALSE(a[1].arg_signed);
  // a constant, 4 bytes signed
  EXPECT_EQ(a[2].arg_type, 0u);
  EXPECT_EQ(a[2].val_off, 5u);
  EXPECT_EQ(a[2].arg_bitshift, 32);
  // a byte register reads dx's slot, keeping its low byte
  EXPECT_EQ(a[3].reg_off, 96);
  EXPECT_EQ(a[3].arg_bitshift, 56);
  // (%rsi): memory at rsi + 0
  EXPECT_EQ(a[4].arg_type, 2u);
  EXPECT_EQ(a[4].reg_off, 104);
  EXPECT_EQ(a[4].val_off, 0u);
  EXPECT_EQ(a[5].reg_off, 64);
  EXPECT_EQ(a[5].arg_bitshift, 32);
  EXPECT_EQ(a[6].reg_off, 24);
  EXPECT_EQ(a[6].val_off, 0x20u);
  // no arguments at all is a probe too
  auto none = parse_usdt_args("");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->arg_cnt, 0);
}

TEST(UsdtArgs, FormsItCannotReadAreRefused) {
  EXPECT_FALSE(parse_usdt_args("8@%rip"));
  EXPECT_FALSE(parse_usdt_args("8@foo(%rip)"));
  EXPECT_FALSE(parse_usdt_args("8@(%rax,%rbx,8)"));
  EXPECT_FALSE(parse_usdt_args("3@%rax"));
  EXPECT_FALSE(parse_usdt_args("8@%xmm0"));
  EXPECT_FALSE(parse_usdt_args("8%rax"));
  EXPECT_FALSE(parse_usdt_args("8@$x"));
  EXPECT_FALSE(parse_usdt_args("8@%rax 8@%rax 8@%rax 8@%rax 8@%rax 8@%rax 8@%rax 8@%rax 8@%rax 8@%rax 8@%rax "
                               "8@%rax 8@%rax"));  // 13 > the spec's 12
}

// The stand-in allocator's probes: one site each, the nop's file offset
// and its semaphore's, and the specs of the arguments where its compiler
// placed them (4 and 1; "-8@-24(%rbp) -1@$0 -8@%rbx -8@$0" with gcc 12 -O2).
TEST(UsdtSites, TheStandInAllocatorsProbes) {
  auto e = ElfSymbols::open(std::string(CAUSEWAY_BINARY_DIR) + "/workloads/lib/libc10_cuda.so.1");
  ASSERT_NE(e, nullptr);
  for (const auto& u : e->usdt_probes()) {
    auto sites = usdt_sites(*e, "pytorch", u.name);
    ASSERT_EQ(sites.size(), 1u) << u.name;
    EXPECT_EQ(std::optional<uint64_t>(sites[0].offset), e->offset_of_vaddr(u.pc));
    EXPECT_EQ(std::optional<uint64_t>(sites[0].ref_ctr), e->offset_of_vaddr(u.semaphore));
    EXPECT_NE(sites[0].ref_ctr, 0u);
    ASSERT_EQ(sites[0].spec.arg_cnt, u.name == "malloc" ? 4 : 1);
    auto own = parse_usdt_args(u.args);
    ASSERT_TRUE(own) << u.args;
    for (int i = 0; i < sites[0].spec.arg_cnt; i++) {
      EXPECT_EQ(sites[0].spec.args[i].arg_type, own->args[i].arg_type) << u.args;
      EXPECT_EQ(sites[0].spec.args[i].reg_off, own->args[i].reg_off) << u.args;
      EXPECT_EQ(sites[0].spec.args[i].val_off, own->args[i].val_off) << u.args;
    }
    // the pointer (the first argument) is 8 bytes, signed, wherever it is
    EXPECT_TRUE(sites[0].spec.args[0].arg_signed);
    EXPECT_EQ(sites[0].spec.args[0].arg_bitshift, 0);
  }
  EXPECT_TRUE(usdt_sites(*e, "pytorch", "realloc").empty());
  EXPECT_FALSE(e->section_addr(".probes").value_or(0) == 0);
  EXPECT_FALSE(e->section_addr(".no-such-section"));
}
