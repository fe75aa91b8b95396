// SPDX-License-Identifier: Apache-2.0
#include "causeway/discover/process_cpus.h"

#include <unistd.h>

#include <charconv>
#include <fstream>

#include "causeway/common/error.h"

namespace causeway::discover {

namespace {

std::optional<int> to_int(std::string_view s) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

}  // namespace

int count_cpu_list(std::string_view list) {
  while (!list.empty() && (list.back() == '\n' || list.back() == ' ')) list.remove_suffix(1);
  int n = 0;
  const std::string whole(list);
  while (!list.empty()) {
    const auto comma = list.find(',');
    const std::string_view range = list.substr(0, comma);
    list.remove_prefix(comma == std::string_view::npos ? list.size() : comma + 1);
    const auto dash = range.find('-');
    const auto lo = to_int(range.substr(0, dash));
    const auto hi = dash == std::string_view::npos ? lo : to_int(range.substr(dash + 1));
    if (!lo || !hi || *hi < *lo) throw Error("not a CPU list (\"0-3,8\"): \"" + whole + "\"");
    n += *hi - *lo + 1;
  }
  return n;
}

std::optional<model::ProcessCpus> read_process_cpus(uint32_t pid, const std::string& proc_root) {
  std::ifstream f(proc_root + "/" + std::to_string(pid) + "/status");
  if (!f) return std::nullopt;
  model::ProcessCpus c;
  c.pid = pid;
  bool list = false;
  for (std::string line; std::getline(f, line);) {
    auto value = [&](const char* key) -> std::optional<std::string> {
      const std::string k = std::string(key) + ":";
      if (line.compare(0, k.size(), k) != 0) return std::nullopt;
      const auto v = line.find_first_not_of(" \t", k.size());
      return v == std::string::npos ? "" : line.substr(v);
    };
    if (auto v = value("Threads")) c.threads = to_int(*v).value_or(0);
    if (auto v = value("Cpus_allowed_list")) {
      try {
        c.cpus = count_cpu_list(*v);
      } catch (const Error&) {
        return std::nullopt;  // a status read half-way through an exit
      }
      c.cpu_list = *v;
      list = true;
    }
  }
  if (!list) return std::nullopt;
  c.online_cpus = int(sysconf(_SC_NPROCESSORS_ONLN));
  return c;
}

}  // namespace causeway::discover
