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
