// SPDX-License-Identifier: Apache-2.0
#pragma once
// /proc/PID/maps, parsed: which file is mapped where, with which permissions.
#include <cstdint>
#include <string>
#include <vector>

namespace causeway::discover {

struct MapEntry {
  uint64_t start = 0, end = 0, offset = 0, inode = 0;
  bool readable = false, executable = false;
  std::string path;  // empty for anonymous mappings; "[stack]" etc. for special ones
};

std::vector<MapEntry> read_proc_maps(uint32_t pid, const std::string& proc_root = "/proc");
// One line of the maps format; false when it does not parse.
bool parse_maps_line(const std::string& line, MapEntry& out);

}  // namespace causeway::discover
