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
#include <utility>
#include <vector>

#include "causeway/discover/proc_maps.h"

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
  // Every path (before symlink resolution) through which it was found, e.g.
  // /usr/local/cuda/lib64/libcudart.so.13 for /usr/local/cuda-13.0/lib/....
  std::vector<std::string> aliases;
  // A CUDA runtime linked into this file (libcudart_static.a: nvcc's default,
  // an engine's executable): probed through its own symbol table, like a
  // shared libcudart. kind is Cudart.
  bool embedded = false;
};

// True when an ELF file that is not libcudart defines the CUDA runtime's
// entry points itself (in .symtab or .dynsym): the runtime was linked into
// it statically. A stripped one keeps none: only its driver calls are seen.
bool embeds_cuda_runtime(const std::string& path);

// Which library kind a file name is ("libcudart.so.13" -> Cudart), if any.
// NCCL linked statically into libtorch_cuda.so is reported as Nccl too when
// the file exports ncclAllReduce (checked by the caller via ELF).
std::optional<LibraryKind> library_kind_of(const std::string& file_name);

struct DiscoverOptions {
  bool ldconfig = true;
  bool proc_maps = true;
  bool pip_locations = true;
  bool cuda_toolkit = true;  // /usr/local/cuda*/lib64 and targets/*/lib
  std::string proc_root = "/proc";
  // extra files or folders given by the user (--lib)
  std::vector<std::string> extra_paths;
  // site-packages folders searched like the host's (nvidia/*/lib, torch/lib)
  // even when pip_locations is off: a venv the search would not reach.
  std::vector<std::string> python_package_dirs;
};

// All GPU library files, deduplicated by FileId, sorted by kind then path.
// `path` is the canonical (realpath) name in our mount namespace, or
// /proc/PID/root/... for a file only another mount namespace can see.
std::vector<LibraryFile> discover_libraries(const DiscoverOptions& opts = {});

// What discovery could not look at (without root, other users' /proc entries).
struct DiscoverStats {
  uint32_t processes_scanned = 0;
  uint32_t processes_unreadable = 0;  // /proc/PID/maps or root not readable
  bool ldconfig_failed = false;
};
std::vector<LibraryFile> discover_libraries(const DiscoverOptions& opts, DiscoverStats* stats);

// library_kind_of on the file name, plus libtorch_cuda.so exporting
// ncclAllReduce (NCCL linked in) -> Nccl. `path` must be openable.
std::optional<LibraryKind> library_kind_of_file(const std::string& path);

// How one process can be seen, from the GPU library files it maps: which
// CUDA runtime it carries (shared copies, linked in, or none that can be
// probed by name) and which layers of probes cover it.
struct ProcessCoverage {
  int shared_runtimes = 0;            // libcudart files it maps
  std::vector<std::string> embedded;  // files with the runtime linked in (their names)
  bool driver = false, nccl = false, hip = false, verbs = false;
  bool torch_allocator = false;       // PyTorch's caching allocator (libc10_cuda.so's symbols)
  bool torch_allocator_hidden = false;  // a libc10_cuda.so without them (a stripped build)
  // "runtime: shared, 2 copies; probed: runtime, driver, nccl"; or
  // "runtime linked into prog; probed: runtime (prog), driver"; or, with a
  // driver but no runtime to probe (stripped, linked in: CuPy), says that
  // its runtime calls are seen through the driver only.
  std::string describe() const;
  bool empty() const {
    return !shared_runtimes && embedded.empty() && !driver && !nccl && !hip && !verbs && !torch_allocator &&
           !torch_allocator_hidden;
  }
};
ProcessCoverage coverage_of(const std::vector<LibraryFile>& mapped);
// How a libc10_cuda.so shows PyTorch's caching allocator: its own USDT
// probes (pytorch:malloc and pytorch:free, in the pip wheels), else the
// methods' symbols in its symbol table, else nothing (a build that hides
// them and is stripped). Cached by file.
enum class TorchAllocatorProbes { None, Usdt, Symbols };
TorchAllocatorProbes torch_allocator_probes(const std::string& path);

// `ldconfig -p` output -> (soname, path) pairs.
std::vector<std::pair<std::string, std::string>> parse_ldconfig_output(const std::string& text);

// Where pip wheels put GPU libraries: every site-packages / dist-packages
// folder found cheaply (system, /usr/local, ~/.local, pyenv, venvs and conda
// under /opt, /root and /home/* to a bounded depth).
std::vector<std::string> python_package_dirs();

// GPU library files mapped by one process (for processes that start or
// dlopen while tracing). Paths are opened through /proc/PID/root so that a
// process in a chroot or container resolves to the right file.
std::vector<LibraryFile> libraries_mapped_by(uint32_t pid, const std::string& proc_root = "/proc");

// Like libraries_mapped_by, but nullopt when /proc/PID/maps cannot be read
// (another user's process without root); empty when the process is gone.
std::optional<std::vector<LibraryFile>> scan_process_libraries(uint32_t pid, const std::string& proc_root = "/proc");

// The identity of a file, nullopt if it cannot be stat'ed.
std::optional<FileId> file_id(const std::string& path);
// A file another process mapped at region r, as this process can open it:
// the plain path when it is the same file here, else through /proc/PID/root
// (another mount namespace), else /proc/PID/map_files (deleted or hidden).
// Empty if none works. *canonicalize: the plain path is the file.
std::string openable_mapped_path(const std::string& proc_root, uint32_t pid, const MappedRegion& r,
                                 bool* canonicalize);

}  // namespace causeway::discover
