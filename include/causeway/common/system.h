// SPDX-License-Identifier: Apache-2.0
#pragma once
// Facts about the running system that several stages need, each read and
// parsed in one place: the process's capabilities and the kernel version.
#include <cstdint>
#include <optional>
#include <string>

namespace causeway {

struct Privileges {
  uint32_t euid = 0;
  bool cap_bpf = false, cap_perfmon = false, cap_sys_admin = false;
  // Loading tracing programs and opening uprobe perf events.
  bool can_trace() const { return cap_sys_admin || (cap_bpf && cap_perfmon); }
};
// From /proc/self/status text (the CapEff line) and the effective uid.
Privileges privileges_from_status(const std::string& proc_status_text, uint32_t euid);
Privileges current_privileges();
// What `trace` and `check` say when tracing is not allowed: the missing
// capabilities by name and how to grant them; "" when tracing is allowed.
std::string missing_privileges_message(const Privileges& p);

struct KernelVersion {
  int major = 0, minor = 0;
  bool at_least(int maj, int min) const { return major > maj || (major == maj && minor >= min); }
};
// "6.18.44-fc-v445" -> 6.18; nullopt when it does not start with N.N.
std::optional<KernelVersion> parse_kernel_release(const std::string& release);
std::string kernel_release();  // uname -r
KernelVersion running_kernel();  // 0.0 when unreadable

}  // namespace causeway
