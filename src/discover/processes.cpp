// SPDX-License-Identifier: Apache-2.0
#include "causeway/discover/processes.h"

#include <filesystem>

#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <tuple>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>

#include "causeway/common/time.h"

namespace causeway::discover {
namespace {

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return ss.str();
}

std::string trim_newline(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0')) s.pop_back();
  return s;
}

// cgroup v2 ("0::/system.slice/x.service") when present, else the first line's path.
std::string cgroup_of(const std::string& text) {
  std::istringstream in(text);
  std::string line, first;
  while (std::getline(in, line)) {
    auto a = line.find(':');
    auto b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    std::string path = line.substr(b + 1);
    if (line.compare(0, b + 1, "0::") == 0) return path;
    if (first.empty()) first = path;
  }
  return first;
}

int64_t boot_to_wall_ns(uint64_t since_boot_ns) {
  timespec boot{};
  ::clock_gettime(CLOCK_BOOTTIME, &boot);
  int64_t boot_now = boot.tv_sec * kNsPerSec + boot.tv_nsec;
  return wall_now_ns() - (boot_now - static_cast<int64_t>(since_boot_ns));
}

}  // namespace

std::string join_cmdline(std::string_view raw) {
  std::string s = trim_newline(std::string(raw));
  for (char& c : s)
    if (c == '\0') c = ' ';
  return s;
}

std::optional<ProcStat> parse_proc_stat(const std::string& text) {
  // "pid (comm) state ppid ..."; comm ends at the LAST ')'.
  auto open = text.find('(');
  auto close = text.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return std::nullopt;
  ProcStat st;
  st.comm = text.substr(open + 1, close - open - 1);
  std::istringstream rest(text.substr(close + 1));
  std::string field;
  // Fields from 3 (state) on; starttime is field 22.
  for (int i = 3; i <= 22 && rest >> field; ++i) {
    if (i == 3) st.state = field.empty() ? '?' : field[0];
    if (i == 4) st.ppid = static_cast<uint32_t>(std::strtoul(field.c_str(), nullptr, 10));
    if (i == 22) {
      st.start_ticks = std::strtoull(field.c_str(), nullptr, 10);
      return st;
    }
  }
  return std::nullopt;
}

namespace {
bool all_hex(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
}
bool is_uid(const std::string& s) {  // 8-4-4-4-12 hex digits
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); i++)
    if ((i == 8 || i == 13 || i == 18 || i == 23) ? s[i] != '-' : !std::isxdigit(static_cast<unsigned char>(s[i])))
      return false;
  return true;
}
}  // namespace

ContainerRef container_of(std::string_view path) {
  ContainerRef r;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    std::string_view part = path.substr(start, end - start);
    start = end + 1;
    if (part.empty()) continue;
    // A pod: "pod<uid>" (cgroupfs) or "kubepods-<qos>-pod<uid_with_underscores>.slice" (systemd).
    if (auto p = part.rfind("pod"); p != std::string_view::npos && (p == 0 || part[p - 1] == '-')) {
      std::string uid(part.substr(p + 3));
      if (uid.size() > 6 && uid.compare(uid.size() - 6, 6, ".slice") == 0) uid.resize(uid.size() - 6);
      std::replace(uid.begin(), uid.end(), '_', '-');
      if (is_uid(uid)) r.pod_uid = uid;
    }
    // A container: 64 hex digits, alone or as "<runtime>-<id>.scope".
    std::string_view id = part;
    if (id.size() > 6 && id.substr(id.size() - 6) == ".scope") id.remove_suffix(6);
    if (auto dash = id.rfind('-'); dash != std::string_view::npos) id = id.substr(dash + 1);
    if (id.size() == 64 && all_hex(id)) r.container_id = std::string(id);
  }
  return r;
}

std::pair<std::string, std::string> pod_of(const std::string& container_id, const std::string& runtime_root) {
  if (container_id.empty()) return {};
  const std::string root = runtime_root.empty() || runtime_root.back() == '/' ? runtime_root : runtime_root + "/";
  struct Source {
    std::string file, name_key, namespace_key;
  };
  const Source sources[] = {
      {root + "run/containerd/io.containerd.runtime.v2.task/k8s.io/" + container_id + "/config.json",
       "io.kubernetes.cri.sandbox-name", "io.kubernetes.cri.sandbox-namespace"},
      {root + "run/containers/storage/overlay-containers/" + container_id + "/userdata/config.json",
       "io.kubernetes.pod.name", "io.kubernetes.pod.namespace"},
  };
  for (const auto& s : sources) {
    auto text = read_file(s.file);
    if (!text) continue;
    const auto j = nlohmann::json::parse(*text, nullptr, false);
    if (j.is_discarded() || !j.contains("annotations") || !j["annotations"].is_object()) continue;
    const auto& a = j["annotations"];
    auto get = [&](const std::string& k) { return a.contains(k) && a[k].is_string() ? a[k].get<std::string>() : ""; };
    if (!get(s.name_key).empty()) return {get(s.name_key), get(s.namespace_key)};
  }
  return {};
}

std::optional<model::ProcessInfo> read_process_info(uint32_t pid, const std::string& proc_root,
                                                    const std::string& runtime_root) {
  const std::string dir = proc_root + "/" + std::to_string(pid);
  auto stat_text = read_file(dir + "/stat");
  if (!stat_text) return std::nullopt;
  model::ProcessInfo info;
  info.pid = pid;
  if (auto st = parse_proc_stat(*stat_text)) {
    info.comm = st->comm;
    info.ppid = st->ppid;
    long hz = ::sysconf(_SC_CLK_TCK);
    if (hz > 0) info.start_ts_ns = boot_to_wall_ns(st->start_ticks * (kNsPerSec / hz));
  }
  if (auto comm = read_file(dir + "/comm")) info.comm = trim_newline(*comm);
  if (auto cmd = read_file(dir + "/cmdline")) info.cmdline = join_cmdline(*cmd);
  ContainerRef c;
  if (auto cg = read_file(dir + "/cgroup")) {
    info.cgroup = cgroup_of(*cg);
    // cgroup v1 hosts list a path per hierarchy: any may name the container.
    std::istringstream lines(*cg);
    for (std::string line; std::getline(lines, line) && (c.container_id.empty() || c.pod_uid.empty());) {
      const auto b = line.find(':', line.find(':') + 1);
      if (b == std::string::npos) continue;
      const ContainerRef l = container_of(std::string_view(line).substr(b + 1));
      if (c.container_id.empty()) c.container_id = l.container_id;
      if (c.pod_uid.empty()) c.pod_uid = l.pod_uid;
    }
  }
  info.container_id = c.container_id;
  info.pod_uid = c.pod_uid;
  std::tie(info.pod_name, info.pod_namespace) = pod_of(c.container_id, runtime_root);
  return info;
}

std::vector<GpuProcess> list_gpu_processes(const std::string& proc_root, DiscoverStats* stats) {
  std::vector<GpuProcess> out;
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(proc_root.c_str()), ::closedir);
  if (!dir) return out;
  std::vector<uint32_t> pids;
  while (auto* ent = ::readdir(dir.get())) {
    char* end = nullptr;
    unsigned long pid = std::strtoul(ent->d_name, &end, 10);
    if (end == ent->d_name || *end != '\0') continue;
    pids.push_back(static_cast<uint32_t>(pid));
  }
  std::sort(pids.begin(), pids.end());
  for (uint32_t pid : pids) {
    if (stats) ++stats->processes_scanned;
    std::optional<std::vector<LibraryFile>> libs = scan_process_libraries(pid, proc_root);
    if (!libs) {
      if (stats) ++stats->processes_unreadable;
      continue;
    }
    if (libs->empty()) continue;
    GpuProcess p;
    p.pid = pid;
    p.libraries = std::move(*libs);
    if (auto info = read_process_info(pid, proc_root)) {
      p.comm = info->comm;
      p.cmdline = info->cmdline;
    }
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<model::ThreadName> thread_names(uint32_t pid, const std::string& proc_root) {
  std::vector<model::ThreadName> out;
  std::error_code ec;
  const std::string dir = proc_root + "/" + std::to_string(pid) + "/task";
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    char* end = nullptr;
    const std::string name = e.path().filename().string();
    const unsigned long tid = std::strtoul(name.c_str(), &end, 10);
    if (!end || *end || !tid) continue;
    std::ifstream f(e.path() / "comm");
    std::string comm;
    if (!std::getline(f, comm) || comm.empty()) continue;  // gone meanwhile
    out.push_back({0, pid, uint32_t(tid), comm, CW_THREAD_FOUND});
  }
  return out;
}

}  // namespace causeway::discover
