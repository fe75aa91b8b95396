// SPDX-License-Identifier: Apache-2.0
#include "context_samplers.h"

#include <spdlog/spdlog.h>

#include <optional>

#include "causeway/common/time.h"
#include "causeway/discover/cgroup_cpu.h"
#include "causeway/discover/process_cpus.h"

namespace causeway::agent {

ContextSamplers::ContextSamplers(const AgentConfig& c, int64_t mono_to_wall)
    : host_(c.host), mono_to_wall_(mono_to_wall), ib_counters_(c.sysfs_root), nvml_(c.nvml_library),
      kmsg_(c.kmsg_path) {
  if (size_t n = ib_counters_.start()) spdlog::info("sampling {} RDMA port counters", n);
  have_nvml_ = c.nvml_library != "off" && nvml_.start();
  if (!have_nvml_ && c.nvml_library != "off") spdlog::info("no GPU samples: {}", nvml_.why());
  if (!kmsg_.start() && c.kmsg_path != "off")
    spdlog::warn("GPU faults will not be joined to their process: {}", kmsg_.why());
}

void ContextSamplers::sample(model::Batch& b, const Traced& traced, bool all) {
  ib_counters_.sample(b, wall_now_ns(), all);
  sample_gpus(b);
  sample_cgroups(b, traced, all);
}

void ContextSamplers::sample_gpus(model::Batch& b) {
  if (have_nvml_) nvml_.sample(b, wall_now_ns());
  kmsg_.read(b, mono_to_wall_);
}

void ContextSamplers::sample_cgroups(model::Batch& b, const Traced& traced, bool all) {
  if (!host_) return;  // host context, as the scheduler's records are
  std::set<std::string> now;
  for (const auto& [pid, c] : traced) {
    auto s = discover::read_cgroup_cpu(pid);
    if (!s || !now.insert(s->cgroup).second) continue;
    if (!s->quota_us && !all && !cgroups_told_.insert(s->cgroup).second) continue;
    s->ts_ns = wall_now_ns();
    b.add(std::move(*s));
  }
  sample_memory_limits(b, traced, all);
}

void ContextSamplers::sample_memory_limits(model::Batch& b, const Traced& traced, bool all) {
  std::set<std::string> now;
  for (const auto& [pid, c] : traced) {
    const auto where = discover::read_proc_cgroup(pid, "/proc", "memory");
    std::optional<model::CgroupMemorySample> s;
    if (where) {
      s = discover::read_cgroup_memory_in(*where);
      if (s && (s->limit_bytes || s->high_bytes)) memory_where_[pid] = *where;
    } else if (auto it = memory_where_.find(pid); it != memory_where_.end()) {
      // Gone since the last sample: its limited cgroup read once more, for
      // the counters over its last second (a job shorter than a couple of
      // seconds has no other reading after its steps).
      s = discover::read_cgroup_memory_in(it->second);
      memory_where_.erase(it);
    }
    if (s && now.insert(s->cgroup).second) {
      s->pid = pid;
      const bool limited = s->limit_bytes || s->high_bytes;
      if (limited || all || memory_told_.insert(s->cgroup).second) {
        s->ts_ns = wall_now_ns();
        b.add(std::move(*s));
      }
    }
    if (auto p = discover::read_process_cpus(pid)) {
      auto& told = cpus_told_[pid];
      if (all || told != std::pair(p->cpus, p->threads)) {
        told = {p->cpus, p->threads};
        p->ts_ns = wall_now_ns();
        b.add(std::move(*p));
      }
    }
  }
}

}  // namespace causeway::agent
