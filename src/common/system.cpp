// SPDX-License-Identifier: Apache-2.0
#include "causeway/common/system.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace causeway {
namespace {
constexpr int kCapSysAdmin = 21;
constexpr int kCapPerfmon = 38;
constexpr int kCapBpf = 39;
}  // namespace

Privileges privileges_from_status(const std::string& text, uint32_t euid) {
  Privileges p;
  p.euid = euid;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("CapEff:", 0) != 0) continue;
    const uint64_t caps = std::strtoull(line.c_str() + 7, nullptr, 16);
    p.cap_sys_admin = caps & (1ULL << kCapSysAdmin);
    p.cap_perfmon = caps & (1ULL << kCapPerfmon);
    p.cap_bpf = caps & (1ULL << kCapBpf);
  }
  return p;
}

Privileges current_privileges() {
  std::ifstream in("/proc/self/status");
  std::stringstream ss;
  ss << in.rdbuf();
  return privileges_from_status(ss.str(), ::geteuid());
}

std::string missing_privileges_message(const Privileges& p) {
  if (p.can_trace()) return "";
  std::string missing = !p.cap_bpf ? "CAP_BPF" : "";
  if (!p.cap_perfmon) missing += std::string(missing.empty() ? "" : " and ") + "CAP_PERFMON";
  return "tracing needs root or " + missing +
         " (run with sudo, or: setcap cap_bpf,cap_perfmon,cap_sys_resource+ep $(which causeway))";
}

std::optional<KernelVersion> parse_kernel_release(const std::string& release) {
  KernelVersion v;
  if (std::sscanf(release.c_str(), "%d.%d", &v.major, &v.minor) != 2) return std::nullopt;
  return v;
}

std::string kernel_release() {
  utsname u{};
  return ::uname(&u) == 0 ? u.release : "";
}

KernelVersion running_kernel() { return parse_kernel_release(kernel_release()).value_or(KernelVersion{}); }

}  // namespace causeway
