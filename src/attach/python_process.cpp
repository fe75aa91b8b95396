// SPDX-License-Identifier: Apache-2.0
#include "causeway/attach/python_process.h"

#include <bpf/bpf.h>
#include <spdlog/spdlog.h>

#include <mutex>
#include <set>

#include "causeway/discover/python_runtime.h"

namespace causeway::attach {

std::optional<discover::PythonRuntime> register_python_process(int map_fd, uint32_t pid,
                                                               const std::string& proc_root) {
  std::string why;
  auto rt = discover::find_python_runtime(pid, &why, proc_root);
  if (!rt) {
    // Only a process that has an interpreter but one we cannot walk is worth a warning.
    if (why.rfind("no _PyRuntime", 0) != 0 && why != "cannot read maps") {
      static std::mutex mu;
      static std::set<std::string> warned;
      std::lock_guard lock(mu);
      if (warned.insert(why).second)
        spdlog::warn("pid {}: no Python frames: {}", pid, why);
    }
    return std::nullopt;
  }
  if (bpf_map_update_elem(map_fd, &pid, &rt->bpf, BPF_ANY) != 0) {
    spdlog::warn("pid {}: cannot register Python {}.{} with the stack walker", pid, rt->major,
                 rt->minor);
    return std::nullopt;
  }
  spdlog::debug("pid {}: Python {}.{} runtime at {:#x} in {}", pid, rt->major, rt->minor,
                rt->runtime_addr, rt->elf_path);
  return rt;
}

void unregister_python_process(int map_fd, uint32_t pid) {
  bpf_map_delete_elem(map_fd, &pid);
}

}  // namespace causeway::attach
