// SPDX-License-Identifier: Apache-2.0
#pragma once
// Loading causeway's BPF programs and attaching them. Every kernel object is
// owned RAII: destroying a Probes object detaches and closes everything.
#include <bpf/libbpf.h>

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "causeway/common/op_table.h"
#include "causeway/discover/elf_symbols.h"
#include "causeway/discover/entry_insn.h"
#include "causeway/model/records.h"

struct libcall_bpf;
struct host_bpf;
struct sockets_bpf;
struct probe_check_bpf;

namespace causeway::attach {

// A file descriptor closed with its holder: a link created with the raw
// BPF_LINK_CREATE syscall (uprobe_multi: libbpf 1.1 predates it), or the
// kernel's run-time statistics held on (BPF_ENABLE_STATS).
class OwnedFd {
 public:
  explicit OwnedFd(int fd) : fd_(fd) {}
  ~OwnedFd();
  OwnedFd(OwnedFd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  OwnedFd(const OwnedFd&) = delete;
  OwnedFd& operator=(const OwnedFd&) = delete;
  OwnedFd& operator=(OwnedFd&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  bool valid() const { return fd_ >= 0; }

 private:
  int fd_;
};

struct LinkDeleter {
  void operator()(bpf_link* l) const { bpf_link__destroy(l); }
};
using Link = std::unique_ptr<bpf_link, LinkDeleter>;

// Destroying a skeleton detaches its programs and closes its maps.
struct SkeletonDeleter {
  void operator()(libcall_bpf* s) const;
  void operator()(host_bpf* s) const;
  void operator()(sockets_bpf* s) const;
  void operator()(probe_check_bpf* s) const;
};

struct ProbeConfig {
  bool filter_tgids = false;          // only tgids put in traced_tgids (--pid/--comm/-- cmd)
  uint64_t target_cgroup = 0;         // --cgroup (cgroup id), 0 = any
  std::vector<std::string> comms;     // --comm: traced from exec, in the kernel (at most 8)
  uint64_t launch_min_ns = 0;         // launches faster than this: counted, not recorded
  uint64_t pystack_launch_min_ns = 1000000;
  uint32_t launch_sample_every = 0;   // --launch-sampling N: launches aggregated in the kernel, 1 in N recorded
  uint64_t offcpu_min_ns = 20000;
  uint32_t libcall_ring_bytes = 16u << 20;
  uint32_t host_ring_bytes = 4u << 20;
  bool host = true;                   // sched/block/tcp/process/reclaim probes
  bool requests = true;               // the traced processes' socket sends and receives (with host)
  bool stacks = true;                 // Python frames + native stacks on rare/slow calls
  bool entry_only = false;            // benchmarks: the entry-probe floor (no returns, no records)
  bool floor_pair = false;            // benchmarks: entry+return floor (start time in a hash, one no-wakeup record)
  // Probe the runtime's launch functions (cudaLaunchKernel*). Off when the
  // driver is probed too: every runtime launch reaches cuLaunchKernel*, so
  // one trap pair per launch instead of two (measured: docs/performance.md).
  bool runtime_launches = true;
  // Ops with CW_COOKIE_DUTY (launches, cuKernelGetFunction) get links of
  // their own that set_duty_probes attaches and detaches (--launch-duty);
  // false: they are attached with the rest, for good.
  bool duty_cycled = false;
  std::set<Layer> layers = {Layer::Runtime, Layer::Driver, Layer::Nccl, Layer::Hip, Layer::Verbs, Layer::Torch};
  // On-CPU samples of traced Python threads per second, on every CPU (0: off).
  uint32_t cpu_sample_hz = 0;
};

struct AttachResult {
  int ops_attached = 0;               // functions with entry+return probes
  std::vector<std::string> missing;   // symbols this file does not export
  int usdt_ops = 0;                   // of them, ops seen through the file's own USDT probes
  // Each probed function's first instruction (what its probe costs: the
  // kernel emulates some and single-steps the rest; discover/entry_insn.h),
  // and whether its probes come and go in launch windows.
  struct Entry {
    uint16_t op;
    std::string symbol;
    OpClass cls;
    discover::EntryInsn insn;
    bool duty;
  };
  std::vector<Entry> entries;
};

// A traced call that has entered and not yet returned.
struct InFlightCall {
  uint32_t tid = 0;
  uint32_t depth = 0;  // 0: the outermost traced call of the thread
  cw_frame frame{};
};

// Both skeletons, loaded once. Library files are attached as they are found.
class Probes {
 public:
  explicit Probes(const ProbeConfig& cfg);
  ~Probes();
  Probes(const Probes&) = delete;
  Probes& operator=(const Probes&) = delete;

  // Attach entry+return uprobes for every op of `kind` exported by the file.
  // The uprobe is on the file (inode): every process mapping it is covered.
  AttachResult attach_library(const std::string& path, LibraryKind kind);
  // Applies to library files attached from now on.
  void set_runtime_launches(bool on);
  // With cfg.duty_cycled: attach (on) or detach (off) the once-per-launch
  // probes of every file attached so far and from now on. Detaching bumps
  // the kernel's launch_gen: a call caught mid-flight never sees its return,
  // and its frame is dropped rather than taken for the caller of the next.
  void set_duty_probes(bool on);
  bool duty_probes_on() const { return duty_on_; }
  // The trace stops: from now on no call is entered, counted or recorded
  // (the probes stay until destroyed), so the counters read after the last
  // drain match its records. Waits a moment for handlers already running.
  void stop();
  // When they last went off (CLOCK_MONOTONIC ns): every call counted in a
  // window began before it (the entry reads the clock, then the switch).
  int64_t duty_off_at() const { return duty_off_at_; }
  // The return of a CW_COOKIE_RETSITE op (a C++ method that may throw),
  // seen at one of its callers' return sites: `offset` in the file `path`
  // (the instruction after a call to it; every process mapping the file is
  // covered). Once per file and offset; false when attaching failed. Duty-
  // cycled with the op's entry probe.
  bool attach_return_site(const std::string& path, uint64_t offset, uint64_t cookie);
  // Tell the probes that tgid's return site `addr` is probed: a call from
  // there that never returns was thrown out of (a failed call), not lost.
  void mark_return_site(uint32_t tgid, uint64_t addr);
  size_t return_sites() const { return retsites_.size(); }
  void trace_tgid(uint32_t tgid);
  void untrace_tgid(uint32_t tgid);

  int libcall_ring_fd() const;
  int host_ring_fd() const;  // -1 when host probes are off
  int traced_tgids_fd() const;
  int py_procs_fd() const;  // the Python walker's per-process offsets (bpf/pystack.bpf.h)
  // Sum of per-CPU counters.
  std::vector<std::pair<uint16_t, cw_op_stats>> op_stats() const;
  uint64_t drops(cw_drop_source source) const;
  // Cumulative per-(process, op, kernel) launch counts and histograms
  // (--launch-sampling); forget_launch_keys drops a finished process's keys.
  std::vector<std::pair<cw_launch_key, cw_launch_agg>> launch_aggregates() const;
  void forget_launch_keys(const std::vector<cw_launch_key>& keys);
  // An exited process's collective numbering (events.h, CW_COOKIE_SEQ_*):
  // its keys would otherwise fill the map on a host that runs many jobs.
  void forget_collective_numbers(uint32_t tgid);
  // Calls entered before `entered_before_ktime` (CLOCK_MONOTONIC ns) that
  // have not returned: one walk of the per-thread in-flight map.
  std::vector<InFlightCall> calls_in_flight(uint64_t entered_before_ktime) const;
  // Traced threads off the CPU for at least min_ns at now_ktime, as the
  // off-CPU records their switch back would give (no waker yet): read when
  // the trace stops, so a wait that never ends (a hang) is on record.
  std::vector<cw_offcpu_event> offcpu_in_progress(uint64_t now_ktime, uint64_t min_ns) const;
  // Make the kernel send a stack (code = false) or code object (code = true)
  // again: user space could not resolve what it sent (bpf/pystack.bpf.h).
  void forget_seen(bool code, const cw_seen_key& key);
  // The kernel's run-time statistics of BPF programs (BPF_ENABLE_STATS): on
  // while held. They cost every BPF program on the host two clock reads a
  // run, so the agent holds them only while an adaptive launch window is
  // open. False where the kernel refuses them.
  bool set_run_stats(bool on);
  bool run_stats_on() const { return run_stats_.valid(); }
  // How long the call probes' programs (uprobes, return probes, USDT) have
  // run, all CPUs together, while the statistics were on: what the probes
  // cost beyond their traps (records, stacks, map updates).
  int64_t call_programs_run_ns() const;
  // The probes a launch window attaches and detaches.
  size_t duty_link_count() const {
    return duty_links_.size() + duty_multi_links_.size() + duty_retsite_links_.size() + duty_usdt_links_.size();
  }
  size_t link_count() const {
    return links_.size() + multi_links_.size() + duty_links_.size() + duty_multi_links_.size() +
           retsite_links_.size() + duty_retsite_links_.size() + usdt_links_.size() + duty_usdt_links_.size();
  }
  // uprobe_multi (kernel 6.6+): one link per file and direction instead of
  // one per function; detaching pays one RCU grace period instead of one per probe.
  bool uses_uprobe_multi() const { return multi_; }
  libcall_bpf* libcall() const { return libcall_.get(); }

 private:
  bpf_program* entry_program() const;
  bpf_program* return_program() const;
  // Entry+return links for these functions of one file, into `links`/`multi`.
  // Entry links, and return links unless with_return is false (ops whose
  // return is not probed by a uretprobe: CW_COOKIE_RETSITE, _ENTRY_ONLY).
  int attach_offsets(const std::string& path, const std::vector<uint64_t>& offsets,
                     const std::vector<uint64_t>& cookies, std::vector<Link>& links, std::vector<OwnedFd>& multi,
                     bool with_return = true);
  struct DutySet {
    std::string path;
    std::vector<uint64_t> offsets, cookies;
    bool with_return = true;
  };
  std::vector<DutySet> duty_sets_;
  struct ReturnSite {
    std::string path;
    uint64_t offset = 0, cookie = 0;
    bool duty = false;
  };
  std::vector<ReturnSite> retsites_;
  // Ops seen through a file's USDT probes (PyTorch's pytorch:malloc/free):
  // one link per probe name (all its locations in the file). With
  // uprobe_multi, our own link over its sites (offsets, semaphores, and as
  // cookies the spec ids we wrote into libbpf's USDT spec map); else
  // libbpf's, one perf-event uprobe per site.
  struct UsdtProbe {
    std::string path, provider, name;
    bpf_program* prog = nullptr;
    uint64_t cookie = 0;
    bool duty = false;
    std::vector<uint64_t> offsets, ref_ctrs, spec_ids;
  };
  // A libbpf link or a uprobe_multi link's fd.
  struct AnyLink {
    Link link;
    OwnedFd multi{-1};
    explicit operator bool() const { return link || multi.valid(); }
  };
  std::vector<UsdtProbe> usdt_;
  AnyLink attach_usdt(const UsdtProbe& u);
  // With uprobe_multi: u's sites in the file and their specs written to the
  // spec map; false (the symbols serve) when they cannot be.
  bool usdt_multi_sites(const discover::ElfSymbols& elf, UsdtProbe& u);
  int next_usdt_spec_ = 0;
  // The file's USDT probes for PyTorch's allocator, when it has both: true
  // when attached (or to be, in the next launch window).
  bool attach_torch_usdt(const std::string& path, const discover::ElfSymbols& elf);
  // Return sites of one file, one link (uprobe_multi; else a perf-event
  // uprobe each, when the kernel has no uprobe_multi).
  std::vector<AnyLink> attach_retsites(const std::string& path, const std::vector<const ReturnSite*>& sites);
  std::vector<Link> duty_links_;
  std::vector<OwnedFd> duty_multi_links_;
  bool duty_on_ = true;
  int64_t duty_off_at_ = 0;
  OwnedFd run_stats_{-1};  // BPF_ENABLE_STATS's fd: the statistics stay on while it is open
  ProbeConfig cfg_;
  // Declared before the links, so the links go first (members are
  // destroyed in reverse order).
  std::unique_ptr<libcall_bpf, SkeletonDeleter> libcall_;
  std::unique_ptr<host_bpf, SkeletonDeleter> host_;
  std::unique_ptr<sockets_bpf, SkeletonDeleter> sockets_;
  std::unique_ptr<probe_check_bpf, SkeletonDeleter> floor_;  // entry_only / floor_pair benchmarks
  std::vector<Link> links_;
  std::vector<OwnedFd> multi_links_;
  std::vector<AnyLink> retsite_links_, duty_retsite_links_;
  std::vector<AnyLink> usdt_links_, duty_usdt_links_;
  bool multi_ = false;
  // The sampler's perf events, one per CPU (closing the link detaches; the
  // event's fd is closed with it).
  std::vector<Link> sample_links_;
  Link wait_stack_link_;  // the Python stack a thread goes to sleep in (cw_wait_stack)
  void attach_cpu_sampler(uint32_t hz);
  void attach_sockets();
};

// Why BPF cannot be used here, in one line a user can act on ("" when it can):
// the failed checks of discover::run_trace_preflight (kernel, BTF,
// privileges, lockdown), in `causeway check`'s words.
std::string bpf_unavailable_reason();

}  // namespace causeway::attach
