// SPDX-License-Identifier: Apache-2.0
#pragma once
// Reading exported symbols from ELF files on disk: used to recognise NCCL
// linked into libtorch_cuda.so, and by tests to know where a function lives.
#include <cstdint>
#include <optional>
#include <string>

namespace causeway::discover {

// True when `path` is an ELF file whose .dynsym defines `symbol` (a defined,
// exported function or object, not an undefined import).
bool elf_exports(const std::string& path, const std::string& symbol);

// The st_value of a defined `symbol`, from .dynsym, else from .symtab (for a
// non-stripped executable). nullopt if the file is not ELF or lacks it.
std::optional<uint64_t> elf_symbol_value(const std::string& path, const std::string& symbol);

}  // namespace causeway::discover
