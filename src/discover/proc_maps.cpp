// SPDX-License-Identifier: Apache-2.0
#include "causeway/discover/proc_maps.h"

#include <cinttypes>
#include <cstdio>

namespace causeway::discover {

std::vector<MappedRegion> parse_proc_maps(std::istream& in) {
  std::vector<MappedRegion> regions;
  std::string line;
  while (std::getline(in, line)) {
    // "start-end perms offset major:minor inode   path"
    MappedRegion r;
    char perms[8] = {};
    int path_at = -1;
    unsigned long long start, end, offset, inode;
    unsigned major, minor;
    int n = std::sscanf(line.c_str(), "%llx-%llx %7s %llx %x:%x %llu %n", &start, &end, perms, &offset,
                        &major, &minor, &inode, &path_at);
    if (n < 7) continue;
    r.start = start;
    r.end = end;
    r.perms = perms;
    r.offset = offset;
    r.dev_major = major;
    r.dev_minor = minor;
    r.inode = inode;
    if (path_at > 0 && static_cast<size_t>(path_at) < line.size()) r.path = line.substr(path_at);
    regions.push_back(std::move(r));
  }
  return regions;
}

}  // namespace causeway::discover
