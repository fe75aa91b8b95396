// SPDX-License-Identifier: Apache-2.0
#pragma once
// `causeway check`: can this host trace, and what would it trace. Each check
// returns a status, what was seen, and one line saying how to fix it. The
// pieces take their inputs (file text, paths) so they are testable alone;
// run_readiness_checks() feeds them from the live system.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "causeway/common/system.h"
#include "causeway/discover/libraries.h"
#include "causeway/discover/processes.h"

namespace causeway::discover {

enum class CheckStatus { Ok, Warn, Fail };
std::string_view check_status_name(CheckStatus s);  // "ok" | "warn" | "fail"

struct CheckResult {
  std::string name;  // stable key: kernel, btf, privileges, tracefs, ...
  CheckStatus status = CheckStatus::Ok;
  std::string detail;
  std::string fix;  // empty when status is ok
};

using causeway::Privileges;
using causeway::privileges_from_status;

CheckResult check_kernel_version(const std::string& release);
CheckResult check_btf(const std::string& vmlinux_btf_path = "/sys/kernel/btf/vmlinux");
CheckResult check_privileges(const Privileges& p);
CheckResult check_tracefs(const std::string& mounts_text);
// /proc/sys/kernel/unprivileged_bpf_disabled; nullopt when absent.
CheckResult check_unprivileged_bpf(const std::optional<std::string>& value, const Privileges& p);
// /sys/kernel/security/lockdown ("none [integrity] confidentiality"); nullopt when absent.
CheckResult check_lockdown(const std::optional<std::string>& text);
struct NvidiaDriver {
  std::string version;            // "550.54.15"
  std::vector<std::string> gpus;  // "NVIDIA H100 80GB HBM3 (0000:18:00.0)"
};
std::optional<NvidiaDriver> read_nvidia_driver(const std::string& root = "/proc/driver/nvidia");
CheckResult check_nvidia_driver(const std::optional<NvidiaDriver>& driver);

CheckResult check_gpu_libraries(const std::vector<LibraryFile>& libraries);
// The oldest driver (major version) a CUDA runtime major version runs on; 0: unknown.
int min_driver_for_cuda(int runtime_major);
// The CUDA runtimes found against the driver: too old a driver, or a user-space
// libcuda of another version than the kernel module, fails.
CheckResult check_cuda_versions(const std::optional<NvidiaDriver>& driver, const std::vector<LibraryFile>& libraries);
CheckResult check_process_scan(const DiscoverStats& stats, size_t gpu_processes, const Privileges& p);

struct ReadinessReport {
  std::vector<CheckResult> checks;
  std::vector<LibraryFile> libraries;
  std::vector<GpuProcess> processes;
  bool any_failed() const;
};
// Every check discovery can make (the BPF load and uprobe checks are the
// attach stage's: attach::run_readiness_checks adds them).
ReadinessReport run_discovery_checks();

// The cheap subset `trace` runs before attaching (kernel, btf, privileges,
// lockdown): same words as `check`, so it can fail fast with them.
std::vector<CheckResult> run_trace_preflight();
// "privileges: uid 1000, ... (fix: run as root ...)" for every failed check,
// joined by "; "; empty when none failed.
std::string describe_failures(const std::vector<CheckResult>& checks);

}  // namespace causeway::discover
