// SPDX-License-Identifier: Apache-2.0
// NVML through dlopen. The types and functions below are NVML's public C ABI
// (nvml.h, stable across drivers: versioned entry points keep old layouts);
// nothing else of the driver is needed.
#include "causeway/consume/nvml_sampler.h"

#include <dlfcn.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <map>
#include <vector>

namespace causeway::consume {
namespace {

using nvmlReturn_t = int;
using nvmlDevice_t = void*;
using nvmlEventSet_t = void*;
constexpr nvmlReturn_t kSuccess = 0, kNotFound = 6, kInsufficientSize = 7;
constexpr unsigned kClockSm = 1, kClockMem = 2, kTemperatureGpu = 0;
constexpr unsigned long long kEventSingleBitEcc = 0x1, kEventDoubleBitEcc = 0x2, kEventXid = 0x8;

struct Utilization {
  unsigned gpu, memory;
};
struct Memory {
  unsigned long long total, free, used;
};
struct ProcessUtilizationSample {
  unsigned pid;
  unsigned long long timestamp;  // µs
  unsigned sm_util, mem_util, enc_util, dec_util;
};
struct ProcessInfo {  // nvmlProcessInfo_t of the _v3 entry point
  unsigned pid;
  unsigned long long used_gpu_memory;
  unsigned gpu_instance_id, compute_instance_id;
};
struct PciInfo {  // nvmlPciInfo_t (the _v2/_v3 entry points)
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};
struct EventData {
  nvmlDevice_t device;
  unsigned long long event_type, event_data;
  unsigned gpu_instance_id, compute_instance_id;
};

}  // namespace

struct NvmlSampler::Api {
  void* handle = nullptr;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  nvmlReturn_t (*count)(unsigned*) = nullptr;
  nvmlReturn_t (*by_index)(unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*uuid)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*pci)(nvmlDevice_t, PciInfo*) = nullptr;
  nvmlReturn_t (*utilization)(nvmlDevice_t, Utilization*) = nullptr;
  nvmlReturn_t (*memory)(nvmlDevice_t, Memory*) = nullptr;
  nvmlReturn_t (*clock)(nvmlDevice_t, unsigned, unsigned*) = nullptr;
  nvmlReturn_t (*max_clock)(nvmlDevice_t, unsigned, unsigned*) = nullptr;
  nvmlReturn_t (*power)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*power_limit)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*power_default)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*temperature)(nvmlDevice_t, unsigned, unsigned*) = nullptr;
  nvmlReturn_t (*throttle)(nvmlDevice_t, unsigned long long*) = nullptr;
  nvmlReturn_t (*ecc)(nvmlDevice_t, unsigned, unsigned, unsigned long long*) = nullptr;
  nvmlReturn_t (*retired)(nvmlDevice_t, unsigned, unsigned*, unsigned long long*) = nullptr;
  nvmlReturn_t (*remapped)(nvmlDevice_t, unsigned*, unsigned*, unsigned*, unsigned*) = nullptr;
  nvmlReturn_t (*replays)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*process_util)(nvmlDevice_t, ProcessUtilizationSample*, unsigned*, unsigned long long) = nullptr;
  nvmlReturn_t (*processes)(nvmlDevice_t, unsigned*, ProcessInfo*) = nullptr;
  nvmlReturn_t (*event_set_create)(nvmlEventSet_t*) = nullptr;
  nvmlReturn_t (*event_set_free)(nvmlEventSet_t) = nullptr;
  nvmlReturn_t (*register_events)(nvmlDevice_t, unsigned long long, nvmlEventSet_t) = nullptr;
  nvmlReturn_t (*event_wait)(nvmlEventSet_t, EventData*, unsigned) = nullptr;
  nvmlReturn_t (*driver_version)(char*, unsigned) = nullptr;
  nvmlReturn_t (*cuda_version)(int*) = nullptr;
  const char* (*error_string)(nvmlReturn_t) = nullptr;

  std::vector<nvmlDevice_t> devices;
  nvmlEventSet_t events = nullptr;
  unsigned long long last_process_sample_us = 0;
  bool devices_written = false;

  template <typename F>
  void load(F& fn, std::initializer_list<const char*> names) {
    for (const char* n : names)
      if (void* p = dlsym(handle, n)) {
        fn = reinterpret_cast<F>(p);
        return;
      }
  }
  std::string error(nvmlReturn_t r) const {
    return error_string ? error_string(r) : "NVML error " + std::to_string(r);
  }
};

NvmlSampler::NvmlSampler(std::string library) : library_(std::move(library)) {}

NvmlSampler::~NvmlSampler() {
  if (!api_) return;
  if (api_->events && api_->event_set_free) api_->event_set_free(api_->events);
  if (api_->shutdown) api_->shutdown();
  if (api_->handle) dlclose(api_->handle);
}

bool NvmlSampler::start() {
  auto api = std::make_unique<Api>();
  api->handle = dlopen(library_.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!api->handle) {
    why_ = "no NVML (" + library_ + " not found: no NVIDIA driver)";
    return false;
  }
  Api& a = *api;
  a.load(a.init, {"nvmlInit_v2", "nvmlInit"});
  a.load(a.shutdown, {"nvmlShutdown"});
  a.load(a.count, {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"});
  a.load(a.by_index, {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"});
  a.load(a.name, {"nvmlDeviceGetName"});
  a.load(a.uuid, {"nvmlDeviceGetUUID"});
  a.load(a.pci, {"nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2"});
  a.load(a.utilization, {"nvmlDeviceGetUtilizationRates"});
  a.load(a.memory, {"nvmlDeviceGetMemoryInfo"});
  a.load(a.clock, {"nvmlDeviceGetClockInfo"});
  a.load(a.max_clock, {"nvmlDeviceGetMaxClockInfo"});
  a.load(a.power, {"nvmlDeviceGetPowerUsage"});
  a.load(a.power_limit, {"nvmlDeviceGetEnforcedPowerLimit"});
  a.load(a.power_default, {"nvmlDeviceGetPowerManagementDefaultLimit"});
  a.load(a.temperature, {"nvmlDeviceGetTemperature"});
  a.load(a.throttle, {"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"});
  a.load(a.ecc, {"nvmlDeviceGetTotalEccErrors"});
  a.load(a.retired, {"nvmlDeviceGetRetiredPages"});
  a.load(a.remapped, {"nvmlDeviceGetRemappedRows"});
  a.load(a.replays, {"nvmlDeviceGetPcieReplayCounter"});
  a.load(a.process_util, {"nvmlDeviceGetProcessUtilization"});
  a.load(a.processes, {"nvmlDeviceGetComputeRunningProcesses_v3"});
  a.load(a.event_set_create, {"nvmlEventSetCreate"});
  a.load(a.event_set_free, {"nvmlEventSetFree"});
  a.load(a.register_events, {"nvmlDeviceRegisterEvents"});
  a.load(a.event_wait, {"nvmlEventSetWait_v2", "nvmlEventSetWait"});
  a.load(a.driver_version, {"nvmlSystemGetDriverVersion"});
  a.load(a.cuda_version, {"nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"});
  a.load(a.error_string, {"nvmlErrorString"});
  if (!a.init || !a.count || !a.by_index) {
    why_ = library_ + " is not NVML (no nvmlInit/nvmlDeviceGetCount)";
    dlclose(a.handle);
    return false;
  }
  if (nvmlReturn_t r = a.init(); r != kSuccess) {
    why_ = "NVML did not start: " + a.error(r);
    dlclose(a.handle);
    return false;
  }
  unsigned n = 0;
  if (a.count(&n) != kSuccess) n = 0;
  for (unsigned i = 0; i < n; i++) {
    nvmlDevice_t d = nullptr;
    if (a.by_index(i, &d) == kSuccess) a.devices.push_back(d);
  }
  // Critical events (XIDs, ECC); a device that cannot deliver them is still sampled.
  if (a.event_set_create && a.register_events && a.event_wait && a.event_set_create(&a.events) == kSuccess) {
    for (auto d : a.devices) {
      if (a.register_events(d, kEventXid | kEventDoubleBitEcc | kEventSingleBitEcc, a.events) != kSuccess)
        a.register_events(d, kEventXid, a.events);
    }
  }
  api_ = std::move(api);
  spdlog::info("NVML: {} GPU(s), driver {}", api_->devices.size(), driver_version());
  return true;
}

int NvmlSampler::devices() const { return api_ ? int(api_->devices.size()) : 0; }

std::string NvmlSampler::driver_version() const {
  char buf[96] = {};
  if (!api_ || !api_->driver_version || api_->driver_version(buf, sizeof buf) != kSuccess) return "";
  return buf;
}

int NvmlSampler::cuda_driver_version() const {
  int v = 0;
  if (!api_ || !api_->cuda_version || api_->cuda_version(&v) != kSuccess) return 0;
  return v;
}

void NvmlSampler::sample(model::Batch& batch, int64_t wall_ns) {
  if (!api_) return;
  Api& a = *api_;
  // v by reference: read after the call that fills it (argument order is unspecified).
  auto value = [](nvmlReturn_t r, const auto& v) -> std::optional<int64_t> {
    return r == kSuccess ? std::optional<int64_t>(int64_t(v)) : std::nullopt;
  };
  if (!a.devices_written) {
    const std::string driver = driver_version();
    for (int i = 0; i < int(a.devices.size()); i++) {
      model::GpuDevice d;
      d.gpu = i;
      d.driver = driver;
      char buf[96] = {};
      if (a.name && a.name(a.devices[size_t(i)], buf, sizeof buf) == kSuccess) d.name = buf;
      std::memset(buf, 0, sizeof buf);
      if (a.uuid && a.uuid(a.devices[size_t(i)], buf, sizeof buf) == kSuccess) d.uuid = buf;
      // As the kernel log names the GPU: "0000:3b:00" (domain:bus:device).
      PciInfo pci{};
      if (a.pci && a.pci(a.devices[size_t(i)], &pci) == kSuccess) {
        char addr[32];
        std::snprintf(addr, sizeof addr, "%04x:%02x:%02x", pci.domain, pci.bus, pci.device);
        d.pci = addr;
      }
      Memory m{};
      if (a.memory) d.mem_total = value(a.memory(a.devices[size_t(i)], &m), m.total);
      unsigned mhz = 0, mw = 0;
      if (a.max_clock) d.sm_clock_max = value(a.max_clock(a.devices[size_t(i)], kClockSm, &mhz), mhz);
      if (a.max_clock) d.mem_clock_max = value(a.max_clock(a.devices[size_t(i)], kClockMem, &mhz), mhz);
      if (a.power_limit) d.power_limit_mw = value(a.power_limit(a.devices[size_t(i)], &mw), mw);
      if (a.power_default) d.power_default_mw = value(a.power_default(a.devices[size_t(i)], &mw), mw);
      batch.add(std::move(d));
    }
    a.devices_written = true;
  }
  unsigned long long newest_us = a.last_process_sample_us;
  for (int i = 0; i < int(a.devices.size()); i++) {
    nvmlDevice_t d = a.devices[size_t(i)];
    model::GpuSample s;
    s.ts_ns = wall_ns;
    s.gpu = i;
    Utilization u{};
    if (a.utilization && a.utilization(d, &u) == kSuccess) {
      s.util_gpu = u.gpu;
      s.util_mem = u.memory;
    }
    Memory m{};
    if (a.memory) s.mem_used = value(a.memory(d, &m), m.used);
    unsigned v = 0;
    if (a.clock) s.sm_clock = value(a.clock(d, kClockSm, &v), v);
    if (a.clock) s.mem_clock = value(a.clock(d, kClockMem, &v), v);
    if (a.power) s.power_mw = value(a.power(d, &v), v);
    if (a.temperature) s.temp_c = value(a.temperature(d, kTemperatureGpu, &v), v);
    unsigned long long bits = 0;
    if (a.throttle) s.throttle = value(a.throttle(d, &bits), bits);
    // Volatile counts (since the driver loaded): 0 corrected, 1 uncorrected.
    if (a.ecc) s.ecc_corrected = value(a.ecc(d, 0, 0, &bits), bits);
    if (a.ecc) s.ecc_uncorrected = value(a.ecc(d, 1, 0, &bits), bits);
    if (a.retired) {
      unsigned sbe = 0, dbe = 0;
      nvmlReturn_t r1 = a.retired(d, 0, &sbe, nullptr), r2 = a.retired(d, 1, &dbe, nullptr);
      if ((r1 == kSuccess || r1 == kInsufficientSize) && (r2 == kSuccess || r2 == kInsufficientSize))
        s.retired_pages = int64_t(sbe) + int64_t(dbe);
    }
    if (a.remapped) {
      unsigned corr = 0, unc = 0, pending = 0, failed = 0;
      if (a.remapped(d, &corr, &unc, &pending, &failed) == kSuccess) s.remap_pending = pending;
    }
    if (a.replays) s.pcie_replays = value(a.replays(d, &v), v);
    batch.add(std::move(s));

    // Each process on this GPU: its SM share since the last sample, its memory.
    std::map<uint32_t, model::GpuProcessSample> procs;
    if (a.processes) {
      unsigned n = 0;
      std::vector<ProcessInfo> infos;
      if (a.processes(d, &n, nullptr) == kInsufficientSize && n > 0) {
        infos.resize(n + 8);
        n = unsigned(infos.size());
        if (a.processes(d, &n, infos.data()) == kSuccess)
          for (unsigned k = 0; k < n && k < infos.size(); k++) {
            auto& p = procs[infos[k].pid];
            p.pid = infos[k].pid;
            p.mem_used = int64_t(infos[k].used_gpu_memory);
          }
      }
    }
    if (a.process_util) {
      unsigned n = 0;
      std::vector<ProcessUtilizationSample> samples;
      const nvmlReturn_t asked = a.process_util(d, nullptr, &n, a.last_process_sample_us);
      // The driver leaves out a process that used no SM since the last
      // sample (NOT_FOUND when none did): those running on it were idle, 0,
      // not unknown (an idle second left out would read a loop that
      // alternates 90% and idle as 90% busy).
      if (asked == kSuccess || asked == kInsufficientSize || asked == kNotFound)
        for (auto& [pid, p] : procs) p.sm_util = 0, p.mem_util = 0;
      if (asked == kInsufficientSize && n > 0) {
        samples.resize(n);
        if (a.process_util(d, samples.data(), &n, a.last_process_sample_us) == kSuccess) {
          // The driver keeps a reading per process per its own period (1/6
          // to 1 s): since the last sample there may be several; their mean
          // is the share since then, not the newest one alone.
          std::map<uint32_t, std::array<int64_t, 3>> sums;  // sm, mem, readings
          for (unsigned k = 0; k < n && k < samples.size(); k++) {
            auto& sum = sums[samples[k].pid];
            sum[0] += samples[k].sm_util, sum[1] += samples[k].mem_util, sum[2]++;
            newest_us = std::max(newest_us, samples[k].timestamp);
          }
          for (const auto& [pid, sum] : sums) {
            auto& p = procs[pid];
            p.pid = pid;
            p.sm_util = (sum[0] + sum[2] / 2) / sum[2];
            p.mem_util = (sum[1] + sum[2] / 2) / sum[2];
          }
        }
      }
    }
    for (auto& [pid, p] : procs) {
      p.ts_ns = wall_ns;
      p.gpu = i;
      batch.add(std::move(p));
    }
  }
  a.last_process_sample_us = newest_us;
  if (a.events && a.event_wait) {
    EventData e{};
    for (int k = 0; k < 64 && a.event_wait(a.events, &e, 0) == kSuccess; k++) {
      int gpu = 0;
      for (int i = 0; i < int(a.devices.size()); i++)
        if (a.devices[size_t(i)] == e.device) gpu = i;
      const char* kind = e.event_type == kEventXid           ? "xid"
                         : e.event_type == kEventDoubleBitEcc ? "ecc_double"
                         : e.event_type == kEventSingleBitEcc ? "ecc_single"
                                                              : "other";
      batch.add(model::GpuEvent{wall_ns, gpu, kind, int64_t(e.event_data)});  // source nvml, no process
      spdlog::warn("GPU {}: NVML event {} {}", gpu, kind, e.event_data);
    }
  }
}

}  // namespace causeway::consume
