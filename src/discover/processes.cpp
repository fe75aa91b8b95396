// SPDX-License-Identifier: Apache-2.0
#include "causeway/discover/processes.h"

#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
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

std::optional<model::ProcessInfo> read_process_info(uint32_t pid, const std::string& proc_root) {
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
  if (auto cg = read_file(dir + "/cgroup")) info.cgroup = cgroup_of(*cg);
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

}  // namespace causeway::discover
