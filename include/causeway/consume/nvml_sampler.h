// SPDX-License-Identifier: Apache-2.0
#pragma once
// GPU samples through NVML (the GPU-samples family, include/causeway/model/
// gpu_samples.h). libnvidia-ml.so.1 is opened at run time: no link
// dependency, and nothing at all on a host without the driver. Once a second
// the trace loop asks for one row per GPU (utilisation, memory, clocks,
// power, temperature, throttle reasons, ECC, retired/remapped memory, PCIe
// replays), one per process on a GPU (its SM share and memory), and every
// critical event NVML delivered since (XID errors, ECC). A field a GPU does
// not support is NULL.
#include <cstdint>
#include <memory>
#include <string>

#include "causeway/model/records.h"

namespace causeway::consume {

class NvmlSampler {
 public:
  // library: a path or a soname (tests use a stand-in; see workloads/lib/nvidia-ml.c).
  explicit NvmlSampler(std::string library = "libnvidia-ml.so.1");
  ~NvmlSampler();
  NvmlSampler(const NvmlSampler&) = delete;
  NvmlSampler& operator=(const NvmlSampler&) = delete;

  // Opens NVML and its devices. False (and why()) when there is none.
  bool start();
  const std::string& why() const { return why_; }
  int devices() const;
  // The driver's version ("580.82.07") and the CUDA version it supports
  // (13000 = 13.0); empty / 0 when unknown.
  std::string driver_version() const;
  int cuda_driver_version() const;
  // Appends this second's rows (and, the first time, the gpu_devices rows).
  void sample(model::Batch& batch, int64_t wall_ns);

 private:
  struct Api;
  std::string library_;
  std::string why_;
  std::unique_ptr<Api> api_;
};

}  // namespace causeway::consume
