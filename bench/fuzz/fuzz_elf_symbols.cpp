// SPDX-License-Identifier: Apache-2.0
// Mutated ELF files -> discover::ElfSymbolTable (it reads a path, as attach
// and the native symbolizer do), then every lookup it offers.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "causeway/discover/elf_symbol_table.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/dev/shm/cw_fuzz_elf_" + std::to_string(getpid());
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  causeway::discover::ElfSymbolTable table(path);
  uint64_t vaddr = 0;
  for (uint64_t off : {uint64_t(0), uint64_t(0x40), uint64_t(0x1000), uint64_t(size / 2), ~uint64_t(0)}) {
    table.at_file_offset(off, &vaddr);
    table.at_vaddr(off);
  }
  for (const char* name : {"cudaMalloc", "cuLaunchKernel", "ncclAllReduce", "main", ""})
    table.file_offset_of(name);
  if (size > 4) causeway::discover::demangle(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
