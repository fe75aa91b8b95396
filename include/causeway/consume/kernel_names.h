// SPDX-License-Identifier: Apache-2.0
#pragma once
// Kernel names for launches. A runtime launch carries the host-stub pointer:
// named by its __cudaRegisterFunction registration when seen, else by the
// ELF symbol of the mapping that holds it. A driver launch carries a
// CUfunction (or, in CUDA 12+, a CUkernel): named by the cuModuleGetFunction /
// cuLibraryGetKernel / cuKernelGetFunction call that produced the handle.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "causeway/consume/python/native_symbolizer.h"

namespace causeway::consume {

class KernelNameResolver {
 public:
  void on_register_function(uint32_t pid, uint64_t host_stub, std::string device_name);
  void on_handle_name(uint32_t pid, uint64_t handle, std::string name);
  // cuKernelGetFunction: the CUfunction inherits the CUkernel's name.
  void on_kernel_function(uint32_t pid, uint64_t kernel, uint64_t function);

  std::string for_host_stub(uint32_t pid, uint64_t host_stub);
  std::string for_handle(uint32_t pid, uint64_t handle) const;
  void forget_process(uint32_t pid);

 private:
  using Key = std::pair<uint32_t, uint64_t>;
  // A name as registered, demangled on first use (then kept so).
  struct Name {
    mutable std::string name;
    mutable bool demangled = false;
    const std::string& text() const;
  };
  std::map<Key, Name> stubs_, handles_;
  python::NativeSymbolizer symbolizer_;
  int misses_logged_ = 0;
};

// A NUL-terminated string from another process's memory (process_vm_readv),
// at most `max` bytes; empty when unreadable.
std::string read_process_string(uint32_t pid, uint64_t addr, size_t max = 4096);
// A kernel's name as the call's argument points to it, read after the call
// (when its batch is drained): a JIT's name (CuPy's, Triton's) is often a
// temporary of the caller's, freed and reused by then. Anything but
// printable ASCII is such a reuse: no name rather than its bytes.
std::string read_symbol_name(uint32_t pid, uint64_t addr);
// Printable ASCII only: what a symbol name is (freed memory read back is not).
bool is_symbol_text(std::string_view s);

}  // namespace causeway::consume
