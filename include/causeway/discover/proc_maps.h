// SPDX-License-Identifier: Apache-2.0
#pragma once
// /proc/PID/maps, parsed: which file is mapped where, with which permissions.
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
  std::string path;  // empty for anonymous mappings; "[stack]" etc.; may end in " (deleted)"
  bool readable() const { return !perms.empty() && perms[0] == 'r'; }
  bool executable() const { return perms.size() > 2 && perms[2] == 'x'; }
};

// One line of the maps format; false when it does not parse.
bool parse_maps_line(const std::string& line, MappedRegion& out);
// One region per line; malformed lines are skipped.
std::vector<MappedRegion> parse_proc_maps(std::istream& in);
std::vector<MappedRegion> read_proc_maps(uint32_t pid, const std::string& proc_root = "/proc");
// A hash of the file-backed executable mappings (address, offset, inode,
// path): what a rescan for newly loaded libraries looks for. Data files and
// shared memory mapped and unmapped each step leave it as it was. 0: the
// file could not be read (the process is gone).
uint64_t code_maps_signature(std::istream& maps);
uint64_t code_maps_signature(uint32_t pid, const std::string& proc_root = "/proc");

}  // namespace causeway::discover
