// SPDX-License-Identifier: Apache-2.0
#include "causeway/consume/python/native_symbolizer.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace causeway::consume::python {

namespace {

// Folders where the files of a Python -> GPU library stack usually live, for
// a module only known by name (its process is gone, no path was seen).
const char* const kLibraryDirs[] = {"/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib64",
                                    "/usr/lib", "/lib", "/usr/local/lib", "/usr/bin",
                                    "/usr/local/bin", "/usr/local/cuda/lib64"};

uint64_t dev_key(uint32_t major_n, uint32_t minor_n) { return uint64_t(major_n) << 32 | minor_n; }

// The kernel's dev_t (major << 20 | minor), as bpf reads s_dev.
uint64_t kernel_dev_key(uint32_t kdev) { return dev_key(kdev >> 20, kdev & 0xfffff); }

bool same_file(const std::string& path, uint64_t devk, uint64_t ino) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && st.st_ino == ino &&
         dev_key(major(st.st_dev), minor(st.st_dev)) == devk;
}

std::string parent_dir(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos || slash == 0 ? std::string("/") : path.substr(0, slash);
}

}  // namespace

const discover::MappedRegion* NativeSymbolizer::mapping(uint32_t pid, uint64_t addr, bool& reread) {
  auto it = maps_.find(pid);
  if (it == maps_.end()) {
    it = maps_.emplace(pid, discover::read_proc_maps(pid, proc_root_)).first;
    remember_maps(it->second);
  }
  for (const auto& m : it->second)
    if (addr >= m.start && addr < m.end) return &m;
  if (reread) return nullptr;  // maps re-read at most once per stack (dlopen since last read)
  reread = true;
  auto fresh = discover::read_proc_maps(pid, proc_root_);
  if (fresh.empty()) return nullptr;  // gone: keep what was read while it lived
  it->second = std::move(fresh);
  remember_maps(it->second);
  for (const auto& m : it->second)
    if (addr >= m.start && addr < m.end) return &m;
  return nullptr;
}

void NativeSymbolizer::remember_maps(const std::vector<discover::MappedRegion>& maps) {
  for (const auto& m : maps) {
    if (m.path.empty() || m.path[0] != '/' || !m.inode) continue;
    auto [it, fresh] = paths_.try_emplace({dev_key(m.dev_major, m.dev_minor), m.inode}, m.path);
    if (fresh) dirs_.insert(parent_dir(m.path));
  }
}

void NativeSymbolizer::remember_process(uint32_t pid) {
  auto maps = discover::read_proc_maps(pid, proc_root_);
  if (maps.empty()) return;
  remember_maps(maps);
  maps_[pid] = std::move(maps);
}

void NativeSymbolizer::remember_file(const std::string& path) {
  struct stat st {};
  // A /proc/PID/map_files or /proc/PID/root path names the file only while
  // that process lives, and is no name to show.
  if (path.rfind("/proc/", 0) == 0 || stat(path.c_str(), &st) != 0) return;
  paths_.try_emplace({dev_key(major(st.st_dev), minor(st.st_dev)), st.st_ino}, path);
  dirs_.insert(parent_dir(path));
}

discover::ElfSymbols* NativeSymbolizer::elf_for(uint32_t pid, const discover::MappedRegion& m) {
  auto key = std::make_pair(m.path, m.inode);
  auto it = elfs_.find(key);
  if (it != elfs_.end()) return it->second.get();
  char range[64];
  std::snprintf(range, sizeof(range), "%" PRIx64 "-%" PRIx64, m.start, m.end);
  std::string pid_dir = proc_root_ + "/" + std::to_string(pid);
  std::unique_ptr<discover::ElfSymbols> elf;
  struct stat st {};
  for (const std::string& p : {pid_dir + "/map_files/" + range, m.path, pid_dir + "/root" + m.path}) {
    if (stat(p.c_str(), &st) == 0 && st.st_ino == m.inode && (elf = discover::ElfSymbols::open(p)))
      break;
  }
  return elfs_.emplace(key, std::move(elf)).first->second.get();
}

discover::ElfSymbols* NativeSymbolizer::elf_for_module(uint32_t pid, const cw_native_module& m,
                                                       std::string& path) {
  const uint64_t devk = kernel_dev_key(m.dev);
  const FileKey key{devk, m.ino};
  auto it = modules_.find(key);
  if (it == modules_.end()) {
    ModuleFile f;
    const std::string name(m.name, strnlen(m.name, sizeof m.name));
    // A process seen for the first time: its maps give every file's path.
    if (!maps_.count(pid)) remember_process(pid);
    std::vector<std::string> candidates;
    if (auto p = paths_.find(key); p != paths_.end()) candidates.push_back(p->second);
    if (!name.empty() && name.find('/') == std::string::npos) {
      for (const auto& d : dirs_) candidates.push_back(d + "/" + name);
      for (const char* d : kLibraryDirs) candidates.push_back(std::string(d) + "/" + name);
    }
    for (const auto& c : candidates) {
      if (same_file(c, devk, m.ino) && (f.elf = discover::ElfSymbols::open(c))) {
        f.path = c;
        break;
      }
    }
    if (!f.elf) {
      // The process's own view of the file (another mount namespace), while it lives.
      char range[64];
      std::snprintf(range, sizeof(range), "%llx-%llx", static_cast<unsigned long long>(m.start),
                    static_cast<unsigned long long>(m.end));
      f.elf = discover::ElfSymbols::open(proc_root_ + "/" + std::to_string(pid) + "/map_files/" + range);
      if (f.elf) f.path = paths_.count(key) ? paths_[key] : name;
    }
    if (f.path.empty()) f.path = name;
    it = modules_.emplace(key, std::move(f)).first;
  }
  path = it->second.path;
  return it->second.elf.get();
}

model::StackFrame NativeSymbolizer::frame_at(discover::ElfSymbols* elf, uint64_t off, std::string module) {
  model::StackFrame f;
  f.kind = "native";
  f.module = std::move(module);
  const discover::ElfSymbol* sym = nullptr;
  if (elf)
    if (auto v = elf->vaddr_of_offset(off)) sym = elf->function_at(*v);
  if (sym) {
    f.func = discover::demangle(std::string(sym->name));
  } else {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "0x%" PRIx64, off);  // file offset: symbolize offline
    f.func = buf;
  }
  return f;
}

model::Stack NativeSymbolizer::symbolize(const cw_pystack_event& e) {
  model::Stack out;
  const uint32_t pid = e.hdr.pid;
  const size_t n = std::min<uint32_t>(e.native_n, CW_NATIVE_MAX_FRAMES);
  bool reread = false;
  for (size_t i = 0; i < n; i++) {
    // A return address points after the call: look up the call itself.
    const uint64_t a = i == 0 ? e.native[i] : e.native[i] - 1;
    const uint8_t idx = e.module_of[i];
    if (idx < e.nmodules && idx < CW_STACK_MAX_MODULES) {
      const cw_native_module& m = e.modules[idx];
      std::string path;
      discover::ElfSymbols* elf = elf_for_module(pid, m, path);
      out.push_back(frame_at(elf, a - m.start + m.file_offset, path));
      continue;
    }
    if (idx == CW_ANON_MODULE) {
      model::StackFrame f;
      f.kind = "native";
      f.func = "[anon]";  // JIT code
      out.push_back(std::move(f));
      continue;
    }
    const discover::MappedRegion* m = mapping(pid, a, reread);
    if (!m || !m->executable()) break;
    if (m->path.empty() || m->path[0] == '[') {
      model::StackFrame f;
      f.kind = "native";
      f.module = m->path;
      f.func = m->path.empty() ? "[anon]" : m->path;  // JIT code, [vdso]
      out.push_back(std::move(f));
      continue;
    }
    out.push_back(frame_at(elf_for(pid, *m), a - m->start + m->offset, m->path));
  }
  return out;
}

model::Stack NativeSymbolizer::symbolize(uint32_t pid, const uint64_t* addrs, size_t n) {
  cw_pystack_event e{};
  e.hdr.pid = pid;
  e.native_n = uint32_t(std::min<size_t>(n, CW_NATIVE_MAX_FRAMES));
  std::memcpy(e.native, addrs, e.native_n * sizeof(uint64_t));
  std::memset(e.module_of, CW_NO_MODULE, sizeof e.module_of);
  return symbolize(e);
}

}  // namespace causeway::consume::python
