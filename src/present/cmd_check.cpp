// SPDX-License-Identifier: Apache-2.0
// `causeway check [--json]`: formats the readiness report of
// discover/readiness.h. Exit 1 when any check fails.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>

#include "causeway/common/error.h"
#include "causeway/attach/bpf_checks.h"
#include "causeway/consume/kmsg_xids.h"
#include "causeway/consume/nvml_sampler.h"
#include "causeway/present/commands.h"

namespace causeway::present {
namespace {

using discover::CheckStatus;

nlohmann::json library_json(const discover::LibraryFile& l) {
  return {{"kind", std::string(library_kind_name(l.kind))},
          {"path", l.path},
          {"embedded", l.embedded},
          {"dev", l.id.dev},
          {"ino", l.id.ino},
          {"found_by", l.found_by},
          {"aliases", l.aliases},
          {"pids", l.pids}};
}

nlohmann::json report_json(const discover::ReadinessReport& r) {
  nlohmann::json checks = nlohmann::json::array();
  for (const auto& c : r.checks)
    checks.push_back({{"name", c.name},
                      {"status", std::string(discover::check_status_name(c.status))},
                      {"detail", c.detail},
                      {"fix", c.fix}});
  nlohmann::json libraries = nlohmann::json::array();
  for (const auto& l : r.libraries) libraries.push_back(library_json(l));
  nlohmann::json processes = nlohmann::json::array();
  for (const auto& p : r.processes) {
    nlohmann::json libs = nlohmann::json::array();
    for (const auto& l : p.libraries)
      libs.push_back({{"kind", std::string(library_kind_name(l.kind))}, {"path", l.path}, {"embedded", l.embedded}});
    processes.push_back({{"pid", p.pid}, {"comm", p.comm}, {"cmdline", p.cmdline}, {"libraries", libs},
                         {"coverage", discover::coverage_of(p.libraries).describe()}});
  }
  return {{"checks", checks}, {"libraries", libraries}, {"processes", processes}};
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

void print_text(const discover::ReadinessReport& r) {
  for (const auto& c : r.checks) {
    std::printf("%-5s %-17s %s\n", std::string(discover::check_status_name(c.status)).c_str(), c.name.c_str(),
                c.detail.c_str());
    if (c.status != CheckStatus::Ok && !c.fix.empty()) std::printf("      %-17s fix: %s\n", "", c.fix.c_str());
  }
  std::printf("\nGPU libraries (%zu):\n", r.libraries.size());
  for (const auto& l : r.libraries) {
    std::printf("  %-12s %s  [%s]%s\n", std::string(library_kind_name(l.kind)).c_str(), l.path.c_str(),
                join(l.found_by, ", ").c_str(), l.embedded ? " (runtime linked in)" : "");
    std::vector<std::string> others;
    for (const auto& a : l.aliases)
      if (a != l.path) others.push_back(a);
    constexpr size_t kShown = 3;
    if (others.size() > kShown) {
      size_t more = others.size() - kShown;
      others.resize(kShown);
      others.push_back("(+" + std::to_string(more) + " more, see --json)");
    }
    if (!others.empty()) std::printf("  %-12s also as %s\n", "", join(others, ", ").c_str());
  }
  std::printf("\nProcesses mapping a GPU library (%zu):\n", r.processes.size());
  for (const auto& p : r.processes) {
    std::vector<std::string> kinds;
    for (const auto& l : p.libraries) kinds.emplace_back(library_kind_name(l.kind));
    std::printf("  %-8u %-16s %s  [%s]\n", p.pid, p.comm.c_str(), p.cmdline.substr(0, 80).c_str(),
                join(kinds, ", ").c_str());
    std::printf("  %-8s %-16s %s\n", "", "", discover::coverage_of(p.libraries).describe().c_str());
  }
}

}  // namespace

void add_check_command(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "check",
      "Report whether this host can trace, and what it would trace: kernel, BTF, privileges, tracefs, "
      "lockdown, a real BPF load and uprobe, the NVIDIA driver, GPU libraries and the processes using them. "
      "Each line is ok, warn or fail with a fix. Exit 1 when anything fails. Works without root and says what "
      "it could not check.");
  auto json = std::make_shared<bool>(false);
  auto nvml_lib = std::make_shared<std::string>("libnvidia-ml.so.1");
  sub->add_flag("--json", *json, "Print {checks, libraries, processes} as JSON");
  sub->add_option("--nvml-lib", *nvml_lib, "NVML library to check (as trace --nvml-lib)");
  sub->callback([json, nvml_lib] {
    auto report = attach::run_readiness_checks();
    // NVML: what trace samples beside the events (GPU utilisation, memory, health).
    consume::NvmlSampler nvml(*nvml_lib);
    if (*nvml_lib == "off") {
      report.checks.push_back({"nvml", CheckStatus::Ok, "not checked (--nvml-lib off)", ""});
    } else if (nvml.start()) {
      const int cuda = nvml.cuda_driver_version();
      report.checks.push_back({"nvml", CheckStatus::Ok,
                               std::to_string(nvml.devices()) + " GPU(s) sampled once a second; driver " +
                                   nvml.driver_version() + " supports CUDA " + std::to_string(cuda / 1000) + "." +
                                   std::to_string(cuda % 1000 / 10),
                               ""});
    } else {
      report.checks.push_back({"nvml", CheckStatus::Warn, nvml.why() + ": no GPU utilisation, memory or health samples",
                               "on a GPU host, install the NVIDIA driver (it ships libnvidia-ml.so.1)"});
    }
    // The kernel log: the NVIDIA driver's XID lines name the faulting process.
    if (const std::string why = consume::kmsg_unreadable_reason(); why.empty())
      report.checks.push_back({"kmsg", CheckStatus::Ok,
                               "the kernel log is readable: a GPU fault (XID) is joined to the process it hit", ""});
    else
      report.checks.push_back({"kmsg", CheckStatus::Warn,
                               why + ": GPU faults (XIDs) come from NVML alone, without their process",
                               "run as root, or with CAP_SYSLOG (the systemd unit has it)"});
    // PyTorch's allocator: memory by tensor, or only by the driver's segments.
    std::vector<std::string> hidden;
    int by_usdt = 0, by_symbols = 0;
    for (const auto& l : report.libraries)
      if (l.kind == LibraryKind::C10Cuda) switch (discover::torch_allocator_probes(l.path)) {
          case discover::TorchAllocatorProbes::Usdt: by_usdt++; break;
          case discover::TorchAllocatorProbes::Symbols: by_symbols++; break;
          case discover::TorchAllocatorProbes::None: hidden.push_back(l.path); break;
        }
    if (!hidden.empty())
      report.checks.push_back({"torch allocator", CheckStatus::Warn,
                               join(hidden, ", ") + ": neither the caching allocator's USDT probes nor its symbols: "
                               "GPU memory is seen by the segments the driver hands out, not by the tensor and its line",
                               "use a PyTorch build with its USDT probes or symbol table (the pip wheels have both)"});
    else if (by_usdt + by_symbols)
      report.checks.push_back(
          {"torch allocator", CheckStatus::Ok,
           std::to_string(by_usdt + by_symbols) + " libc10_cuda.so: tensor allocations and frees are probed through " +
               (by_symbols == 0 ? "its USDT probes" : by_usdt == 0 ? "its symbols" : "USDT probes or symbols") +
               " (memory by the line that keeps a tensor)",
           ""});
    if (*json) {
      std::printf("%s\n", report_json(report).dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else {
      print_text(report);
    }
    std::fflush(stdout);
    if (report.any_failed()) {
      std::vector<std::string> failed;
      for (const auto& c : report.checks)
        if (c.status == CheckStatus::Fail) failed.push_back(c.name);
      throw Error("check failed: " + join(failed, ", "));
    }
  });
}

}  // namespace causeway::present
