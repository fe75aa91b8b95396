// SPDX-License-Identifier: Apache-2.0
#pragma once
// Running processes: who maps a GPU library, and what a process is (comm,
// command line, cgroup, parent, start time) for the processes dictionary.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "causeway/discover/libraries.h"
#include "causeway/model/records.h"
#include "causeway/model/threads.h"

namespace causeway::discover {

struct GpuProcess {
  uint32_t pid = 0;
  std::string comm;
  std::string cmdline;
  std::vector<LibraryFile> libraries;  // the GPU libraries it maps
};

// Every process under `proc_root` that maps at least one GPU library, by pid.
// Processes we may not read (other users' without root) are counted in
// `stats` and skipped.
std::vector<GpuProcess> list_gpu_processes(const std::string& proc_root = "/proc", DiscoverStats* stats = nullptr);

// comm, cmdline (arguments joined by spaces), cgroup (the v2 path, else the
// first hierarchy's), ppid and start time (wall-clock ns) of one process;
// nullopt when it is gone or unreadable. Fields that cannot be read stay empty.
// With runtime_root, the container runtimes' state (containerd's and CRI-O's
// OCI config.json of the container) names the pod.
std::optional<model::ProcessInfo> read_process_info(uint32_t pid, const std::string& proc_root = "/proc",
                                                    const std::string& runtime_root = "/");

// The threads of a process and their names now (/proc/PID/task/*/comm),
// what CW_THREAD_FOUND; empty when it is gone.
std::vector<model::ThreadName> thread_names(uint32_t pid, const std::string& proc_root = "/proc");

// The container and Kubernetes pod a cgroup v2 path names, if any:
// ".../kubepods-burstable-pod<uid with _>.slice/cri-containerd-<id>.scope",
// ".../kubepods/burstable/pod<uid>/<id>", ".../docker-<id>.scope",
// "/docker/<id>", ".../crio-<id>.scope".
struct ContainerRef {
  std::string container_id, pod_uid;
};
ContainerRef container_of(std::string_view cgroup_path);
// Pod name and namespace from the runtime's state for this container
// (containerd: run/containerd/io.containerd.runtime.v2.task/k8s.io/ID/config.json;
// CRI-O: run/containers/storage/overlay-containers/ID/userdata/config.json,
// under runtime_root); empty when neither is there.
std::pair<std::string, std::string> pod_of(const std::string& container_id, const std::string& runtime_root = "/");

// A command line as the kernel keeps it (arguments separated by NULs) as
// one line: arguments joined by spaces.
std::string join_cmdline(std::string_view raw);

// The fields of /proc/PID/stat we use; the comm may hold spaces and ')'.
struct ProcStat {
  std::string comm;
  char state = '?';
  uint32_t ppid = 0;
  uint64_t start_ticks = 0;  // since boot, in clock ticks (USER_HZ)
};
std::optional<ProcStat> parse_proc_stat(const std::string& text);

}  // namespace causeway::discover
