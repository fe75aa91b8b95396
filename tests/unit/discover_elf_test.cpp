// SPDX-License-Identifier: Apache-2.0
// The ELF symbol reader on the real CUDA libraries and on this test binary.
#include <link.h>
#include <gtest/gtest.h>

#include <algorithm>
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

// The SDT notes of a library that has them (the allocator stand-in, built as
// PyTorch's is: .note.stapsdt, semaphores in .probes), and of its build
// without them: provider, name, argument specs and a semaphore each.
TEST(ElfSymbols, UsdtNotesAreReadWithTheirSemaphoresAndArguments) {
  const std::string lib = std::string(CAUSEWAY_BINARY_DIR) + "/workloads/lib/libc10_cuda.so.1";
  auto e = ElfSymbols::open(lib);
  ASSERT_NE(e, nullptr);
  ASSERT_EQ(e->usdt_probes().size(), 2u);
  EXPECT_TRUE(e->has_usdt("pytorch", "malloc"));
  EXPECT_TRUE(e->has_usdt("pytorch", "free"));
  EXPECT_FALSE(e->has_usdt("pytorch", "realloc"));
  for (const auto& u : e->usdt_probes()) {
    EXPECT_EQ(u.base, 0u);
    EXPECT_NE(u.semaphore, 0u);
    // The probe's pc is inside a function of the file, its semaphore a data symbol.
    ASSERT_NE(e->function_at(u.pc), nullptr) << u.name;
    const size_t args = size_t(std::count(u.args.begin(), u.args.end(), '@'));
    EXPECT_EQ(args, u.name == "malloc" ? 4u : 1u) << u.args;
    EXPECT_EQ(u.args.substr(0, 3), "-8@") << u.args;
  }
  EXPECT_EQ(e->symbol_value(std::string("pytorch_") + "malloc_semaphore"),
            std::optional<uint64_t>(e->usdt_probes()[0].name == "malloc" ? e->usdt_probes()[0].semaphore
                                                                         : e->usdt_probes()[1].semaphore));
  auto plain = ElfSymbols::open(std::string(CAUSEWAY_BINARY_DIR) + "/workloads/lib/nosdt/libc10_cuda.so.1");
  ASSERT_NE(plain, nullptr);
  EXPECT_TRUE(plain->usdt_probes().empty());
}
