// SPDX-License-Identifier: Apache-2.0
#include "causeway/consume/kmsg_xids.h"

#include <errno.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <array>
#include <cctype>
#include <charconv>
#include <cstring>
#include <fstream>

namespace causeway::consume {

namespace {

std::optional<int64_t> number(std::string_view s) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

std::optional<model::GpuEvent> parse_kmsg_xid(std::string_view record) {
  // "6,1234,46529012,-;NVRM: Xid (PCI:0000:00:06): 13, pid=686, name=python3, Graphics Exception: ..."
  const size_t semi = record.find(';');
  if (semi == std::string_view::npos) return std::nullopt;
  std::string_view prefix = record.substr(0, semi), msg = record.substr(semi + 1);
  if (auto nl = msg.find('\n'); nl != std::string_view::npos) msg = msg.substr(0, nl);
  const size_t c1 = prefix.find(','), c2 = c1 == std::string_view::npos ? c1 : prefix.find(',', c1 + 1);
  if (c2 == std::string_view::npos) return std::nullopt;
  const size_t c3 = prefix.find(',', c2 + 1);
  const auto pri = number(prefix.substr(0, c1));
  const auto ts_us = number(prefix.substr(c2 + 1, c3 == std::string_view::npos ? std::string_view::npos : c3 - c2 - 1));
  // Facility 0 is the kernel: the kernel rewrites facility 0 of anything
  // user space writes to /dev/kmsg, so a forged line cannot pass.
  if (!pri || !ts_us || *pri < 0 || (*pri >> 3) != 0) return std::nullopt;
  constexpr std::string_view kTag = "NVRM: Xid (PCI:";
  const size_t tag = msg.find(kTag);
  if (tag == std::string_view::npos) return std::nullopt;
  msg.remove_prefix(tag + kTag.size());
  const size_t close = msg.find("): ");
  if (close == std::string_view::npos || close == 0 || close > 32) return std::nullopt;
  model::GpuEvent e;
  e.source = "kmsg";
  e.pci = std::string(msg.substr(0, close));
  msg.remove_prefix(close + 3);
  const size_t comma = msg.find(',');
  const auto code = number(trim(msg.substr(0, comma)));
  if (!code || *code <= 0 || *code > 100000) return std::nullopt;
  e.event = "xid";
  e.code = *code;
  e.ts_ns = *ts_us * 1000;
  e.gpu = -1;  // the PCI address says which; NVML's index is joined in analysis
  msg = comma == std::string_view::npos ? std::string_view() : trim(msg.substr(comma + 1));
  // Optional "pid=686, name=python3, " (older drivers: pid='<unknown>').
  if (msg.starts_with("pid=")) {
    const size_t end = msg.find(',');
    if (auto pid = number(msg.substr(4, end == std::string_view::npos ? std::string_view::npos : end - 4));
        pid && *pid > 0 && *pid < (int64_t(1) << 32))
      e.pid = uint32_t(*pid);
    msg = end == std::string_view::npos ? std::string_view() : trim(msg.substr(end + 1));
    if (msg.starts_with("name=")) {
      const size_t nend = msg.find(',');
      std::string_view name = msg.substr(5, nend == std::string_view::npos ? std::string_view::npos : nend - 5);
      if (name != "<unknown>" && name.size() <= 64) e.process = std::string(name);
      msg = nend == std::string_view::npos ? std::string_view() : trim(msg.substr(nend + 1));
    }
  }
  e.detail = std::string(msg.substr(0, 240));
  return e;
}

KmsgXidReader::KmsgXidReader(std::string path) : path_(std::move(path)) {}

KmsgXidReader::~KmsgXidReader() {
  if (fd_ >= 0) close(fd_);
}

std::string kmsg_unreadable_reason(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd >= 0) {
    close(fd);
    return "";
  }
  const int err = errno;
  if (err == EPERM || err == EACCES) {
    // CAP_SYSLOG is bit 34 of the effective set.
    bool cap = false, restrict = true;
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);)
      if (line.rfind("CapEff:", 0) == 0) cap = (std::strtoull(line.c_str() + 7, nullptr, 16) >> 34) & 1;
    std::ifstream sysctl("/proc/sys/kernel/dmesg_restrict");
    int v = 1;
    if (sysctl >> v) restrict = v != 0;
    return kmsg_refused_reason(path, err, cap, restrict);
  }
  return "cannot read " + path + ": " + strerror(err);
}

std::string kmsg_refused_reason(const std::string& path, int err, bool cap_syslog, bool dmesg_restrict) {
  const std::string head = "cannot read " + path + " (" + strerror(err) + "): ";
  if (!cap_syslog && dmesg_restrict) return head + "reading the kernel log needs CAP_SYSLOG while kernel.dmesg_restrict=1";
  return head + "the device is not allowed here (a container's device cgroup): allow " + path +
         " to the container, run it privileged, or trace with --kmsg off";
}

bool KmsgXidReader::start() {
  if (path_ == "off") {
    why_ = "off";
    return false;
  }
  fd_ = open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) {
    why_ = kmsg_unreadable_reason(path_);
    return false;
  }
  // What was logged before the trace is not this trace's (a FIFO cannot seek: fine).
  lseek(fd_, 0, SEEK_END);
  return true;
}

void KmsgXidReader::take_line(std::string_view line, model::Batch& batch, int64_t mono_to_wall) {
  lines_++;
  auto e = parse_kmsg_xid(line);
  if (!e) return;
  e->ts_ns += mono_to_wall;
  spdlog::warn("GPU {}: XID {} in the kernel log{}", e->pci.value_or("?"), e->code,
               e->pid ? " (pid " + std::to_string(*e->pid) + " " + e->process.value_or("") + ")" : std::string());
  batch.add(std::move(*e));
}

void KmsgXidReader::read(model::Batch& batch, int64_t mono_to_wall) {
  if (fd_ < 0) return;
  std::array<char, 8192> buf;
  // Bounded: a log flood costs at most this much a call.
  for (int n = 0; n < 256; n++) {
    const ssize_t got = ::read(fd_, buf.data(), buf.size());
    if (got < 0) {
      if (errno == EPIPE) continue;  // records were overwritten before we read them: go on
      if (errno == EINTR) continue;
      return;                        // EAGAIN: nothing more now
    }
    if (got == 0) return;            // a FIFO with no writer, the end of a file
    // /dev/kmsg gives one record a read; a FIFO or file gives lines: split
    // both on newlines. Continuation lines (" KEY=value") are not records.
    partial_.append(buf.data(), size_t(got));
    size_t start = 0;
    for (size_t nl; (nl = partial_.find('\n', start)) != std::string::npos; start = nl + 1) {
      std::string_view line(partial_.data() + start, nl - start);
      if (!line.empty() && line[0] != ' ') take_line(line, batch, mono_to_wall);
    }
    partial_.erase(0, start);
    if (partial_.size() > 65536) partial_.clear();  // a line without end: not a record
  }
}

}  // namespace causeway::consume
