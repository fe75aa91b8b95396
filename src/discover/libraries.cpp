// SPDX-License-Identifier: Apache-2.0
#include "causeway/discover/libraries.h"

#include <dirent.h>
#include <glob.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>

#include "causeway/discover/elf_symbols.h"
#include "causeway/discover/proc_maps.h"

namespace causeway::discover {
namespace fs = std::filesystem;

std::optional<LibraryKind> library_kind_of(const std::string& file_name) {
  std::string_view name = file_name;
  if (auto slash = name.rfind('/'); slash != std::string_view::npos) name.remove_prefix(slash + 1);
  static constexpr std::array<std::pair<std::string_view, LibraryKind>, 6> kStems{{
      {"libc10_cuda", LibraryKind::C10Cuda},
      {"libcudart", LibraryKind::Cudart},
      {"libcuda", LibraryKind::Cuda},
      {"libnccl", LibraryKind::Nccl},
      {"libamdhip64", LibraryKind::Hip},
      {"libibverbs", LibraryKind::Verbs},
  }};
  for (const auto& [stem, kind] : kStems) {
    if (!name.starts_with(stem)) continue;
    std::string_view rest = name.substr(stem.size());
    // A copy a wheel renamed (auditwheel: libcudart-1b2c3d4e.so.12): the
    // same library under a hex hash, not a plugin (libnccl-net.so).
    if (rest.starts_with("-")) {
      const size_t so = rest.find(".so");
      if (so == std::string_view::npos || so < 9) continue;
      bool hash = true;
      for (char ch : rest.substr(1, so - 1)) hash = hash && std::isxdigit(static_cast<unsigned char>(ch));
      if (!hash) continue;
      rest = rest.substr(so);
    }
    // "libcuda.so" or "libcuda.so.<version>": not libcudart_static.a, not libcudnn.so.
    if (rest == ".so" || rest.starts_with(".so.")) return kind;
  }
  return std::nullopt;
}

std::optional<LibraryKind> library_kind_of_file(const std::string& path) {
  if (auto kind = library_kind_of(path)) return kind;
  std::string_view name = path;
  if (auto slash = name.rfind('/'); slash != std::string_view::npos) name.remove_prefix(slash + 1);
  // PyTorch wheels link NCCL statically into libtorch_cuda.so; its collectives
  // are exported from there and must be probed there.
  if (name.starts_with("libtorch_cuda.so") && elf_exports(path, "ncclAllReduce")) return LibraryKind::Nccl;
  return std::nullopt;
}

bool embeds_cuda_runtime(const std::string& path) {
  struct stat st;
  // libcudart_static.a adds over a megabyte: smaller files are not read.
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < (256 << 10)) return false;
  if (library_kind_of(path) == LibraryKind::Cudart) return false;
  auto elf = ElfSymbols::open(path);
  return elf && elf->symbol_value("cudaGetDeviceCount") && elf->symbol_value("cudaMalloc") &&
         elf->symbol_value("cudaLaunchKernel");
}

namespace {

// Each file is read once per run, however many processes map it.
bool embeds_cuda_runtime_cached(const std::string& path, const FileId& id) {
  static std::mutex mu;
  static std::map<std::pair<uint64_t, uint64_t>, bool> known;
  {
    std::lock_guard lock(mu);
    if (auto it = known.find({id.dev, id.ino}); it != known.end()) return it->second;
  }
  const bool embedded = embeds_cuda_runtime(path);
  std::lock_guard lock(mu);
  known[{id.dev, id.ino}] = embedded;
  return embedded;
}

}  // namespace

std::optional<FileId> file_id(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  return FileId{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
}

TorchAllocatorProbes torch_allocator_probes(const std::string& path) {
  static std::mutex mu;
  static std::map<std::pair<uint64_t, uint64_t>, TorchAllocatorProbes> known;
  const auto id = file_id(path);
  if (!id) return TorchAllocatorProbes::None;
  {
    std::lock_guard lock(mu);
    if (auto it = known.find({id->dev, id->ino}); it != known.end()) return it->second;
  }
  auto how = TorchAllocatorProbes::None;
  if (auto elf = ElfSymbols::open(path)) {
    const OpSpec* malloc_op = find_op("CachingAllocator::malloc");
    const OpSpec* free_op = find_op("CachingAllocator::free");
    if (elf->has_usdt("pytorch", "malloc") && elf->has_usdt("pytorch", "free"))
      how = TorchAllocatorProbes::Usdt;
    else if (malloc_op && free_op && elf->symbol_value(malloc_op->symbol) && elf->symbol_value(free_op->symbol))
      how = TorchAllocatorProbes::Symbols;
  }
  std::lock_guard lock(mu);
  known[{id->dev, id->ino}] = how;
  return how;
}

std::vector<std::pair<std::string, std::string>> parse_ldconfig_output(const std::string& text) {
  // "\tlibcudart.so.13 (libc6,x86-64) => /usr/local/cuda-13.0/lib/libcudart.so.13"
  std::vector<std::pair<std::string, std::string>> entries;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    auto arrow = line.find(" => ");
    if (arrow == std::string::npos) continue;
    auto first = line.find_first_not_of(" \t");
    auto space = line.find(' ', first);
    if (first == std::string::npos || space == std::string::npos || space > arrow) continue;
    std::string path = line.substr(arrow + 4);
    while (!path.empty() && (path.back() == '\r' || path.back() == ' ')) path.pop_back();
    entries.emplace_back(line.substr(first, space - first), path);
  }
  return entries;
}

namespace {

std::vector<std::string> glob_paths(const std::string& pattern) {
  std::vector<std::string> out;
  glob_t g{};
  if (::glob(pattern.c_str(), GLOB_NOSORT, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  }
  ::globfree(&g);
  std::sort(out.begin(), out.end());
  return out;
}

std::string read_ldconfig_cache(bool* failed) {
  for (const char* ldconfig : {"/sbin/ldconfig", "/usr/sbin/ldconfig"}) {
    if (::access(ldconfig, X_OK) != 0) continue;
    std::string cmd = std::string(ldconfig) + " -p 2>/dev/null";
    std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(cmd.c_str(), "r"), ::pclose);
    if (!pipe) break;
    std::string text;
    std::array<char, 4096> buf;
    size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), pipe.get())) > 0) text.append(buf.data(), n);
    return text;
  }
  *failed = true;
  return {};
}

// Merges every sighting of a file into one LibraryFile per (dev, ino).
class LibraryCollector {
 public:
  // `path` opens the file from here; `alias` is the name it was found under.
  // `mapped_name` is the name a process mapped it under, when `path` is a
  // /proc/PID/map_files link whose own name says nothing.
  // `embedded`: a file with the CUDA runtime linked in (embeds_cuda_runtime).
  void add(const std::string& path, const std::string& source, std::optional<uint32_t> pid = std::nullopt,
           bool canonicalize = true, const std::string& mapped_name = {}, bool embedded = false) {
    auto id = file_id(path);
    if (!id) return;
    auto key = std::make_pair(id->dev, id->ino);
    auto it = index_.find(key);
    if (it == index_.end()) {
      std::string canonical = path;
      if (canonicalize) {
        std::error_code ec;
        auto real = fs::canonical(path, ec);
        if (!ec) canonical = real.string();
      }
      auto kind = embedded ? std::optional(LibraryKind::Cudart) : kind_of(path, canonical, mapped_name);
      if (!kind) return;
      it = index_.emplace(key, files_.size()).first;
      files_.push_back(LibraryFile{canonical, *kind, *id, {}, {}, {}, embedded});
    }
    LibraryFile& f = files_[it->second];
    add_unique(f.found_by, source);
    add_unique(f.aliases, path);
    if (pid) add_unique(f.pids, *pid);
  }

  void merge(const LibraryFile& seen) {
    auto key = std::make_pair(seen.id.dev, seen.id.ino);
    auto it = index_.find(key);
    if (it == index_.end()) {
      index_.emplace(key, files_.size());
      files_.push_back(seen);
      return;
    }
    LibraryFile& f = files_[it->second];
    for (const auto& s : seen.found_by) add_unique(f.found_by, s);
    for (const auto& a : seen.aliases) add_unique(f.aliases, a);
    for (auto p : seen.pids) add_unique(f.pids, p);
  }

  std::vector<LibraryFile> take() {
    for (auto& f : files_) std::sort(f.pids.begin(), f.pids.end());
    std::sort(files_.begin(), files_.end(), [](const LibraryFile& a, const LibraryFile& b) {
      return a.kind != b.kind ? a.kind < b.kind : a.path < b.path;
    });
    return std::move(files_);
  }

 private:
  template <typename T>
  static void add_unique(std::vector<T>& v, const T& x) {
    if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
  }
  // The name it was found by decides (libcudart.so.13 -> libcudart.so.13.0.96),
  // else the real file name (a symlink named differently).
  static std::optional<LibraryKind> kind_of(const std::string& path, const std::string& canonical,
                                            const std::string& mapped_name) {
    if (auto k = library_kind_of_file(path)) return k;
    if (auto k = library_kind_of_file(canonical)) return k;
    if (mapped_name.empty()) return std::nullopt;
    if (auto k = library_kind_of(mapped_name)) return k;
    std::string_view name = mapped_name;
    name.remove_prefix(name.rfind('/') + 1);
    if (name.starts_with("libtorch_cuda.so") && elf_exports(path, "ncclAllReduce")) return LibraryKind::Nccl;
    return std::nullopt;
  }

  std::map<std::pair<uint64_t, uint64_t>, size_t> index_;
  std::vector<LibraryFile> files_;
};

bool is_number(const char* s) {
  if (*s == '\0') return false;
  for (; *s; ++s)
    if (*s < '0' || *s > '9') return false;
  return true;
}

}  // namespace

std::string openable_mapped_path(const std::string& proc_root, uint32_t pid, const MappedRegion& r,
                                 bool* canonicalize) {
  std::string pid_dir = proc_root + "/" + std::to_string(pid);
  auto inode_matches = [&](const std::optional<FileId>& id) { return id && (r.inode == 0 || id->ino == r.inode); };
  // A mapped file that was deleted (a library upgraded under a running
  // process) is still reachable through map_files only.
  constexpr std::string_view kDeleted = " (deleted)";
  const bool deleted = std::string_view(r.path).ends_with(kDeleted);
  const std::string path = deleted ? r.path.substr(0, r.path.size() - kDeleted.size()) : r.path;
  auto here = deleted ? std::nullopt : file_id(path);
  std::string via_root = pid_dir + "/root" + path;
  if (auto there = deleted ? std::nullopt : file_id(via_root); inode_matches(there)) {
    *canonicalize = here && *here == *there;
    return *canonicalize ? path : via_root;
  }
  char range[64];
  std::snprintf(range, sizeof range, "/map_files/%llx-%llx", static_cast<unsigned long long>(r.start),
                static_cast<unsigned long long>(r.end));
  std::string via_map_files = pid_dir + range;
  if (inode_matches(file_id(via_map_files))) {
    *canonicalize = false;
    return via_map_files;
  }
  if (inode_matches(here)) {
    *canonicalize = true;
    return path;
  }
  return {};
}

std::optional<std::vector<LibraryFile>> scan_process_libraries(uint32_t pid, const std::string& proc_root) {
  errno = 0;
  std::ifstream maps(proc_root + "/" + std::to_string(pid) + "/maps");
  if (!maps) {
    if (errno == ENOENT || errno == ESRCH) return std::vector<LibraryFile>{};
    return std::nullopt;
  }
  auto regions = parse_proc_maps(maps);
  if (maps.bad()) return std::nullopt;
  LibraryCollector collector;
  std::set<std::string> seen;
  for (const auto& r : regions) {
    if (r.path.empty() || r.path[0] != '/') continue;
    // Cheap name test first; libtorch_cuda.so needs the ELF check on the file.
    std::string_view name = r.path;
    name.remove_prefix(name.rfind('/') + 1);
    if (auto space = name.find(" (deleted)"); space != std::string_view::npos) name = name.substr(0, space);
    const bool named = library_kind_of(std::string(name)) || name.starts_with("libtorch_cuda.so");
    // Code mapped from any other file may carry a runtime linked statically.
    if (!named && !r.executable()) continue;
    if (!seen.insert(r.path).second) continue;
    bool canonicalize = true;
    std::string path = openable_mapped_path(proc_root, pid, r, &canonicalize);
    if (path.empty()) continue;
    if (named) {
      collector.add(path, "maps", pid, canonicalize, std::string(name));
      continue;
    }
    if (auto id = file_id(path); id && embeds_cuda_runtime_cached(path, *id))
      collector.add(path, "maps", pid, canonicalize, std::string(name), true);
  }
  return collector.take();
}

namespace {

void scan_all_processes(const std::string& proc_root, LibraryCollector& collector, DiscoverStats& stats) {
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(proc_root.c_str()), ::closedir);
  if (!dir) return;
  while (auto* ent = ::readdir(dir.get())) {
    if (!is_number(ent->d_name)) continue;
    uint32_t pid = static_cast<uint32_t>(std::strtoul(ent->d_name, nullptr, 10));
    ++stats.processes_scanned;
    auto found = scan_process_libraries(pid, proc_root);
    if (!found) {
      ++stats.processes_unreadable;
      continue;
    }
    for (const auto& f : *found) collector.merge(f);
  }
}

void scan_folder(const std::string& folder, const std::string& source, LibraryCollector& collector) {
  std::error_code ec;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string path = it->path().string();
    const std::string name = it->path().filename().string();
    if (name.find(".so") == std::string::npos) continue;
    if (library_kind_of(name) || name.starts_with("libtorch_cuda.so")) collector.add(path, source);
  }
}

void add_extra_path(const std::string& p, LibraryCollector& collector) {
  std::error_code ec;
  if (fs::is_directory(p, ec)) {
    scan_folder(p, "path", collector);
  } else {
    collector.add(p, "path");
  }
}

// Bounded walk for site-packages / dist-packages folders: virtualenvs, conda
// and pyenv installs live a few levels under /opt, /root or a home folder.
void find_package_dirs(const fs::path& dir, int depth_left, int& budget, std::set<std::string>& out) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
       !ec && it != end && budget > 0; it.increment(ec)) {
    --budget;
    if (!it->is_directory(ec) || it->is_symlink(ec)) continue;
    const std::string name = it->path().filename().string();
    if (name == "site-packages" || name == "dist-packages") {
      out.insert(it->path().string());
      continue;
    }
    if (depth_left <= 1) continue;
    if (name == ".cache" || name == ".git" || name == "node_modules" || name == "__pycache__" || name == "proc" ||
        name == "include" || name == "share")
      continue;
    find_package_dirs(it->path(), depth_left - 1, budget, out);
  }
}

}  // namespace

std::vector<std::string> python_package_dirs() {
  std::set<std::string> dirs;
  for (const char* pattern :
       {"/usr/lib/python3*/dist-packages", "/usr/lib/python3*/site-packages", "/usr/local/lib/python3*/site-packages",
        "/usr/local/lib/python3*/dist-packages", "/root/.local/lib/python3*/site-packages",
        "/home/*/.local/lib/python3*/site-packages"}) {
    for (auto& p : glob_paths(pattern)) dirs.insert(p);
  }
  if (const char* home = std::getenv("HOME")) {
    for (auto& p : glob_paths(std::string(home) + "/.local/lib/python3*/site-packages")) dirs.insert(p);
  }
  // Bounded: depth 6 reaches ~/.pyenv/versions/X/lib/python3.Y/site-packages
  // and /opt/conda/envs/X/lib/python3.Y/site-packages; the budget caps the
  // cost on a host with huge home folders.
  std::vector<std::string> roots = {"/opt", "/root"};
  for (auto& h : glob_paths("/home/*")) roots.push_back(h);
  for (const auto& root : roots) {
    int budget = 20000;
    find_package_dirs(root, 6, budget, dirs);
  }
  return {dirs.begin(), dirs.end()};
}

std::vector<LibraryFile> discover_libraries(const DiscoverOptions& opts) { return discover_libraries(opts, nullptr); }

std::vector<LibraryFile> discover_libraries(const DiscoverOptions& opts, DiscoverStats* stats_out) {
  DiscoverStats stats;
  LibraryCollector collector;
  if (opts.ldconfig) {
    for (const auto& [soname, path] : parse_ldconfig_output(read_ldconfig_cache(&stats.ldconfig_failed))) {
      if (library_kind_of(soname) || library_kind_of(path)) collector.add(path, "ldconfig");
    }
  }
  std::vector<std::string> package_dirs = opts.python_package_dirs;
  if (opts.pip_locations)
    for (auto& dir : python_package_dirs()) package_dirs.push_back(std::move(dir));
  for (const auto& dir : package_dirs) {
    for (const auto& lib : glob_paths(dir + "/nvidia/*/lib")) scan_folder(lib, "pip", collector);
    scan_folder(dir + "/torch/lib", "pip", collector);
  }
  if (opts.cuda_toolkit) {
    // The CUDA toolkit's own folders, whether or not ldconfig knows them.
    for (const auto& dir : glob_paths("/usr/local/cuda*/lib64")) scan_folder(dir, "path", collector);
    for (const auto& dir : glob_paths("/usr/local/cuda*/targets/*/lib")) scan_folder(dir, "path", collector);
  }
  for (const auto& p : opts.extra_paths) add_extra_path(p, collector);
  if (opts.proc_maps) scan_all_processes(opts.proc_root, collector, stats);
  if (stats_out) *stats_out = stats;
  return collector.take();
}

ProcessCoverage coverage_of(const std::vector<LibraryFile>& mapped) {
  ProcessCoverage c;
  for (const auto& l : mapped) {
    switch (l.kind) {
      case LibraryKind::Cudart:
        if (l.embedded) c.embedded.push_back(fs::path(l.path).filename().string());
        else c.shared_runtimes++;
        break;
      case LibraryKind::Cuda: c.driver = true; break;
      case LibraryKind::Nccl: c.nccl = true; break;
      case LibraryKind::Hip: c.hip = true; break;
      case LibraryKind::Verbs: c.verbs = true; break;
      case LibraryKind::C10Cuda:
        if (torch_allocator_probes(l.path) != TorchAllocatorProbes::None) c.torch_allocator = true;
        else c.torch_allocator_hidden = true;
        break;
    }
  }
  return c;
}

std::string ProcessCoverage::describe() const {
  std::string runtime, probed;
  auto add = [&](const std::string& layer) { probed += (probed.empty() ? "" : ", ") + layer; };
  std::string linked;
  for (const auto& e : embedded) linked += (linked.empty() ? "" : ", ") + e;
  if (shared_runtimes) runtime = "runtime: shared" + (shared_runtimes > 1 ? ", " + std::to_string(shared_runtimes) + " copies" : "");
  if (!embedded.empty()) runtime += (runtime.empty() ? "" : "; ") + std::string("runtime linked into ") + linked;
  if (runtime.empty() && driver)
    runtime = "no CUDA runtime to probe (linked in and stripped, or the driver API alone): its calls are "
              "seen at the driver";
  if (shared_runtimes || !embedded.empty()) add("runtime");
  if (driver) add("driver");
  if (nccl) add("nccl");
  if (hip) add("hip");
  if (verbs) add("verbs");
  if (torch_allocator) add("torch allocator");
  std::string out = runtime.empty() ? (probed.empty() ? "" : "probed: " + probed)
                                    : runtime + "; probed: " + (probed.empty() ? "none" : probed);
  if (torch_allocator_hidden && !torch_allocator)
    out += std::string(out.empty() ? "" : "; ") +
           "torch allocator not probed (libc10_cuda.so without its symbols): memory by the segments the "
           "driver hands out, not by tensor";
  return out;
}

std::vector<LibraryFile> libraries_mapped_by(uint32_t pid, const std::string& proc_root) {
  auto found = scan_process_libraries(pid, proc_root);
  return found ? std::move(*found) : std::vector<LibraryFile>{};
}

}  // namespace causeway::discover
