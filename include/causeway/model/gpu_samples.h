// SPDX-License-Identifier: Apache-2.0
#pragma once
// The GPUs themselves, sampled through NVML beside the events
// (src/consume/nvml_sampler.cpp: libnvidia-ml.so.1 opened at run time, no
// link dependency; nothing on a host without the driver). No BPF: what a
// CUDA call cannot show (how busy the GPU was, its memory, clocks, power,
// throttling, ECC and XID errors) comes from here, once a second.
#include <optional>
#include <string>

#include "causeway/model/family.h"

namespace causeway::model {

struct GpuDevice {
  int gpu = 0;  // NVML index
  std::string uuid, name, driver;
  std::optional<int64_t> mem_total, sm_clock_max, mem_clock_max, power_limit_mw;
  std::optional<std::string> pci;  // "0000:3b:00": domain, bus, device (as the kernel log names it)
  std::optional<int64_t> power_default_mw;  // the board's default limit: the enforced one below it was lowered
};

struct GpuSample {
  int64_t ts_ns = 0;
  int gpu = 0;
  std::optional<int64_t> util_gpu, util_mem;   // %, over the driver's last sample period
  std::optional<int64_t> mem_used;             // bytes
  std::optional<int64_t> sm_clock, mem_clock;  // MHz
  std::optional<int64_t> power_mw, temp_c;
  std::optional<int64_t> throttle;             // nvmlClocksEventReasons bits
  std::optional<int64_t> ecc_corrected, ecc_uncorrected;  // volatile counts since boot
  std::optional<int64_t> retired_pages, remap_pending;
  std::optional<int64_t> pcie_replays;
};

struct GpuProcessSample {
  int64_t ts_ns = 0;
  int gpu = 0;
  uint32_t pid = 0;
  std::optional<int64_t> sm_util, mem_util;  // % since the previous sample
  std::optional<int64_t> mem_used;           // bytes of device memory it holds
};

struct GpuEvent {
  int64_t ts_ns = 0;
  int gpu = 0;        // NVML index; -1 when only the PCI address is known (kernel log)
  std::string event;  // xid | ecc_single | ecc_double | clock_change | power
  int64_t code = 0;   // the XID number; else the raw event data
  std::string source = "nvml";       // nvml | kmsg (the driver's own log line)
  std::optional<uint32_t> pid;       // the process the driver named (kernel log only)
  std::optional<std::string> process, pci, detail;
};

struct GpuDevices {
  using Row = GpuDevice;
  static constexpr Column<Row> kColumns[] = {
      {"gpu", SqlType::Integer, true, "NVML device index", field<&Row::gpu>},
      {"uuid", SqlType::Text, false, "GPU UUID", field<&Row::uuid>},
      {"name", SqlType::Text, false, "model, e.g. `NVIDIA H100 80GB HBM3`", field<&Row::name>},
      {"driver", SqlType::Text, false, "driver version", field<&Row::driver>},
      {"mem_total", SqlType::Integer, false, "device memory, bytes", field<&Row::mem_total>},
      {"sm_clock_max", SqlType::Integer, false, "maximum SM clock, MHz", field<&Row::sm_clock_max>},
      {"mem_clock_max", SqlType::Integer, false, "maximum memory clock, MHz", field<&Row::mem_clock_max>},
      {"power_limit_mw", SqlType::Integer, false, "enforced power limit, mW", field<&Row::power_limit_mw>},
      {"pci", SqlType::Text, false, "PCI address `domain:bus:device`, e.g. `0000:3b:00` (joins the kernel log's XIDs)",
       field<&Row::pci>},
      {"power_default_mw", SqlType::Integer, false,
       "default power limit, mW (the board's): an enforced limit below it was lowered", field<&Row::power_default_mw>},
  };
  static constexpr Table<Row> kTable{
      "gpu_devices", "The GPUs NVML sees, one row per device and session.", TableKind::Keyed, kColumns,
      "ON CONFLICT(session_id, gpu) DO UPDATE SET uuid=excluded.uuid, name=excluded.name, "
      "driver=excluded.driver, mem_total=excluded.mem_total, sm_clock_max=excluded.sm_clock_max, "
      "mem_clock_max=excluded.mem_clock_max, power_limit_mw=excluded.power_limit_mw, pci=excluded.pci, "
      "power_default_mw=excluded.power_default_mw"};
};

struct GpuSamples {
  using Row = GpuSample;
  static constexpr Column<Row> kColumns[] = {
      {"ts_ns", SqlType::Integer, true, "when it was read", field<&Row::ts_ns>},
      {"gpu", SqlType::Integer, true, "NVML device index (→ `gpu_devices.gpu`)", field<&Row::gpu>},
      {"util_gpu", SqlType::Integer, false, "% of the last sample period a kernel ran", field<&Row::util_gpu>},
      {"util_mem", SqlType::Integer, false, "% of it device memory was read or written", field<&Row::util_mem>},
      {"mem_used", SqlType::Integer, false, "device memory in use, bytes", field<&Row::mem_used>},
      {"sm_clock", SqlType::Integer, false, "SM clock, MHz", field<&Row::sm_clock>},
      {"mem_clock", SqlType::Integer, false, "memory clock, MHz", field<&Row::mem_clock>},
      {"power_mw", SqlType::Integer, false, "power draw, mW", field<&Row::power_mw>},
      {"temp_c", SqlType::Integer, false, "GPU temperature, °C", field<&Row::temp_c>},
      {"throttle", SqlType::Integer, false,
       "why clocks are below their maximum (NVML clocks event reasons): 0x1 idle, 0x2 application "
       "setting, 0x4 software power cap, 0x8 hardware slowdown, 0x20 software thermal, 0x40 hardware "
       "thermal, 0x80 hardware power brake, 0x100 display, 0x10 sync boost",
       field<&Row::throttle>},
      {"ecc_corrected", SqlType::Integer, false, "corrected ECC errors since the driver loaded", field<&Row::ecc_corrected>},
      {"ecc_uncorrected", SqlType::Integer, false, "uncorrected ECC errors since the driver loaded", field<&Row::ecc_uncorrected>},
      {"retired_pages", SqlType::Integer, false, "pages retired for ECC errors (pre-Hopper)", field<&Row::retired_pages>},
      {"remap_pending", SqlType::Integer, false, "1 when a row remap awaits a GPU reset (Ampere+)", field<&Row::remap_pending>},
      {"pcie_replays", SqlType::Integer, false, "PCIe replay counter", field<&Row::pcie_replays>},
  };
  static constexpr Table<Row> kTable{"gpu_samples", "Each GPU, once a second (NULL: not supported there).",
                                     TableKind::Samples, kColumns};
};

struct GpuProcessSamples {
  using Row = GpuProcessSample;
  static constexpr Column<Row> kColumns[] = {
      {"ts_ns", SqlType::Integer, true, "when it was read", field<&Row::ts_ns>},
      {"gpu", SqlType::Integer, true, "NVML device index", field<&Row::gpu>},
      {"pid", SqlType::Integer, true, "process using the GPU", field<&Row::pid>},
      {"sm_util", SqlType::Integer, false, "% of the SMs' time its kernels ran since the previous sample", field<&Row::sm_util>},
      {"mem_util", SqlType::Integer, false, "% of memory bandwidth it used since the previous sample", field<&Row::mem_util>},
      {"mem_used", SqlType::Integer, false, "device memory it holds, bytes", field<&Row::mem_used>},
  };
  static constexpr Table<Row> kTable{"gpu_process_samples", "Each process on each GPU, once a second.",
                                     TableKind::Samples, kColumns};
};

struct GpuEvents {
  using Row = GpuEvent;
  static constexpr Column<Row> kColumns[] = {
      {"ts_ns", SqlType::Integer, true, "when NVML reported it, or the kernel logged it", field<&Row::ts_ns>},
      {"gpu", SqlType::Integer, true, "NVML device index; -1 when the kernel log's PCI address is all there is",
       field<&Row::gpu>},
      {"event", SqlType::Text, true, "`xid`, `ecc_single`, `ecc_double`", field<&Row::event>},
      {"code", SqlType::Integer, true, "the XID number (e.g. 79: fell off the bus), else NVML's event data",
       field<&Row::code>},
      {"source", SqlType::Text, true, "`nvml`, or `kmsg`: the NVIDIA driver's line in the kernel log",
       field<&Row::source>},
      {"pid", SqlType::Integer, false, "the process the driver named (`pid=` in the kernel log)", field<&Row::pid>},
      {"process", SqlType::Text, false, "its name, as the driver logged it", field<&Row::process>},
      {"pci", SqlType::Text, false, "the GPU's PCI address `domain:bus:device` (kernel log)", field<&Row::pci>},
      {"detail", SqlType::Text, false, "the rest of the driver's line (fault type, engine, address)",
       field<&Row::detail>},
  };
  static constexpr Table<Row> kTable{
      "gpu_events",
      "Critical GPU events: XID errors and ECC from NVML, and the NVIDIA driver's XID lines in the kernel log "
      "(which name the process).",
      TableKind::Log, kColumns};
};

}  // namespace causeway::model
CAUSEWAY_TABLE(GpuDevices);
CAUSEWAY_TABLE(GpuSamples);
CAUSEWAY_TABLE(GpuProcessSamples);
CAUSEWAY_TABLE(GpuEvents);
