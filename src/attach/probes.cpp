// SPDX-License-Identifier: Apache-2.0
#include "causeway/attach/probes.h"
#include "causeway/attach/versioned_symbol.h"

#include <bpf/bpf.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <thread>

#include "causeway/common/error.h"
#include "host.skel.h"
#include "libcall.skel.h"

namespace causeway::attach {
namespace {

int libbpf_quiet(enum libbpf_print_level level, const char* fmt, va_list args) {
  if (level == LIBBPF_DEBUG && !spdlog::should_log(spdlog::level::trace)) return 0;
  if (level == LIBBPF_INFO && !spdlog::should_log(spdlog::level::debug)) return 0;
  char buf[1024];
  vsnprintf(buf, sizeof buf, fmt, args);
  size_t n = strlen(buf);
  if (n && buf[n - 1] == '\n') buf[n - 1] = 0;
  spdlog::debug("libbpf: {}", buf);
  return 0;
}

uint64_t cap_eff() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("CapEff:", 0) == 0) return std::stoull(line.substr(7), nullptr, 16);
  return 0;
}

}  // namespace

std::string bpf_unavailable_reason() {
  const uint64_t caps = cap_eff();
  const bool sys_admin = caps & (1ull << 21), perfmon = caps & (1ull << 38), bpf = caps & (1ull << 39);
  if (!sys_admin && !(bpf && perfmon)) {
    std::string missing = !bpf ? "CAP_BPF" : "";
    if (!perfmon) missing += std::string(missing.empty() ? "" : " and ") + "CAP_PERFMON";
    return "tracing needs root or " + missing +
           " (run with sudo, or: setcap cap_bpf,cap_perfmon,cap_sys_resource+ep $(which causeway))";
  }
  struct stat st;
  if (stat("/sys/kernel/btf/vmlinux", &st) != 0)
    return "this kernel has no BTF (/sys/kernel/btf/vmlinux): causeway needs CONFIG_DEBUG_INFO_BTF=y "
           "(kernel 5.8+ with BTF, as in Debian, Ubuntu, RHEL 8.2+ kernels)";
  return "";
}

Probes::Probes(const ProbeConfig& cfg) : cfg_(cfg) {
  libbpf_set_print(libbpf_quiet);
  if (auto why = bpf_unavailable_reason(); !why.empty()) throw Error(why);

  libcall_ = libcall_bpf__open();
  if (!libcall_) throw Error(std::string("cannot open the library-call BPF object: ") + strerror(errno));
  libcall_->rodata->filter_tgids = cfg.filter_tgids;
  libcall_->rodata->target_cgroup = cfg.target_cgroup;
  libcall_->rodata->launch_min_ns = cfg.launch_min_ns;
  libcall_->rodata->pystack_launch_min_ns = cfg.pystack_launch_min_ns;
  bpf_map__set_max_entries(libcall_->maps.libcall_events, cfg.libcall_ring_bytes);
  if (int err = libcall_bpf__load(libcall_)) {
    libcall_bpf__destroy(libcall_);
    libcall_ = nullptr;
    throw Error("loading the library-call BPF programs failed: " + std::string(strerror(-err)) +
                " (run `causeway check`)");
  }
  if (!cfg.host) return;
  host_ = host_bpf__open();
  if (!host_) throw Error("cannot open the host BPF object");
  host_->rodata->filter_tgids = cfg.filter_tgids;
  host_->rodata->target_cgroup = cfg.target_cgroup;
  host_->rodata->offcpu_min_ns = cfg.offcpu_min_ns;
  if (cfg.comms.size() > 8) throw UsageError("at most 8 --comm filters");
  for (size_t i = 0; i < cfg.comms.size(); i++) {
    // The kernel keeps 15 characters of a command name.
    std::string c = cfg.comms[i].substr(0, CW_COMM_LEN - 1);
    std::memcpy(const_cast<char*>(host_->rodata->filter_comms[i]), c.c_str(), c.size() + 1);
  }
  host_->rodata->n_filter_comms = uint32_t(cfg.comms.size());
  bpf_map__set_max_entries(host_->maps.host_events, cfg.host_ring_bytes);
  // One set of traced tgids for both skeletons.
  bpf_map__reuse_fd(host_->maps.traced_tgids, bpf_map__fd(libcall_->maps.traced_tgids));
  int err = host_bpf__load(host_);
  if (!err) err = host_bpf__attach(host_);
  if (err) {
    host_bpf__destroy(host_);
    host_ = nullptr;
    libcall_bpf__destroy(libcall_);
    libcall_ = nullptr;
    throw Error("loading the host BPF programs (sched, block, tcp, process) failed: " +
                std::string(strerror(-err)) + " (run `causeway check`)");
  }
}

Probes::~Probes() {
  // Detaching a uprobe waits for an RCU grace period (~100 ms each on 6.x);
  // done one by one, 60 links take seconds. The waits overlap across threads.
  {
    std::vector<std::thread> workers;
    const size_t n = std::min<size_t>(16, links_.size());
    for (size_t w = 0; w < n; w++)
      workers.emplace_back([this, w, n] {
        for (size_t i = w; i < links_.size(); i += n) links_[i].reset();
      });
    for (auto& t : workers) t.join();
  }
  links_.clear();
  if (host_) host_bpf__destroy(host_);
  if (libcall_) libcall_bpf__destroy(libcall_);
}

AttachResult Probes::attach_library(const std::string& path, LibraryKind kind) {
  AttachResult res;
  for (const auto& op : all_ops()) {
    if (op.library != kind || !op.in_default_set || !cfg_.layers.count(op.layer)) continue;
    std::string sym(op.symbol);
    const uint64_t cookie = op.id | op.cookie_flags;
    const char* func_name = sym.c_str();
    size_t offset = 0;
    LIBBPF_OPTS(bpf_uprobe_opts, entry_opts, .bpf_cookie = cookie, .retprobe = false,
                .func_name = func_name);
    bpf_link* entry =
        bpf_program__attach_uprobe_opts(libcall_->progs.cw_call_entry, -1, path.c_str(), 0, &entry_opts);
    if (!entry) {
      // A versioned name (ibv_modify_qp@IBVERBS_1.0 and @@IBVERBS_1.1) is
      // ambiguous to libbpf 1.1: attach at the default version's offset.
      if (auto off = default_version_offset(path, sym)) {
        func_name = nullptr;
        offset = *off;
        entry_opts.func_name = nullptr;
        entry = bpf_program__attach_uprobe_opts(libcall_->progs.cw_call_entry, -1, path.c_str(),
                                                offset, &entry_opts);
      }
    }
    if (!entry) {
      res.missing.push_back(sym);
      continue;
    }
    LIBBPF_OPTS(bpf_uprobe_opts, ret_opts, .bpf_cookie = cookie, .retprobe = true,
                .func_name = func_name);
    bpf_link* ret = bpf_program__attach_uprobe_opts(libcall_->progs.cw_call_return, -1,
                                                    path.c_str(), offset, &ret_opts);
    if (!ret) {
      bpf_link__destroy(entry);
      res.missing.push_back(sym);
      continue;
    }
    links_.emplace_back(entry);
    links_.emplace_back(ret);
    res.ops_attached++;
  }
  return res;
}

void Probes::trace_tgid(uint32_t tgid) {
  uint8_t one = 1;
  bpf_map_update_elem(traced_tgids_fd(), &tgid, &one, BPF_ANY);
}

void Probes::untrace_tgid(uint32_t tgid) { bpf_map_delete_elem(traced_tgids_fd(), &tgid); }

int Probes::libcall_ring_fd() const { return bpf_map__fd(libcall_->maps.libcall_events); }
int Probes::host_ring_fd() const { return host_ ? bpf_map__fd(host_->maps.host_events) : -1; }
int Probes::traced_tgids_fd() const { return bpf_map__fd(libcall_->maps.traced_tgids); }

std::vector<std::pair<uint16_t, cw_op_stats>> Probes::op_stats() const {
  std::vector<std::pair<uint16_t, cw_op_stats>> out;
  const int ncpu = libbpf_num_possible_cpus();
  std::vector<cw_op_stats> per_cpu(size_t(ncpu > 0 ? ncpu : 1));
  const int fd = bpf_map__fd(libcall_->maps.op_stats);
  for (uint32_t op = 0; op < CW_MAX_OPS; op++) {
    if (bpf_map_lookup_elem(fd, &op, per_cpu.data()) != 0) continue;
    cw_op_stats sum{};
    for (const auto& s : per_cpu) {
      sum.calls += s.calls;
      sum.errors += s.errors;
      sum.total_ns += s.total_ns;
      sum.nested += s.nested;
      sum.dropped += s.dropped;
    }
    if (sum.calls) out.emplace_back(uint16_t(op), sum);
  }
  return out;
}

uint64_t Probes::drops(cw_drop_source source) const {
  const int ncpu = libbpf_num_possible_cpus();
  std::vector<uint64_t> per_cpu(size_t(ncpu > 0 ? ncpu : 1));
  uint32_t key = source;
  uint64_t total = 0;
  auto sum = [&](int fd) {
    if (fd >= 0 && bpf_map_lookup_elem(fd, &key, per_cpu.data()) == 0)
      for (auto v : per_cpu) total += v;
  };
  sum(bpf_map__fd(libcall_->maps.drops));
  if (host_) sum(bpf_map__fd(host_->maps.drops));
  return total;
}

}  // namespace causeway::attach
