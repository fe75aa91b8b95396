// SPDX-License-Identifier: Apache-2.0
#pragma once
// An ELF file mapped read-only: its load segments, all its symbols (.symtab
// and .dynsym, objects too) and its initialized data: where _PyRuntime and
// PyCode_Type are, what _PyRuntime's _Py_DebugOffsets say, and the function
// that contains an address (native stack frames of Python processes). Every offset read from the
// file is range-checked: a truncated or hostile file yields no symbols, never
// a crash.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace causeway::discover {

struct ElfImageSymbol {
  std::string_view name;  // points into the mapped file: valid while its ElfImage lives
  uint64_t value = 0;  // link-time virtual address
  uint64_t size = 0;
  bool is_function = false;
};

struct ElfLoadSegment {
  uint64_t vaddr = 0, offset = 0, filesz = 0, memsz = 0;
  bool executable = false;
};

class ElfImage {
 public:
  ~ElfImage();
  ElfImage(const ElfImage&) = delete;
  ElfImage& operator=(const ElfImage&) = delete;
  // nullptr when the file cannot be opened or is not a 64-bit ELF.
  static std::unique_ptr<ElfImage> open(const std::string& path);
  // From bytes in memory (tests).
  static std::unique_ptr<ElfImage> parse(std::vector<uint8_t> bytes);

  bool is_shared() const { return type_dyn_; }  // ET_DYN: addresses are relative to the load bias
  const std::vector<ElfLoadSegment>& segments() const { return segments_; }

  std::optional<uint64_t> symbol_value(std::string_view name) const;
  // The function symbol containing vaddr (nearest preceding when sizes are 0).
  const ElfImageSymbol* function_at(uint64_t vaddr) const;
  // Link-time address of a file offset, via the load segment that maps it.
  std::optional<uint64_t> vaddr_of_offset(uint64_t file_offset) const;
  // The bytes at a link-time address inside the file (initialized data only).
  std::optional<std::vector<uint8_t>> read_vaddr(uint64_t vaddr, size_t n) const;
  size_t symbol_count() const { return symbols_.size(); }

 private:
  ElfImage() = default;
  void load();
  bool type_dyn_ = false;
  std::vector<uint8_t> owned_;          // parse(): the bytes; open(): empty (mmap)
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  void* map_ = nullptr;
  std::vector<ElfLoadSegment> segments_;
  std::vector<ElfImageSymbol> symbols_;      // all named symbols
  std::vector<size_t> functions_;       // indexes into symbols_, sorted by value
};

}  // namespace causeway::discover
