// SPDX-License-Identifier: Apache-2.0
#pragma once
// NVIDIA XIDs from the kernel log (/dev/kmsg). NVML's XID events carry no
// process; the driver's own log line does: "NVRM: Xid (PCI:0000:3b:00): 31,
// pid=1234, name=python3, ...". Each such line becomes a gpu_events row with
// its pid, so a GPU fault is joined to the process that caused it.
// Reading /dev/kmsg needs CAP_SYSLOG where kernel.dmesg_restrict=1 (`check`
// says so); without it there are only NVML's events.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "causeway/model/records.h"

namespace causeway::consume {

// One kernel-log record ("PRI,SEQ,TS_USEC,FLAGS;MESSAGE", as /dev/kmsg
// gives it) -> an XID event, when it is a kernel (facility 0) message of the
// NVIDIA driver naming an XID. ts_ns is the record's boot-relative
// timestamp; anything else (another message, a truncated line, a record
// written from user space) -> nullopt.
std::optional<model::GpuEvent> parse_kmsg_xid(std::string_view record);

class KmsgXidReader {
 public:
  // path: /dev/kmsg, or (tests) a FIFO or file of records, one per line;
  // "off": nothing.
  explicit KmsgXidReader(std::string path = "/dev/kmsg");
  ~KmsgXidReader();
  KmsgXidReader(const KmsgXidReader&) = delete;
  KmsgXidReader& operator=(const KmsgXidReader&) = delete;
  // Opens it at its end (only what is logged from now on). False, and
  // why(), when it cannot be read.
  bool start();
  const std::string& why() const { return why_; }
  // Appends the XIDs logged since the last call; mono_to_wall turns the
  // log's boot-relative times into wall-clock ns.
  void read(model::Batch& batch, int64_t mono_to_wall);
  int64_t lines_read() const { return lines_; }

 private:
  void take_line(std::string_view line, model::Batch& batch, int64_t mono_to_wall);
  std::string path_, why_, partial_;
  int fd_ = -1;
  int64_t lines_ = 0;
};

// Whether this process can read the kernel log, in `check`'s words ("" when it can).
std::string kmsg_unreadable_reason(const std::string& path = "/dev/kmsg");
// Why opening the log was refused (EPERM/EACCES), from what the process
// holds: without CAP_SYSLOG while kernel.dmesg_restrict=1, the capability;
// with it (or no restriction), the device itself is not allowed here (a
// container's device cgroup).
std::string kmsg_refused_reason(const std::string& path, int err, bool cap_syslog, bool dmesg_restrict);

}  // namespace causeway::consume
