/* SPDX-License-Identifier: (GPL-2.0-only OR Apache-2.0) */
/*
 * Process lifetimes and identity (bpf/host.bpf.c: exec, exit, fork;
 * bpf/libcall.bpf.c: a process's first traced call). The command line is
 * read in the kernel, so that a process gone before user space looks keeps
 * it. Decoded by src/consume/consumer.cpp (exec drives discovery).
 */
#ifndef CAUSEWAY_MODEL_PROCESSES_H
#define CAUSEWAY_MODEL_PROCESSES_H

#include "causeway/events.h"

#define CW_EV_PROC_EXEC 5
#define CW_EV_PROC_EXIT 6
#define CW_EV_PROC_FORK 7
#define CW_EV_PROC_IDENTITY 11  /* who a process is, at its first traced call */

#define CW_ARGS_LEN 256
struct cw_proc_event {
	struct cw_header hdr;   /* pid = the process; for fork, the child */
	__u32 ppid;
	__s32 exit_code;
	char comm[CW_COMM_LEN];
	char filename[64];      /* exec: the file; others: empty */
	__u32 args_len;         /* exec, identity: bytes in args */
	__u32 _pad;
	char args[CW_ARGS_LEN]; /* exec, identity: the command line, NUL-separated (cut at CW_ARGS_LEN) */
};

#ifdef __cplusplus
#include <optional>
#include <string>

#include "causeway/model/family.h"

namespace causeway::model {

struct ProcessInfo {
  uint32_t pid = 0;
  std::string comm;
  std::string cmdline;
  std::string cgroup;
  std::optional<uint32_t> ppid;
  std::optional<int64_t> start_ts_ns;
  std::optional<int64_t> end_ts_ns;
  std::optional<int> exit_code;
  // From the cgroup path (docker, containerd, CRI-O; Kubernetes' systemd and
  // cgroupfs layouts) and the container runtime's state on this host: no API
  // server is asked. Empty when not in a container / not known.
  std::string container_id, pod_uid, pod_name, pod_namespace;
};

struct Processes {
  using Event = cw_proc_event;
  using Row = ProcessInfo;
  static constexpr Column<Row> kColumns[] = {
      {"pid", SqlType::Integer, true, "process id (tgid)", field<&Row::pid>},
      {"comm", SqlType::Text, false, "command name", field<&Row::comm>},
      {"cmdline", SqlType::Text, false, "command line, arguments joined by spaces", field<&Row::cmdline>},
      {"cgroup", SqlType::Text, false, "cgroup v2 path", field<&Row::cgroup>},
      {"ppid", SqlType::Integer, false, "parent", field<&Row::ppid>},
      {"start_ts_ns", SqlType::Integer, false, "fork time when seen", field<&Row::start_ts_ns>},
      {"end_ts_ns", SqlType::Integer, false, "exit time when seen", field<&Row::end_ts_ns>},
      {"exit_code", SqlType::Integer, false, "exit status when seen", field<&Row::exit_code>},
      {"container_id", SqlType::Text, false, "container id (64 hex digits) from the cgroup path", field<&Row::container_id>},
      {"pod_uid", SqlType::Text, false, "Kubernetes pod UID from the cgroup path", field<&Row::pod_uid>},
      {"pod_name", SqlType::Text, false, "pod name, from the container runtime's state on the host", field<&Row::pod_name>},
      {"pod_namespace", SqlType::Text, false, "pod namespace, from the same", field<&Row::pod_namespace>},
  };
  // Each source adds what it knows: a later empty field keeps the earlier value.
  static constexpr Table<Row> kTable{
      "processes", "One row per traced process and session.", TableKind::Keyed, kColumns,
      "ON CONFLICT(session_id, pid) DO UPDATE SET "
      "comm=coalesce(nullif(excluded.comm,''), comm), "
      "cmdline=coalesce(nullif(excluded.cmdline,''), cmdline), "
      "cgroup=coalesce(nullif(excluded.cgroup,''), cgroup), "
      "container_id=coalesce(nullif(excluded.container_id,''), container_id), "
      "pod_uid=coalesce(nullif(excluded.pod_uid,''), pod_uid), "
      "pod_name=coalesce(nullif(excluded.pod_name,''), pod_name), "
      "pod_namespace=coalesce(nullif(excluded.pod_namespace,''), pod_namespace), "
      "ppid=coalesce(excluded.ppid, ppid), "
      "start_ts_ns=coalesce(start_ts_ns, excluded.start_ts_ns), "
      "end_ts_ns=coalesce(excluded.end_ts_ns, end_ts_ns), "
      "exit_code=coalesce(excluded.exit_code, exit_code)"};
};
static_assert(offsetof(cw_proc_event, args) == 128);
static_assert(sizeof(cw_proc_event) == 384);

}  // namespace causeway::model
CAUSEWAY_TABLE(Processes);
#endif /* __cplusplus */

#endif /* CAUSEWAY_MODEL_PROCESSES_H */
