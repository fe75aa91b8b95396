// SPDX-License-Identifier: Apache-2.0
#include "causeway/discover/processes.h"

#include <fstream>
#include <iterator>

namespace causeway::discover {

std::optional<store::ProcessInfo> read_process_info(uint32_t pid, const std::string& proc_root) {
  const std::string dir = proc_root + "/" + std::to_string(pid);
  std::ifstream comm(dir + "/comm");
  if (!comm) return std::nullopt;
  store::ProcessInfo p;
  p.pid = pid;
  std::getline(comm, p.comm);
  std::ifstream cmd(dir + "/cmdline");
  p.cmdline.assign(std::istreambuf_iterator<char>(cmd), std::istreambuf_iterator<char>());
  for (auto& c : p.cmdline)
    if (c == 0) c = ' ';
  while (!p.cmdline.empty() && p.cmdline.back() == ' ') p.cmdline.pop_back();
  std::ifstream cg(dir + "/cgroup");
  std::string line;
  while (std::getline(cg, line))
    if (line.rfind("0::", 0) == 0) p.cgroup = line.substr(3);
  std::ifstream status(dir + "/status");
  while (std::getline(status, line))
    if (line.rfind("PPid:", 0) == 0) p.ppid = uint32_t(std::stoul(line.substr(5)));
  return p;
}

}  // namespace causeway::discover
