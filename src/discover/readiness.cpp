// SPDX-License-Identifier: Apache-2.0
#include "causeway/discover/readiness.h"
#include "causeway/discover/proc_maps.h"

#include <cctype>
#include <set>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>


namespace causeway::discover {
namespace {

std::optional<std::string> read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string trim(std::string s) {
  auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return {};
  auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

CheckResult result(std::string name, CheckStatus status, std::string detail, std::string fix = {}) {
  return CheckResult{std::move(name), status, std::move(detail), std::move(fix)};
}

const char* kNeedsRootFix = "run as root (sudo causeway ...), or give the binary capabilities: "
                            "sudo setcap cap_bpf,cap_perfmon,cap_sys_ptrace,cap_dac_read_search+ep $(command -v causeway)";

}  // namespace

std::string_view check_status_name(CheckStatus s) {
  switch (s) {
    case CheckStatus::Ok: return "ok";
    case CheckStatus::Warn: return "warn";
    case CheckStatus::Fail: return "fail";
  }
  return "?";
}

CheckResult check_kernel_version(const std::string& release) {
  const auto v = parse_kernel_release(release);
  if (!v)
    return result("kernel", CheckStatus::Warn, "unrecognised kernel release '" + release + "'",
                  "causeway needs Linux 5.15 or newer");
  std::string detail = "Linux " + release;
  if (!v->at_least(5, 8))
    return result("kernel", CheckStatus::Fail, detail + ": no BPF ring buffer (needs 5.8)",
                  "boot Linux 5.15 or newer");
  if (!v->at_least(5, 15))
    return result("kernel", CheckStatus::Warn, detail + ": no BPF attach cookies (needs 5.15); uprobes cannot carry op ids",
                  "boot Linux 5.15 or newer for full library-call tracing");
  return result("kernel", CheckStatus::Ok, detail);
}

CheckResult check_btf(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && st.st_size > 0)
    return result("btf", CheckStatus::Ok, path + " present (" + std::to_string(st.st_size / 1024) + " KiB)");
  return result("btf", CheckStatus::Fail, path + " missing: CO-RE programs cannot be relocated",
                "boot a kernel built with CONFIG_DEBUG_INFO_BTF=y (Debian 11+, Ubuntu 20.10+, RHEL 8.2+ ship one)");
}

CheckResult check_privileges(const Privileges& p) {
  std::string have;
  auto add = [&](bool on, const char* name) {
    if (on) have += have.empty() ? name : std::string(",") + name;
  };
  add(p.cap_bpf, "CAP_BPF");
  add(p.cap_perfmon, "CAP_PERFMON");
  add(p.cap_sys_admin, "CAP_SYS_ADMIN");
  std::string who = p.euid == 0 ? "root" : "uid " + std::to_string(p.euid);
  std::string detail = who + ", effective capabilities: " + (have.empty() ? "none of CAP_BPF/CAP_PERFMON/CAP_SYS_ADMIN" : have);
  if (p.can_trace()) return result("privileges", CheckStatus::Ok, detail);
  return result("privileges", CheckStatus::Fail, detail + ": cannot load tracing programs or open uprobes",
                missing_privileges_message(p));
}

CheckResult check_tracefs(const std::string& mounts_text) {
  std::istringstream in(mounts_text);
  std::string line;
  std::string where;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string dev, dir, type;
    if (!(fields >> dev >> dir >> type) || type != "tracefs") continue;
    if (where.empty() || dir == "/sys/kernel/tracing") where = dir;
  }
  if (!where.empty()) return result("tracefs", CheckStatus::Ok, "mounted at " + where);
  return result("tracefs", CheckStatus::Warn,
                "not mounted: libbpf's legacy uprobe fallback and tracepoint ids need it",
                "mount -t tracefs nodev /sys/kernel/tracing");
}

CheckResult check_unprivileged_bpf(const std::optional<std::string>& value, const Privileges& p) {
  if (!value) return result("unprivileged_bpf", CheckStatus::Ok, "kernel.unprivileged_bpf_disabled absent");
  std::string v = trim(*value);
  std::string detail = "kernel.unprivileged_bpf_disabled=" + v;
  if (p.can_trace()) return result("unprivileged_bpf", CheckStatus::Ok, detail + " (does not apply: privileged)");
  return result("unprivileged_bpf", CheckStatus::Warn,
                detail + (v == "0" ? ": unprivileged BPF allowed, but uprobes and tracepoints still need privileges"
                                   : ": unprivileged users may not load BPF programs"),
                kNeedsRootFix);
}

CheckResult check_lockdown(const std::optional<std::string>& text) {
  if (!text) return result("lockdown", CheckStatus::Ok, "no lockdown LSM (/sys/kernel/security/lockdown absent)");
  std::string mode = "none";
  auto open = text->find('[');
  auto close = text->find(']');
  if (open != std::string::npos && close != std::string::npos && close > open)
    mode = text->substr(open + 1, close - open - 1);
  if (mode == "confidentiality")
    return result("lockdown", CheckStatus::Fail,
                  "lockdown=confidentiality: BPF may not read kernel memory (bpf_probe_read_kernel is denied)",
                  "boot with lockdown=integrity or none (e.g. disable Secure Boot lockdown: mokutil --disable-validation)");
  if (mode == "integrity")
    return result("lockdown", CheckStatus::Ok, "lockdown=integrity: only bpf_probe_write_user is denied (unused)");
  return result("lockdown", CheckStatus::Ok, "lockdown=" + mode);
}

std::optional<NvidiaDriver> read_nvidia_driver(const std::string& root) {
  auto version_text = read_text(root + "/version");
  if (!version_text) return std::nullopt;
  NvidiaDriver d;
  // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 ..."
  // or, the open modules: "... UNIX Open Kernel Module for x86_64  580.159.04  Release Build ...":
  // the first word after "Kernel Module" that is a dotted number.
  std::istringstream in(*version_text);
  std::string first;
  std::getline(in, first);
  auto at = first.find("Kernel Module");
  std::istringstream words(at == std::string::npos ? first : first.substr(at + 13));
  auto is_version = [](const std::string& w) {
    return !w.empty() && std::isdigit(static_cast<unsigned char>(w[0])) && w.find('.') != std::string::npos &&
           w.find_first_not_of("0123456789.") == std::string::npos;
  };
  for (std::string w; at != std::string::npos && words >> w;)
    if (is_version(w)) {
      d.version = w;
      break;
    }
  if (d.version.empty()) d.version = trim(first);

  std::error_code ec;
  const std::string gpus = root + "/gpus";
  std::vector<std::string> dirs;
  for (const auto& entry : std::filesystem::directory_iterator(gpus, ec)) dirs.push_back(entry.path().string());
  std::sort(dirs.begin(), dirs.end());
  for (const auto& dir : dirs) {
    std::string model;
    auto info = read_text(dir + "/information");
    if (info) {
      std::istringstream lines(*info);
      std::string line;
      while (std::getline(lines, line)) {
        if (line.rfind("Model:", 0) == 0) model = trim(line.substr(6));
      }
    }
    std::string bus = std::filesystem::path(dir).filename().string();
    d.gpus.push_back((model.empty() ? std::string("unknown GPU") : model) + " (" + bus + ")");
  }
  return d;
}

CheckResult check_nvidia_driver(const std::optional<NvidiaDriver>& driver) {
  if (!driver)
    return result("nvidia_driver", CheckStatus::Warn,
                  "no NVIDIA driver (/proc/driver/nvidia absent): CUDA calls can be traced, GPUs cannot be listed",
                  "on a GPU host, install the NVIDIA driver (apt install nvidia-driver); not needed for demo/explain");
  std::string detail = "driver " + driver->version + ", " + std::to_string(driver->gpus.size()) + " GPU(s)";
  for (size_t i = 0; i < driver->gpus.size(); ++i) detail += (i == 0 ? ": " : "; ") + driver->gpus[i];
  if (driver->gpus.empty())
    return result("nvidia_driver", CheckStatus::Warn, detail, "no GPU visible: check nvidia-smi and the device's passthrough");
  return result("nvidia_driver", CheckStatus::Ok, detail);
}

CheckResult check_gpu_libraries(const std::vector<LibraryFile>& libraries) {
  if (libraries.empty())
    return result("gpu_libraries", CheckStatus::Warn,
                  "no libcudart, libcuda, libnccl, libamdhip64 or libibverbs found",
                  "install CUDA/NCCL (or the pip wheels), or point causeway trace at the library with --lib PATH");
  std::map<std::string, int> by_kind;
  for (const auto& l : libraries) ++by_kind[std::string(library_kind_name(l.kind))];
  std::string detail = std::to_string(libraries.size()) + " file(s):";
  bool first = true;
  for (const auto& [kind, n] : by_kind) {
    detail += (first ? " " : ", ") + std::to_string(n) + " " + kind;
    first = false;
  }
  return result("gpu_libraries", CheckStatus::Ok, detail);
}

namespace {
// "libcudart.so.13.0.96" -> {13, 0, 96}; the numbers after ".so." in any of
// the file's names (the soname link has fewer).
std::vector<int> so_version(const LibraryFile& l) {
  std::vector<int> best;
  std::vector<std::string> names = l.aliases;
  names.push_back(l.path);
  for (const auto& n : names) {
    const std::string base = std::filesystem::path(n).filename().string();
    const auto at = base.find(".so.");
    if (at == std::string::npos) continue;
    std::vector<int> v;
    std::istringstream parts(base.substr(at + 4));
    for (std::string p; std::getline(parts, p, '.');) {
      if (p.empty() || !std::all_of(p.begin(), p.end(), ::isdigit)) break;
      v.push_back(std::stoi(p));
    }
    if (v.size() > best.size()) best = v;
  }
  return best;
}
}  // namespace

int min_driver_for_cuda(int runtime_major) {
  switch (runtime_major) {
    case 13: return 580;
    case 12: return 525;  // minor-version compatibility: any 12.x runtime on a 525+ driver
    case 11: return 450;
    default: return 0;    // unknown
  }
}

CheckResult check_cuda_versions(const std::optional<NvidiaDriver>& driver, const std::vector<LibraryFile>& libraries) {
  int driver_major = 0;
  if (driver && !driver->version.empty() && std::isdigit(static_cast<unsigned char>(driver->version[0])))
    driver_major = std::stoi(driver->version);
  std::string detail, fix;
  CheckStatus status = CheckStatus::Ok;
  auto worse = [&](CheckStatus s) {
    if (int(s) > int(status)) status = s;
  };
  // The kernel module and the user-space driver library must be one version.
  for (const auto& l : libraries) {
    if (l.kind != LibraryKind::Cuda || !driver) continue;
    const auto v = so_version(l);
    if (v.size() < 2 || v[0] < 100) continue;  // libcuda.so.1 only: no version in the name
    std::string lib_version;
    for (size_t i = 0; i < v.size(); i++) lib_version += (i ? "." : "") + std::to_string(v[i]);
    // By number: libcuda.so.580.159.04 is driver 580.159.04.
    std::vector<int> module_version;
    std::istringstream parts(driver->version);
    for (std::string p; std::getline(parts, p, '.');)
      module_version.push_back(!p.empty() && std::isdigit(static_cast<unsigned char>(p[0])) ? std::stoi(p) : -1);
    if (module_version != std::vector<int>(v.begin(), v.end())) {
      worse(CheckStatus::Fail);
      detail += (detail.empty() ? "" : "; ") + l.path + " is driver " + lib_version + " but the kernel module is " +
                driver->version + ": calls fail with cudaErrorSystemDriverMismatch (803)";
      fix = "reboot (or reload the nvidia module) after a driver upgrade; in a container, use the host's libcuda "
            "(the NVIDIA container toolkit mounts it)";
    }
  }
  std::set<int> seen;
  for (const auto& l : libraries) {
    if (l.kind != LibraryKind::Cudart) continue;
    const auto v = so_version(l);
    if (v.empty() || !seen.insert(v[0]).second) continue;
    const int need = min_driver_for_cuda(v[0]);
    std::string line = "libcudart.so." + std::to_string(v[0]) + " (CUDA " + std::to_string(v[0]) + ")";
    if (!need) {
      line += ": needs a driver this causeway does not know";
    } else if (!driver) {
      worse(CheckStatus::Warn);
      line += " needs driver >= " + std::to_string(need) + "; none here: its calls fail with "
              "cudaErrorInsufficientDriver (35)";
      if (fix.empty()) fix = "on a GPU host, install NVIDIA driver " + std::to_string(need) + " or newer";
    } else if (driver_major && driver_major < need) {
      worse(CheckStatus::Fail);
      line += " needs driver >= " + std::to_string(need) + "; this host has " + driver->version +
              ": every call fails with cudaErrorInsufficientDriver (35)";
      fix = "install driver " + std::to_string(need) + " or newer, or the cuda-compat package for CUDA " +
            std::to_string(v[0]) + " (forward compatibility, datacenter GPUs)";
    } else {
      line += " needs driver >= " + std::to_string(need) + ": " + (driver ? driver->version : "") + " is enough";
    }
    detail += (detail.empty() ? "" : "; ") + line;
  }
  if (detail.empty()) detail = "no CUDA runtime found to compare with the driver";
  return result("cuda_versions", status, detail, fix);
}

CheckResult check_process_scan(const DiscoverStats& stats, size_t gpu_processes, const Privileges& p) {
  std::string detail = "scanned " + std::to_string(stats.processes_scanned) + " processes, " +
                       std::to_string(gpu_processes) + " map a GPU library";
  if (stats.processes_unreadable == 0) return result("process_scan", CheckStatus::Ok, detail);
  detail += "; " + std::to_string(stats.processes_unreadable) + " could not be read";
  if (p.euid != 0) {
    detail += " (needs root)";
    return result("process_scan", CheckStatus::Warn, detail, kNeedsRootFix);
  }
  return result("process_scan", CheckStatus::Warn, detail + " even as root (another user namespace, Yama or an LSM)",
                "trace from the same container/namespace as the workload, or pass its libraries with --lib PATH");
}

bool ReadinessReport::any_failed() const {
  for (const auto& c : checks)
    if (c.status == CheckStatus::Fail) return true;
  return false;
}

std::vector<CheckResult> run_trace_preflight() {
  return {check_kernel_version(kernel_release()), check_btf(), check_privileges(current_privileges()),
          check_lockdown(read_text("/sys/kernel/security/lockdown"))};
}

std::string describe_failures(const std::vector<CheckResult>& checks) {
  std::string out;
  for (const auto& c : checks) {
    if (c.status != CheckStatus::Fail) continue;
    if (!out.empty()) out += "; ";
    out += c.name + ": " + c.detail;
    if (!c.fix.empty()) out += " (fix: " + c.fix + ")";
  }
  return out;
}

ReadinessReport run_discovery_checks() {
  ReadinessReport report;
  auto& checks = report.checks;
  checks.push_back(check_kernel_version(kernel_release()));
  checks.push_back(check_btf());
  Privileges priv = current_privileges();
  checks.push_back(check_privileges(priv));
  checks.push_back(check_tracefs(read_text("/proc/self/mounts").value_or("")));
  checks.push_back(check_unprivileged_bpf(read_text("/proc/sys/kernel/unprivileged_bpf_disabled"), priv));
  checks.push_back(check_lockdown(read_text("/sys/kernel/security/lockdown")));
  checks.push_back(check_nvidia_driver(read_nvidia_driver()));

  DiscoverStats stats;
  report.libraries = discover_libraries({}, &stats);
  checks.push_back(check_gpu_libraries(report.libraries));
  checks.push_back(check_cuda_versions(read_nvidia_driver(), report.libraries));
  DiscoverStats process_stats;
  report.processes = list_gpu_processes("/proc", &process_stats);
  checks.push_back(check_process_scan(process_stats, report.processes.size(), priv));
  return report;
}

}  // namespace causeway::discover
