// SPDX-License-Identifier: Apache-2.0
// The ELF symbol reader on the real CUDA libraries and on this test binary.
#include <link.h>
#include <gtest/gtest.h>

#include <fstream>

#include "causeway/discover/elf_symbols.h"
#include "causeway/attach/bpf_checks.h"

using namespace causeway::discover;

TEST(ElfSymbols, RealNcclExportsCollectives) {
  EXPECT_TRUE(elf_exports("/usr/local/cuda/lib64/libnccl.so.2", "ncclAllReduce"));
  EXPECT_TRUE(elf_exports("/usr/local/cuda/lib64/libnccl.so.2", "ncclCommInitRank"));
  EXPECT_FALSE(elf_exports("/usr/local/cuda/lib64/libnccl.so.2", "ncclNoSuchCollective"));
  EXPECT_TRUE(elf_exports("/usr/local/cuda/lib64/libcudart.so.13", "cudaMalloc"));
  EXPECT_FALSE(elf_exports("/usr/local/cuda/lib64/libcudart.so.13", "ncclAllReduce"));
}

TEST(ElfSymbols, ImportsAreNotExports) {
  // libcudart calls dlopen but does not define it.
  EXPECT_FALSE(elf_exports("/usr/local/cuda/lib64/libcudart.so.13", "dlopen"));
}

TEST(ElfSymbols, NotElfOrMissing) {
  std::string path = ::testing::TempDir() + "cw_not_elf";
  std::ofstream(path) << "\x7f" "ELF but not really";
  EXPECT_FALSE(elf_exports(path, "ncclAllReduce"));
  EXPECT_FALSE(elf_symbol_value(path, "main").has_value());
  EXPECT_FALSE(elf_exports("/nonexistent/libnccl.so.2", "ncclAllReduce"));
  std::remove(path.c_str());
}

namespace {
int main_program_bias(dl_phdr_info* info, size_t, void* out) {
  *static_cast<uintptr_t*>(out) = info->dlpi_addr;  // the first entry is the executable
  return 1;
}
}  // namespace

// The value in this binary's symbol table + its load bias is the function's
// runtime address.
TEST(ElfSymbols, SymbolValueOfAFunctionInThisBinary) {
  uintptr_t bias = 0;
  dl_iterate_phdr(main_program_bias, &bias);
  auto value = elf_symbol_value("/proc/self/exe", "causeway_check_probe_target");
  ASSERT_TRUE(value.has_value());
  EXPECT_EQ(*value + bias, reinterpret_cast<uintptr_t>(&causeway_check_probe_target));
  EXPECT_FALSE(elf_symbol_value("/proc/self/exe", "causeway_no_such_symbol_here").has_value());
}
