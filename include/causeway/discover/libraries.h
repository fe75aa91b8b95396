// SPDX-License-Identifier: Apache-2.0
#pragma once
// Finding the GPU libraries to probe: every distinct file (device + inode) of
// libcudart, libcuda, libnccl, libamdhip64 and libibverbs on this host, from
// the ldconfig cache, running processes' /proc/PID/maps, and common pip-wheel
// locations (site-packages/nvidia/*/lib, torch/lib). A pip copy and the system
// copy are two files: both are returned.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "causeway/common/op_table.h"

namespace causeway::discover {

struct FileId {
  uint64_t dev = 0;
  uint64_t ino = 0;
  bool operator==(const FileId&) const = default;
};

struct LibraryFile {
  std::string path;            // a path that opens this file (from this mount namespace)
  LibraryKind kind;
  FileId id;
  std::vector<std::string> found_by;  // "ldconfig", "maps", "pip", "path"
  std::vector<uint32_t> pids;  // running processes that map it (when scanned)
};

// Which library kind a file name is ("libcudart.so.13" -> Cudart), if any.
// NCCL linked statically into libtorch_cuda.so is reported as Nccl too when
// the file exports ncclAllReduce (checked by the caller via ELF).
std::optional<LibraryKind> library_kind_of(const std::string& file_name);

struct DiscoverOptions {
  bool ldconfig = true;
  bool proc_maps = true;
  bool pip_locations = true;
  std::string proc_root = "/proc";
  // extra files or folders given by the user (--lib)
  std::vector<std::string> extra_paths;
};

// All GPU library files, deduplicated by FileId, sorted by kind then path.
std::vector<LibraryFile> discover_libraries(const DiscoverOptions& opts = {});

// GPU library files mapped by one process (for processes that start or
// dlopen while tracing). Paths are opened through /proc/PID/root so that a
// process in a chroot or container resolves to the right file.
std::vector<LibraryFile> libraries_mapped_by(uint32_t pid, const std::string& proc_root = "/proc");

// The identity of a file, nullopt if it cannot be stat'ed.
std::optional<FileId> file_id(const std::string& path);

}  // namespace causeway::discover
