// SPDX-License-Identifier: Apache-2.0
#include "causeway/discover/cgroup_memory.h"
#include "causeway/discover/cgroup_cpu.h"

#include <charconv>
#include <fstream>
#include <sstream>
#include <vector>

#include "causeway/common/error.h"

namespace causeway::discover {

namespace {

std::optional<std::string> read_text(const std::string& path) {
  std::ifstream f(path);
  if (!f) return std::nullopt;
  std::ostringstream s;
  s << f.rdbuf();
  if (f.bad()) return std::nullopt;
  return s.str();
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  return s;
}

std::optional<int64_t> to_int(std::string_view s) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

// The cgroup and its ancestors, deepest first: "/a/b" -> "/a/b", "/a", "/".
std::vector<std::string> up_from(std::string path) {
  std::vector<std::string> out;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  for (;;) {
    out.push_back(path.empty() ? "/" : path);
    const auto slash = path.find_last_of('/');
    if (path.empty() || path == "/" || slash == std::string::npos) break;
    path = slash == 0 ? "/" : path.substr(0, slash);
  }
  return out;
}

std::string dir_of(const std::string& mount, const std::string& cg) { return mount + (cg == "/" ? "" : cg); }

// A file the kernel wrote that does not parse is skipped by the sampler (a
// cgroup that vanished mid-read reads short), never a stopped trace.
template <typename F>
auto lenient(F&& f) -> std::optional<decltype(f())> {
  try {
    return f();
  } catch (const Error&) {
    return std::nullopt;
  }
}

std::optional<int64_t> limit_at(const std::string& path) {
  auto t = read_text(path);
  if (!t) return std::nullopt;
  return lenient([&] { return parse_memory_limit(*t); }).value_or(std::nullopt);
}

void add_pressure(model::CgroupMemorySample& s, const std::string& file) {
  auto t = read_text(file);
  if (!t) return;
  if (auto p = lenient([&] { return parse_pressure(*t); })) s.psi_some_us = p->some_us, s.psi_full_us = p->full_us;
}

std::optional<model::CgroupMemorySample> from_v2(const std::string& mount, const std::string& cgroup) {
  // The tightest memory.max on the way up sets the limit; its cgroup's
  // counters are hierarchical (they count the cgroups below it).
  std::optional<std::pair<std::string, int64_t>> max, high;
  for (const std::string& cg : up_from(cgroup)) {
    if (cg == "/") break;  // the root has no limit files
    const std::string dir = dir_of(mount, cg);
    if (auto m = limit_at(dir + "/memory.max"); m && (!max || *m < max->second)) max = {cg, *m};
    if (auto h = limit_at(dir + "/memory.high"); h && (!high || *h < high->second)) high = {cg, *h};
  }
  model::CgroupMemorySample s;
  s.version = 2;
  s.cgroup = max ? max->first : high ? high->first : cgroup;
  if (max) s.limit_bytes = max->second;
  if (high) s.high_bytes = high->second;
  const std::string dir = dir_of(mount, s.cgroup);
  auto stat_text = read_text(dir + "/memory.stat");
  if (!stat_text) return std::nullopt;  // no memory controller here
  auto stat = lenient([&] { return parse_key_values(*stat_text); });
  if (!stat) return std::nullopt;
  auto get = [&](const std::map<std::string, int64_t>& m, const char* k) -> std::optional<int64_t> {
    auto it = m.find(k);
    if (it == m.end()) return std::nullopt;
    return it->second;
  };
  s.file_bytes = get(*stat, "file").value_or(0);
  s.pgscan = get(*stat, "pgscan");
  s.pgsteal = get(*stat, "pgsteal");
  s.refault_file = get(*stat, "workingset_refault_file").value_or(0);
  if (auto t = read_text(dir + "/memory.current")) s.current_bytes = to_int(trim(*t)).value_or(0);
  if (auto t = read_text(dir + "/memory.events"))
    if (auto ev = lenient([&] { return parse_key_values(*t); }))
      s.limit_hits = get(*ev, "max").value_or(0) + get(*ev, "high").value_or(0);
  add_pressure(s, dir + "/memory.pressure");
  return s;
}

std::optional<model::CgroupMemorySample> from_v1(const std::string& mount, const std::string& cgroup) {
  const std::string own = dir_of(mount, cgroup);
  auto stat_text = read_text(own + "/memory.stat");
  if (!stat_text) return std::nullopt;
  auto stat = lenient([&] { return parse_key_values(*stat_text); });
  if (!stat) return std::nullopt;
  auto get = [&](const char* k) -> std::optional<int64_t> {
    auto it = stat->find(k);
    if (it == stat->end()) return std::nullopt;
    return it->second;
  };
  model::CgroupMemorySample s;
  s.version = 1;
  s.cgroup = cgroup;
  // hierarchical_memory_limit is the tightest on the way up: name the
  // cgroup that sets it, whose counters count the pressure of all below.
  std::optional<int64_t> limit;
  if (auto h = get("hierarchical_memory_limit")) limit = parse_memory_limit(std::to_string(*h));
  if (limit)
    for (const std::string& cg : up_from(cgroup))
      if (limit_at(dir_of(mount, cg) + "/memory.limit_in_bytes") == limit) {
        s.cgroup = cg;
        break;
      }
  s.limit_bytes = limit;
  const std::string dir = dir_of(mount, s.cgroup);
  auto at = s.cgroup == cgroup ? std::move(*stat) : lenient([&] {
    auto t = read_text(dir + "/memory.stat");
    return t ? parse_key_values(*t) : std::map<std::string, int64_t>{};
  }).value_or(std::map<std::string, int64_t>{});
  auto total = [&](const char* k) -> int64_t {
    auto it = at.find(std::string("total_") + k);
    if (it == at.end()) it = at.find(k);
    return it == at.end() ? 0 : it->second;
  };
  s.file_bytes = total("cache");
  s.refault_file = total("workingset_refault_file");
  if (auto t = read_text(dir + "/memory.usage_in_bytes")) s.current_bytes = to_int(trim(*t)).value_or(0);
  if (auto t = read_text(dir + "/memory.failcnt")) s.limit_hits = to_int(trim(*t)).value_or(0);
  return s;
}

}  // namespace

std::map<std::string, int64_t> parse_key_values(std::string_view text) {
  std::map<std::string, int64_t> out;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    const std::string_view line = trim(text.substr(0, nl));
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (line.empty()) continue;
    const auto sp = line.find(' ');
    const auto v = sp == std::string_view::npos ? std::nullopt : to_int(trim(line.substr(sp + 1)));
    if (!v) throw Error("not a \"key value\" line of a cgroup file: \"" + std::string(line) + "\"");
    out[std::string(line.substr(0, sp))] = *v;
  }
  return out;
}

PressureTotals parse_pressure(std::string_view text) {
  PressureTotals p;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    const std::string_view line = trim(text.substr(0, nl));
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (line.empty()) continue;
    // "some avg10=0.00 avg60=0.00 avg300=0.00 total=1234"
    const auto at = line.find("total=");
    const std::string_view kind = line.substr(0, line.find(' '));
    std::optional<int64_t> v;
    if (at != std::string_view::npos) {
      std::string_view rest = line.substr(at + 6);
      v = to_int(rest.substr(0, rest.find(' ')));
    }
    if (!v || (kind != "some" && kind != "full"))
      throw Error("not a pressure line (\"some|full ... total=N\"): \"" + std::string(line) + "\"");
    (kind == "some" ? p.some_us : p.full_us) = *v;
  }
  return p;
}

std::optional<int64_t> parse_memory_limit(std::string_view text) {
  const std::string_view t = trim(text);
  if (t == "max") return std::nullopt;
  auto v = to_int(t);
  if (!v || *v < 0) throw Error("not a memory limit (bytes or \"max\"): \"" + std::string(t) + "\"");
  // v1 says "no limit" as LONG_MAX rounded down to a page (9223372036854771712).
  if (*v >= (int64_t(1) << 62)) return std::nullopt;
  return v;
}

std::optional<model::CgroupMemorySample> read_cgroup_memory_in(const ProcCgroup& where,
                                                               const std::string& cgroup_root) {
  const auto& [v2, v1, v1_controllers] = where;
  std::optional<model::CgroupMemorySample> s;
  if (v1) {
    s = from_v1(cgroup_root + "/memory", *v1);
    // PSI is v2's: a hybrid host mounts that hierarchy beside (unified/).
    if (s && v2 && *v2 != "/") add_pressure(*s, dir_of(cgroup_root + "/unified", *v2) + "/memory.pressure");
  }
  if (!s && v2) s = from_v2(cgroup_root, *v2);
  return s;
}

std::optional<model::CgroupMemorySample> read_cgroup_memory(uint32_t pid, const std::string& proc_root,
                                                            const std::string& cgroup_root) {
  const auto where = read_proc_cgroup(pid, proc_root, "memory");
  if (!where) return std::nullopt;
  auto s = read_cgroup_memory_in(*where, cgroup_root);
  if (s) s->pid = pid;
  return s;
}

}  // namespace causeway::discover
