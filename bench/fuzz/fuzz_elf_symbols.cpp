// SPDX-License-Identifier: Apache-2.0
// Mutated ELF files -> discover::ElfSymbols (the reader attach, the kernel-name
// resolver, the native symbolizer and the Python walker share), then every
// lookup it offers. parse() takes the bytes the same way open() maps a file.
#include <cstdint>
#include <string>
#include <vector>

#include "causeway/discover/elf_symbols.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto elf = causeway::discover::ElfSymbols::parse(std::vector<uint8_t>(data, data + size));
  if (size > 4) causeway::discover::demangle(std::string(reinterpret_cast<const char*>(data), size));
  if (!elf) return 0;
  for (const char* name : {"cudaMalloc", "cuLaunchKernel", "ncclAllReduce", "_PyRuntime", ""})
    if (auto v = elf->symbol_value(name)) elf->read_vaddr(*v, 64);
  for (uint64_t x : {uint64_t(0), uint64_t(0x40), uint64_t(0x1000), uint64_t(size / 2), ~uint64_t(0)}) {
    elf->function_at(x);
    elf->vaddr_of_offset(x);
    elf->offset_of_vaddr(x);
    elf->read_vaddr(x, 16);
  }
  for (const auto& seg : elf->segments()) {
    elf->function_at(seg.vaddr);
    elf->read_vaddr(seg.vaddr, 256);
  }
  return 0;
}
