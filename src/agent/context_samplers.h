// SPDX-License-Identifier: Apache-2.0
// The host context the agent samples beside the rings (agent.cpp).
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>

#include "causeway/agent/agent.h"
#include "causeway/consume/ib_counters.h"
#include "causeway/consume/kmsg_xids.h"
#include "causeway/consume/nvml_sampler.h"
#include "causeway/discover/cgroup_memory.h"
#include "causeway/discover/libraries.h"

namespace causeway::agent {

// The host context sampled beside the rings, when the trace starts, each
// second and when it stops: RDMA port counters, the GPUs, and the cgroups of
// the traced processes.
class ContextSamplers {
 public:
  using Traced = std::map<uint32_t, discover::ProcessCoverage>;  // the traced processes, by pid
  ContextSamplers(const AgentConfig& c, int64_t mono_to_wall);
  // `all`: every counter, cgroup and process, changed or not (the trace's
  // last sample).
  void sample(model::Batch& b, const Traced& traced, bool all);

 private:
  void sample_gpus(model::Batch& b);
  void sample_cgroups(model::Batch& b, const Traced& traced, bool all);
  void sample_memory_limits(model::Batch& b, const Traced& traced, bool all);

  const bool host_;
  const int64_t mono_to_wall_;
  // RDMA port counters: cumulative, sampled with the op counts (no HCA: no files).
  consume::IbCounterPoller ib_counters_;
  // The GPUs through NVML, once a second (none without a driver).
  consume::NvmlSampler nvml_;
  bool have_nvml_ = false;
  // GPU faults as the driver logs them, with the process they hit.
  consume::KmsgXidReader kmsg_;
  // The CPU limits of the traced processes' cgroups (host context): each
  // second where a limit is set (its counters say how often it throttled),
  // once otherwise.
  std::set<std::string> cgroups_told_;
  // Their memory limits (reclaim and refault counters, PSI) the same way,
  // and the CPUs each may use with its thread count when they change.
  std::set<std::string> memory_told_;
  // Where each process under a memory limit was, to read its cgroup once
  // more after it exits.
  std::map<uint32_t, discover::ProcCgroup> memory_where_;
  std::map<uint32_t, std::pair<int, int>> cpus_told_;
};

}  // namespace causeway::agent
