// SPDX-License-Identifier: Apache-2.0
#pragma once
// Reading an ELF file's symbol tables (.symtab and .dynsym) and load segments:
// find a symbol's address by name (_PyRuntime, PyCode_Type) and the function
// that contains an address (native stack frames). Every offset read from the
// file is range-checked: a truncated or hostile file yields no symbols, never
// a crash.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace causeway::discover {

struct ElfSymbol {
  std::string_view name;  // points into the mapped file: valid while its ElfSymbols lives
  uint64_t value = 0;  // link-time virtual address
  uint64_t size = 0;
  bool is_function = false;
  bool non_default_version = false;  // name@VER beside a default name@@VER2: not what the name means
};

// A USDT probe (a SystemTap SDT note, .note.stapsdt): where the nop sits, the
// semaphore user space must raise for the probe's code to run (0: none), and
// how to find its arguments ("-8@%rax -1@%dl").
struct ElfUsdtProbe {
  std::string provider, name;
  uint64_t pc = 0, base = 0, semaphore = 0;
  std::string args;
};

struct ElfLoadSegment {
  uint64_t vaddr = 0, offset = 0, filesz = 0, memsz = 0;
  bool executable = false;
};

class ElfSymbols {
 public:
  ~ElfSymbols();
  ElfSymbols(const ElfSymbols&) = delete;
  ElfSymbols& operator=(const ElfSymbols&) = delete;
  // nullptr when the file cannot be opened or is not a 64-bit ELF.
  static std::unique_ptr<ElfSymbols> open(const std::string& path);
  // From bytes in memory (tests).
  static std::unique_ptr<ElfSymbols> parse(std::vector<uint8_t> bytes);

  bool is_shared() const { return type_dyn_; }  // ET_DYN: addresses are relative to the load bias
  const std::vector<ElfLoadSegment>& segments() const { return segments_; }

  std::optional<uint64_t> symbol_value(std::string_view name) const;
  // The function symbol containing vaddr (nearest preceding when sizes are 0).
  const ElfSymbol* function_at(uint64_t vaddr) const;
  // Link-time address of a file offset, via the load segment that maps it.
  std::optional<uint64_t> vaddr_of_offset(uint64_t file_offset) const;
  // File offset of a link-time address (where a uprobe on it goes).
  std::optional<uint64_t> offset_of_vaddr(uint64_t vaddr) const;
  // The bytes at a link-time address inside the file (initialized data only).
  std::optional<std::vector<uint8_t>> read_vaddr(uint64_t vaddr, size_t n) const;
  size_t symbol_count() const { return symbols_.size(); }
  const std::vector<ElfUsdtProbe>& usdt_probes() const { return usdt_; }
  bool has_usdt(std::string_view provider, std::string_view name) const;
  // The link-time address of the section of that name.
  std::optional<uint64_t> section_addr(std::string_view name) const;

 private:
  ElfSymbols() = default;
  void load();
  bool type_dyn_ = false;
  std::vector<uint8_t> owned_;          // parse(): the bytes; open(): empty (mmap)
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  void* map_ = nullptr;
  std::vector<ElfLoadSegment> segments_;
  std::vector<ElfSymbol> symbols_;      // all named symbols
  std::vector<size_t> functions_;       // indexes into symbols_, sorted by value
  std::vector<ElfUsdtProbe> usdt_;
  void load_usdt_notes(uint64_t off, uint64_t size);
};

// True when `path` is an ELF file that defines `symbol` (an import is not a
// definition): recognises NCCL linked into libtorch_cuda.so.
bool elf_exports(const std::string& path, const std::string& symbol);
// The link-time value of a defined symbol; nullopt if the file is not ELF or lacks it.
std::optional<uint64_t> elf_symbol_value(const std::string& path, const std::string& symbol);

// "_ZN3foo3barEv" -> "foo::bar()"; other names are returned unchanged.
std::string demangle(const std::string& name);

}  // namespace causeway::discover
