// SPDX-License-Identifier: Apache-2.0
// A kernel's name read from the caller's memory after the call: a JIT's
// temporary freed and reused by then (seen on the H100: CuPy's name for its
// kernel read back as a freed block's free-list pointer) gives no name.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>

#include "causeway/consume/kernel_names.h"

using namespace causeway::consume;

TEST(SymbolName, PrintableNamesAreReadAndReusedMemoryIsNot) {
  static const char name[] = "spin_forever";
  static const unsigned char reused[] = {0x90, 0xc6, 0xa0, 0xd9, 0xf1, 0x7f, 0x00};
  const uint32_t self = uint32_t(getpid());
  EXPECT_EQ(read_symbol_name(self, reinterpret_cast<uintptr_t>(name)), "spin_forever");
  EXPECT_EQ(read_process_string(self, reinterpret_cast<uintptr_t>(reused)).size(), 6u);
  EXPECT_EQ(read_symbol_name(self, reinterpret_cast<uintptr_t>(reused)), "");
  EXPECT_EQ(read_symbol_name(self, 0), "");
}

// Registered names are kept as registered and demangled when first asked
// for (a framework registers tens of thousands at start-up, most never
// launched); a handle's name likewise, and a CUfunction takes its kernel's.
TEST(SymbolName, RegisteredNamesAreDemangledWhenAskedFor) {
  KernelNameResolver names;
  const std::string mangled = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_";
  const std::string demangled =
      "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> "
      ">(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)";
  names.on_register_function(7, 0x1000, mangled);
  names.on_register_function(7, 0x2000, "plain_c_kernel");
  names.on_handle_name(7, 0xa0, mangled);
  names.on_kernel_function(7, 0xa0, 0xb0);
  EXPECT_EQ(names.for_host_stub(7, 0x1000), demangled);
  EXPECT_EQ(names.for_host_stub(7, 0x1000), demangled);  // asked again: the same, not demangled twice over
  EXPECT_EQ(names.for_host_stub(7, 0x2000), "plain_c_kernel");
  EXPECT_EQ(names.for_handle(7, 0xb0), demangled);
  EXPECT_EQ(names.for_handle(7, 0xa0), demangled);
  EXPECT_EQ(names.for_handle(8, 0xa0), "");
  names.forget_process(7);
  EXPECT_EQ(names.for_handle(7, 0xa0), "");
}
