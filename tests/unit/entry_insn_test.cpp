// SPDX-License-Identifier: Apache-2.0
// The class of a probed function's first instruction, which decides whether
// the kernel emulates it after the trap or single-steps it (what the probe
// costs: docs/performance.md §6e).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "causeway/discover/entry_insn.h"

using causeway::OpClass;
using namespace causeway::discover;

namespace {
EntryInsn of(std::vector<uint8_t> b) { return classify_entry_insn(b); }
}  // namespace

TEST(EntryInsn, TheInstructionsTheKernelEmulatesAreKnownByTheirBytes) {
  EXPECT_EQ(of({0x55, 0x48, 0x89, 0xe5}), EntryInsn::Push);        // push %rbp; mov %rsp,%rbp
  EXPECT_EQ(of({0x41, 0x57, 0x41, 0x56}), EntryInsn::Push);        // push %r15
  EXPECT_EQ(of({0xe9, 0x10, 0x00, 0x00, 0x00}), EntryInsn::Branch);  // jmp rel32 (a PLT-like thunk)
  EXPECT_EQ(of({0xeb, 0x05}), EntryInsn::Branch);                  // jmp rel8
  EXPECT_EQ(of({0xe8, 0, 0, 0, 0}), EntryInsn::Branch);            // call rel32
  EXPECT_EQ(of({0x74, 0x02}), EntryInsn::Branch);                  // je rel8
  EXPECT_EQ(of({0x0f, 0x85, 0, 0, 0, 0}), EntryInsn::Branch);      // jne rel32
  EXPECT_EQ(of({0x90, 0xc3}), EntryInsn::Nop);
  EXPECT_EQ(of({0x66, 0x90}), EntryInsn::Nop);
}

TEST(EntryInsn, MultiByteNopsEndbrAndTheRestAreTheirOwnClasses) {
  EXPECT_EQ(of({0x0f, 0x1f, 0x44, 0x00, 0x00}), EntryInsn::LongNop);        // nopl 0x0(%rax,%rax,1): a USDT site
  EXPECT_EQ(of({0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00}), EntryInsn::LongNop);  // nopw
  EXPECT_EQ(of({0xf3, 0x0f, 0x1e, 0xfa, 0x55}), EntryInsn::Endbr);          // endbr64 (CET builds)
  EXPECT_EQ(of({0x8b, 0x05, 0x16, 0x2a, 0x01, 0x00}), EntryInsn::Other);    // mov 0x12a16(%rip),%eax
  EXPECT_EQ(of({0x48, 0x83, 0xec, 0x08}), EntryInsn::Other);                // sub $0x8,%rsp
  EXPECT_EQ(of({0x48, 0xb8, 0xef, 0xbe}), EntryInsn::Other);                // movabs (truncated)
  EXPECT_EQ(of({0x41, 0x58}), EntryInsn::Other);                            // pop %r8, not a push
  EXPECT_EQ(of({0xf3, 0x0f, 0x1e}), EntryInsn::Other);                      // endbr64 cut short
  EXPECT_EQ(of({}), EntryInsn::Other);
  EXPECT_EQ(entry_insn_name(EntryInsn::Endbr), "endbr64");
  EXPECT_EQ(entry_insn_name(EntryInsn::LongNop), "nopl");
}

// The stand-in libcuda (workloads/lib/cuda.c, built -O1 with frame pointers,
// which gcc leaves out of leaf functions): cuStreamSynchronize is a leaf that
// returns a global's value, so it begins with a load; cuLaunchKernel calls
// getenv and usleep, so it begins by pushing the frame pointer.
TEST(EntryInsn, TheStandInDriversFunctionsAreReadFromTheFile) {
  const auto entries =
      probed_entries(std::string(CAUSEWAY_BINARY_DIR) + "/workloads/lib/libcuda.so.1", causeway::LibraryKind::Cuda);
  auto find = [&](const std::string& name) {
    return std::find_if(entries.begin(), entries.end(), [&](const ProbedEntry& e) { return e.symbol == name; });
  };
  ASSERT_NE(find("cuStreamSynchronize"), entries.end());
  EXPECT_EQ(find("cuStreamSynchronize")->insn, EntryInsn::Other);
  EXPECT_EQ(find("cuStreamSynchronize")->cls, OpClass::Sync);
  ASSERT_NE(find("cuLaunchKernel"), entries.end());
  EXPECT_EQ(find("cuLaunchKernel")->insn, EntryInsn::Push);
  EXPECT_EQ(find("cuLaunchKernel")->cls, OpClass::Launch);
  // Nothing that is not a driver function, and each function once.
  EXPECT_EQ(find("cudaLaunchKernel"), entries.end());
  for (const auto& e : entries)
    EXPECT_EQ(std::count_if(entries.begin(), entries.end(), [&](const ProbedEntry& x) { return x.symbol == e.symbol; }),
              1)
        << e.symbol;
  EXPECT_TRUE(probed_entries("/nonexistent/libcuda.so.1", causeway::LibraryKind::Cuda).empty());
}
