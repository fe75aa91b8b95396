// SPDX-License-Identifier: Apache-2.0
#include "causeway/discover/cgroup_cpu.h"

#include <fstream>
#include <sstream>
#include <vector>

namespace causeway::discover {

namespace {

std::optional<std::string> read_text(const std::string& path) {
  std::ifstream f(path);
  if (!f) return std::nullopt;
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// "key value" lines (cpu.stat).
std::optional<int64_t> stat_value(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string k;
  int64_t v = 0;
  while (in >> k >> v)
    if (k == key) return v;
  return std::nullopt;
}

std::optional<int64_t> number(const std::string& path) {
  auto t = read_text(path);
  if (!t) return std::nullopt;
  try {
    return std::stoll(*t);
  } catch (...) {
    return std::nullopt;
  }
}

// The cgroup and its ancestors, deepest first: "/a/b" -> "/a/b", "/a", "/".
std::vector<std::string> up_from(std::string path) {
  std::vector<std::string> out;
  while (!path.empty() && path.back() == '/' && path.size() > 1) path.pop_back();
  for (;;) {
    out.push_back(path.empty() ? "/" : path);
    const auto slash = path.find_last_of('/');
    if (path.empty() || path == "/" || slash == std::string::npos) break;
    path = slash == 0 ? "/" : path.substr(0, slash);
  }
  return out;
}

struct Limit {
  std::string cgroup, dir;
  int64_t quota = 0, period = 0;
};

// The tightest limit on the way up (quota/period smallest), or the
// process's own cgroup when none is set.
std::optional<model::CgroupCpuSample> from(int version, const std::string& mount, const std::string& cgroup) {
  std::optional<Limit> tightest;
  std::string own_dir;
  for (const std::string& cg : up_from(cgroup)) {
    const std::string dir = mount + (cg == "/" ? "" : cg);
    if (own_dir.empty()) own_dir = dir;
    std::optional<int64_t> quota, period;
    if (version == 2) {
      auto t = read_text(dir + "/cpu.max");  // "max 100000" or "40000 100000"
      if (!t) continue;
      std::istringstream in(*t);
      std::string q;
      int64_t p = 0;
      if (!(in >> q >> p) || p <= 0) continue;
      if (q != "max") {
        try {
          quota = std::stoll(q);
        } catch (...) {
          continue;
        }
      }
      period = p;
    } else {
      quota = number(dir + "/cpu.cfs_quota_us");
      period = number(dir + "/cpu.cfs_period_us");
      if (!quota || *quota < 0) quota.reset();  // -1: no limit
    }
    if (!quota || !period || *period <= 0 || *quota <= 0) continue;
    if (!tightest || double(*quota) / double(*period) < double(tightest->quota) / double(tightest->period))
      tightest = Limit{cg, dir, *quota, *period};
  }
  model::CgroupCpuSample s;
  s.version = version;
  s.cgroup = tightest ? tightest->cgroup : cgroup;
  const std::string dir = tightest ? tightest->dir : own_dir;
  if (tightest) s.quota_us = tightest->quota, s.period_us = tightest->period;
  auto stat = read_text(dir + "/cpu.stat");
  if (!stat && !tightest) return std::nullopt;  // no CPU controller to read
  if (stat) {
    s.nr_periods = stat_value(*stat, "nr_periods").value_or(0);
    s.nr_throttled = stat_value(*stat, "nr_throttled").value_or(0);
    // v2: throttled_usec; v1: throttled_time in ns.
    if (auto us = stat_value(*stat, "throttled_usec")) s.throttled_us = *us;
    else if (auto ns = stat_value(*stat, "throttled_time")) s.throttled_us = *ns / 1000;
  }
  if (!tightest) {
    // No limit: say the period the controller would use, if it is readable.
    s.period_us = version == 2 ? 100000 : number(dir + "/cpu.cfs_period_us").value_or(100000);
  }
  return s;
}

}  // namespace

std::optional<ProcCgroup> read_proc_cgroup(uint32_t pid, const std::string& proc_root, const std::string& controller) {
  auto text = read_text(proc_root + "/" + std::to_string(pid) + "/cgroup");
  if (!text) return std::nullopt;
  // "0::/path" (v2), or "N:cpu,cpuacct:/path" (v1) among other hierarchies.
  std::istringstream in(*text);
  ProcCgroup out;
  for (std::string line; std::getline(in, line);) {
    const auto a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (line.compare(0, a, "0") == 0 && controllers.empty()) {
      out.v2 = path;
      continue;
    }
    std::istringstream names(controllers);
    for (std::string c; std::getline(names, c, ',');)
      if (c == controller) out.v1 = path, out.v1_controllers = controllers;
  }
  return out;
}

std::optional<model::CgroupCpuSample> read_cgroup_cpu(uint32_t pid, const std::string& proc_root,
                                                      const std::string& cgroup_root) {
  const auto where = read_proc_cgroup(pid, proc_root, "cpu");
  if (!where) return std::nullopt;
  const auto& [v2, v1, v1_mount] = *where;
  std::optional<model::CgroupCpuSample> s;
  if (v1) {
    // Mounted as "cpu,cpuacct" (with a "cpu" link) on most distributions.
    s = from(1, cgroup_root + "/" + v1_mount, *v1);
    if (!s) s = from(1, cgroup_root + "/cpu", *v1);
  }
  if (!s && v2) s = from(2, cgroup_root, *v2);
  if (s) s->pid = pid;
  return s;
}

}  // namespace causeway::discover
