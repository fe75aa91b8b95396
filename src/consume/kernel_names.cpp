// SPDX-License-Identifier: Apache-2.0
#include "causeway/consume/kernel_names.h"

#include <spdlog/spdlog.h>
#include <sys/uio.h>

#include <cstdint>
#include <cstring>

namespace causeway::consume {

// Names are kept as registered and demangled when first asked for: a
// framework registers every kernel it has at start-up (59k in 4 PyTorch
// ranks, ~1 s), most never launched, and the drain must keep up meanwhile.
void KernelNameResolver::on_register_function(uint32_t pid, uint64_t host_stub, std::string name) {
  if (!name.empty()) stubs_[{pid, host_stub}] = Name{std::move(name), false};
}

void KernelNameResolver::on_handle_name(uint32_t pid, uint64_t handle, std::string name) {
  if (handle && !name.empty()) handles_[{pid, handle}] = Name{std::move(name), false};
}

const std::string& KernelNameResolver::Name::text() const {
  if (!demangled) {
    name = discover::demangle(name);
    demangled = true;
  }
  return name;
}

void KernelNameResolver::on_kernel_function(uint32_t pid, uint64_t kernel, uint64_t function) {
  auto it = handles_.find({pid, kernel});
  if (it != handles_.end() && function) handles_[{pid, function}] = it->second;
}

std::string KernelNameResolver::for_host_stub(uint32_t pid, uint64_t stub) {
  auto it = stubs_.find({pid, stub});
  if (it != stubs_.end()) return it->second.text();
  std::string name;
  // The host stub is a function of its own: the symbol that contains it.
  if (auto frames = symbolizer_.symbolize(pid, &stub, 1); !frames.empty()) name = frames[0].func;
  // Cache misses too: one ELF lookup per distinct stub, not per launch.
  stubs_[{pid, stub}] = Name{name, true};
  if (name.empty() && misses_logged_ < 5) {
    misses_logged_++;
    spdlog::debug("no kernel name for host stub {:#x} in pid {} ({} stubs known)", stub, pid,
                  stubs_.size());
  }
  return name;
}

std::string KernelNameResolver::for_handle(uint32_t pid, uint64_t handle) const {
  auto it = handles_.find({pid, handle});
  return it == handles_.end() ? std::string() : it->second.text();
}

void KernelNameResolver::forget_process(uint32_t pid) {
  auto drop = [pid](std::map<Key, Name>& m) {
    // Not {pid + 1, 0}: pid 0xffffffff (a corrupt record) wraps to 0 and the
    // range would run backwards (found by fuzz_event_decoder).
    m.erase(m.lower_bound({pid, 0}), m.upper_bound({pid, UINT64_MAX}));
  };
  drop(stubs_);
  drop(handles_);
  symbolizer_.forget(pid);
}

std::string read_process_string(uint32_t pid, uint64_t addr, size_t max) {
  std::string out;
  char buf[256];
  while (addr && out.size() < max) {
    // Never read across a page boundary in one go: the next page may be unmapped.
    size_t chunk = std::min(sizeof buf, size_t(4096 - (addr & 4095)));
    struct iovec local = {buf, chunk}, remote = {reinterpret_cast<void*>(addr), chunk};
    ssize_t n = process_vm_readv(pid_t(pid), &local, 1, &remote, 1, 0);
    if (n <= 0) break;
    const void* nul = std::memchr(buf, 0, size_t(n));
    if (nul) {
      out.append(buf, size_t(static_cast<const char*>(nul) - buf));
      return out;
    }
    out.append(buf, size_t(n));
    addr += uint64_t(n);
  }
  return out.size() >= max ? std::string() : out;
}

bool is_symbol_text(std::string_view s) {
  for (unsigned char ch : s)
    if (ch < 0x20 || ch > 0x7e) return false;
  return true;
}

std::string read_symbol_name(uint32_t pid, uint64_t addr) {
  std::string s = read_process_string(pid, addr);
  return is_symbol_text(s) ? s : std::string();
}

}  // namespace causeway::consume
