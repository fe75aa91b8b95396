// SPDX-License-Identifier: Apache-2.0
#pragma once
// /proc/PID/maps parsing: which files a process has mapped.
#include <cstdint>
#include <istream>
#include <string>
#include <vector>

namespace causeway::discover {

struct MappedRegion {
  uint64_t start = 0, end = 0;
  std::string perms;  // "r-xp"
  uint64_t offset = 0;
  uint32_t dev_major = 0, dev_minor = 0;
  uint64_t inode = 0;
  std::string path;  // empty for anonymous mappings; may end in " (deleted)"
};

// One region per line; malformed lines are skipped.
std::vector<MappedRegion> parse_proc_maps(std::istream& in);

}  // namespace causeway::discover
