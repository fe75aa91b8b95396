// SPDX-License-Identifier: Apache-2.0
#include "causeway/discover/proc_maps.h"

#include <cinttypes>
#include <cstdio>
#include <fstream>

namespace causeway::discover {

bool parse_maps_line(const std::string& line, MappedRegion& out) {
  char perms[8] = {};
  unsigned dev_major = 0, dev_minor = 0;
  int path_at = 0;
  if (std::sscanf(line.c_str(), "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %x:%x %" SCNu64 " %n",
                  &out.start, &out.end, perms, &out.offset, &dev_major, &dev_minor, &out.inode,
                  &path_at) < 7)
    return false;
  out.perms = perms;
  out.dev_major = dev_major;
  out.dev_minor = dev_minor;
  out.path = path_at > 0 && size_t(path_at) <= line.size() ? line.substr(size_t(path_at)) : "";
  while (!out.path.empty() && (out.path.back() == '\n' || out.path.back() == ' ')) out.path.pop_back();
  return out.end > out.start;
}

std::vector<MappedRegion> parse_proc_maps(std::istream& in) {
  std::vector<MappedRegion> maps;
  std::string line;
  while (std::getline(in, line)) {
    MappedRegion r;
    if (parse_maps_line(line, r)) maps.push_back(std::move(r));
  }
  return maps;
}

std::vector<MappedRegion> read_proc_maps(uint32_t pid, const std::string& proc_root) {
  std::ifstream in(proc_root + "/" + std::to_string(pid) + "/maps");
  return parse_proc_maps(in);
}

uint64_t code_maps_signature(std::istream& maps) {
  // FNV-1a over the lines themselves: no parse, a few ms for a PyTorch
  // process's ~5,000 lines.
  uint64_t h = 1469598103934665603ull;
  bool any = false;
  std::string line;
  while (std::getline(maps, line)) {
    // "start-end perms offset dev inode path": perms' third letter, a path.
    const size_t sp = line.find(' ');
    if (sp == std::string::npos || sp + 3 >= line.size() || line[sp + 3] != 'x') continue;
    if (line.find('/', sp) == std::string::npos) continue;
    for (unsigned char c : line) h = (h ^ c) * 1099511628211ull;
    h = (h ^ '\n') * 1099511628211ull;
    any = true;
  }
  return any ? h : 1;
}

uint64_t code_maps_signature(uint32_t pid, const std::string& proc_root) {
  std::ifstream in(proc_root + "/" + std::to_string(pid) + "/maps");
  if (!in) return 0;
  return code_maps_signature(in);
}

}  // namespace causeway::discover
