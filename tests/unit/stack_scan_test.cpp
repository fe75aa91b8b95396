// SPDX-License-Identifier: Apache-2.0
// Calls found on a thread's stack when the trace attaches (discover/stack_scan.h):
// the syscall file's registers, and which probed call a stack shows.
#include "causeway/discover/stack_scan.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace causeway;
using namespace causeway::discover;

namespace {

uint16_t op(const char* name) { return find_op(std::string_view(name))->id; }

// A stack of 8-byte words from sp.
StackSnapshot stack_of(uint64_t sp, uint64_t pc, std::vector<uint64_t> words) {
  StackSnapshot s;
  s.sp = sp;
  s.pc = pc;
  s.bytes.resize(words.size() * 8);
  std::memcpy(s.bytes.data(), words.data(), s.bytes.size());
  return s;
}

// libcuda's cuCtxSynchronize, libcudart's cudaDeviceSynchronize, NCCL's
// ncclAllReduce and libcudart's cudaLaunchKernel, as mapped.
const std::vector<CodeRange> kCode = {
    {0x1000, 0x1100, op("cuCtxSynchronize")},
    {0x2000, 0x2200, op("cudaDeviceSynchronize")},
    {0x2400, 0x2500, op("cudaLaunchKernel")},
    {0x3000, 0x3400, op("ncclAllReduce")},
};

}  // namespace

TEST(StackScan, TheSyscallFileGivesSpAndPcOfABlockedThreadOnly) {
  auto r = parse_syscall_file("202 0x7f1c2a3b4c50 0x80 0x0 0x0 0x0 0x0 0x7ffc5e6f7a80 0x7f1c2a1234ab\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->first, 0x7ffc5e6f7a80u);
  EXPECT_EQ(r->second, 0x7f1c2a1234abu);
  EXPECT_FALSE(parse_syscall_file("running\n"));
  EXPECT_FALSE(parse_syscall_file("-1 0x7ffc5e6f7a80 0x7f1c2a1234ab\n"));  // blocked outside a system call
  EXPECT_FALSE(parse_syscall_file(""));
  EXPECT_FALSE(parse_syscall_file("202 0x1 0x80 0x0 0x0 0x0 0x0 0x0 0x0\n"));
}

// The driver's sync called by the runtime's: the call the program made is
// the runtime's, the outer one within reach.
TEST(StackScan, TheCallIsTheOutermostOfAHigherLayerNearby) {
  auto s = stack_of(0x7000, 0x9999, {0x4242, 0x1050, 0x0, 0x2080, 0x55});
  EXPECT_EQ(call_on_stack(s, kCode), op("cudaDeviceSynchronize"));
  // The pc itself inside the driver's function (a spin in it).
  auto spin = stack_of(0x7000, 0x1010, {0x4242, 0x2080});
  EXPECT_EQ(call_on_stack(spin, kCode), op("cudaDeviceSynchronize"));
  // The runtime's word further than kCallerGap out: not this call's caller.
  std::vector<uint64_t> far(kCallerGap / 8 + 4, 0);
  far[0] = 0x1050;
  far.back() = 0x2080;
  EXPECT_EQ(call_on_stack(stack_of(0x7000, 0x9999, far), kCode), op("cuCtxSynchronize"));
}

// A word of the same layer, or a lower one, further out is a stale slot of
// an earlier call: the innermost call stands.
TEST(StackScan, AStaleWordOfTheSameLayerIsNotTheCaller) {
  EXPECT_EQ(call_on_stack(stack_of(0x7000, 0x9999, {0x2080, 0x2410}), kCode), op("cudaDeviceSynchronize"));
  EXPECT_EQ(call_on_stack(stack_of(0x7000, 0x9999, {0x2080, 0x1050}), kCode), op("cudaDeviceSynchronize"));
  // NCCL over the runtime: a higher layer.
  EXPECT_EQ(call_on_stack(stack_of(0x7000, 0x9999, {0x1050, 0x2080, 0x3100}), kCode), op("ncclAllReduce"));
}

// A function's first byte is a pointer to it, not a return into it; its end
// is (a call as its last instruction). Nothing probed: no call.
TEST(StackScan, OnlyReturnAddressesCount) {
  EXPECT_FALSE(call_on_stack(stack_of(0x7000, 0x9999, {0x1000, 0x2000, 0x42}), kCode));
  EXPECT_EQ(call_on_stack(stack_of(0x7000, 0x9999, {0x1100}), kCode), op("cuCtxSynchronize"));
  EXPECT_FALSE(call_on_stack(stack_of(0x7000, 0x9999, {0x1101, 0x0fff}), kCode));
  EXPECT_FALSE(call_on_stack(stack_of(0x7000, 0x9999, {}), kCode));
}
