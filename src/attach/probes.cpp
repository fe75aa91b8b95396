// SPDX-License-Identifier: Apache-2.0
#include "causeway/attach/probes.h"

#include <bpf/bpf.h>
#include <spdlog/spdlog.h>
#include <linux/perf_event.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <algorithm>
#include <fstream>
#include <map>
#include <system_error>
#include <thread>

#include "causeway/attach/libbpf_log.h"
#include "causeway/attach/usdt_sites.h"
#include "causeway/common/error.h"
#include "causeway/common/system.h"
#include "causeway/common/time.h"
#include "causeway/discover/elf_symbols.h"
#include "causeway/discover/readiness.h"
#include "host.skel.h"
// usdt.bpf.h's kconfig flag reaches the skeleton as C's _Bool, which clang
// in C++ mode does not know (g++ accepts it).
#define _Bool bool
#include "libcall.skel.h"
#undef _Bool
#include "probe_check.skel.h"
#include "sockets.skel.h"

namespace causeway::attach {
namespace {

// Not in Debian 12's <linux/bpf.h> (6.1): values from the kernel's UAPI.
constexpr unsigned kAttachUprobeMulti = 48;       // BPF_TRACE_UPROBE_MULTI
constexpr unsigned kUprobeMultiReturn = 1;        // BPF_F_UPROBE_MULTI_RETURN

struct LinkCreateUprobeMulti {  // union bpf_attr, BPF_LINK_CREATE member
  uint32_t prog_fd;
  uint32_t target_fd;
  uint32_t attach_type;
  uint32_t flags;
  uint64_t path;
  uint64_t offsets;
  uint64_t ref_ctr_offsets;
  uint64_t cookies;
  uint32_t cnt;
  uint32_t multi_flags;
  uint32_t pid;
  uint32_t pad_[13];  // the rest of union bpf_attr stays zero
};

bool kernel_has_uprobe_multi() {
  if (const char* off = getenv("CAUSEWAY_NO_UPROBE_MULTI"); off && *off == '1') return false;
  return running_kernel().at_least(6, 6);
}

// ref_ctrs: each offset's semaphore (a USDT probe's; empty: none).
int create_uprobe_multi(int prog_fd, const std::string& path, const std::vector<uint64_t>& offsets,
                        const std::vector<uint64_t>& cookies, bool ret, const std::vector<uint64_t>& ref_ctrs = {}) {
  LinkCreateUprobeMulti a{};
  a.prog_fd = uint32_t(prog_fd);
  a.attach_type = kAttachUprobeMulti;
  a.path = reinterpret_cast<uint64_t>(path.c_str());
  a.offsets = reinterpret_cast<uint64_t>(offsets.data());
  if (!ref_ctrs.empty()) a.ref_ctr_offsets = reinterpret_cast<uint64_t>(ref_ctrs.data());
  a.cookies = reinterpret_cast<uint64_t>(cookies.data());
  a.cnt = uint32_t(offsets.size());
  a.multi_flags = ret ? kUprobeMultiReturn : 0;
  return int(syscall(__NR_bpf, 28 /* BPF_LINK_CREATE */, &a, sizeof a));
}

// Destroying a uprobe link (multi or perf-event) takes its breakpoints out and
// then waits for an RCU tasks-trace grace period (tens of ms) before it
// returns. One link after another, the later links' breakpoints stayed in,
// trapping, through the earlier ones' waits: 8 launch links took 0.36-0.48 s
// to detach, and an attached decode loop paid for its launches throughout.
// Released side by side, the waits overlap (kMaxReleasers threads at most:
// a kernel without uprobe_multi has a link per function).
struct Released {
  std::vector<Link> links;
  std::vector<OwnedFd> fds;
  void take(std::vector<Link>& v) {
    for (auto& l : v) links.push_back(std::move(l));
    v.clear();
  }
  void take(std::vector<OwnedFd>& v) {
    for (auto& l : v) fds.push_back(std::move(l));
    v.clear();
  }
  template <class AnyLinkT>
  void take_any(std::vector<AnyLinkT>& v) {
    for (auto& l : v) {
      if (l.link) links.push_back(std::move(l.link));
      if (l.multi.valid()) fds.push_back(std::move(l.multi));
    }
    v.clear();
  }
  void release_side_by_side() {
    constexpr size_t kMaxReleasers = 16;
    const size_t n = links.size() + fds.size();
    const size_t threads = std::min(n, kMaxReleasers);
    std::vector<Released> parts(threads);
    for (size_t i = 0; i < links.size(); i++) parts[i % threads].links.push_back(std::move(links[i]));
    for (size_t i = 0; i < fds.size(); i++) parts[(links.size() + i) % threads].fds.push_back(std::move(fds[i]));
    links.clear();
    fds.clear();
    std::vector<std::thread> releasers;
    for (size_t t = 1; t < threads; t++) {
      try {
        releasers.emplace_back([part = std::move(parts[t])]() mutable { part = Released{}; });
      } catch (const std::system_error&) {
        parts[t] = Released{};  // no thread to spare: here, one after another
      }
    }
    if (threads) parts[0] = Released{};
    for (auto& t : releasers) t.join();
  }
};

}  // namespace

OwnedFd::~OwnedFd() {
  if (fd_ >= 0) close(fd_);
}

std::string bpf_unavailable_reason() {
  // The same checks and words as `causeway check` (src/discover/readiness.cpp).
  return discover::describe_failures(discover::run_trace_preflight());
}

Probes::Probes(const ProbeConfig& cfg) : cfg_(cfg) {
  route_libbpf_log();
  if (auto why = bpf_unavailable_reason(); !why.empty()) throw Error(why);

  libcall_.reset(libcall_bpf__open());
  if (!libcall_) throw Error(std::string("cannot open the library-call BPF object: ") + strerror(errno));
  libcall_->rodata->filter_tgids = cfg.filter_tgids;
  libcall_->rodata->target_cgroup = cfg.target_cgroup;
  libcall_->rodata->launch_min_ns = cfg.launch_min_ns;
  libcall_->rodata->ring_bytes = cfg.libcall_ring_bytes;
  libcall_->rodata->launch_sample_every = cfg.launch_sample_every;
  libcall_->rodata->pystack_launch_min_ns = cfg.pystack_launch_min_ns;
  libcall_->rodata->pystack_python = cfg.stacks;
  libcall_->rodata->pystack_native = cfg.stacks;
  libcall_->rodata->pystack_sampled_launches = cfg.stacks;
  bpf_map__set_max_entries(libcall_->maps.libcall_events, cfg.libcall_ring_bytes);
  bpf_program__set_autoload(libcall_->progs.cw_cpu_sample, cfg.cpu_sample_hz > 0 && cfg.stacks);
  // A sleep's line needs the host probes' off-CPU records to land in.
  bpf_program__set_autoload(libcall_->progs.cw_wait_stack, cfg.host && cfg.stacks);
  multi_ = kernel_has_uprobe_multi();
  if (multi_) {
    for (auto* p : {libcall_->progs.cw_call_entry, libcall_->progs.cw_call_return, libcall_->progs.cw_call_retsite,
                    libcall_->progs.cw_torch_malloc, libcall_->progs.cw_torch_free})
      bpf_program__set_expected_attach_type(p, bpf_attach_type(kAttachUprobeMulti));
  }
  if (int err = libcall_bpf__load(libcall_.get())) {
    throw Error("loading the library-call BPF programs failed: " + std::string(strerror(-err)) +
                " (run `causeway check`)");
  }
  // The launch windows open when the agent can time them (set_duty_probes):
  // at its start it is busy for a while (a first look at the processes),
  // and a window left open meanwhile cost an attached decode loop +16% in
  // its first second.
  if (cfg.duty_cycled) {
    duty_on_ = false;
    libcall_->bss->duty_off = 1;
  }
  if (cfg.cpu_sample_hz > 0 && cfg.stacks) attach_cpu_sampler(cfg.cpu_sample_hz);
  if (cfg.entry_only || cfg.floor_pair) {
    // The floors of the design brief's cost table (probe_check.bpf.c),
    // attached where the real probes would go: an entry uprobe that only
    // counts, or the entry+return pair with a ring record.
    floor_.reset(probe_check_bpf__open());
    if (!floor_) throw Error("cannot open the probe-floor BPF object");
    if (multi_) {
      for (auto* p : {floor_->progs.cw_check_uprobe, floor_->progs.cw_floor_entry,
                      floor_->progs.cw_floor_return})
        bpf_program__set_expected_attach_type(p, bpf_attach_type(kAttachUprobeMulti));
    }
    bpf_map__reuse_fd(floor_->maps.floor_events, bpf_map__fd(libcall_->maps.libcall_events));
    if (probe_check_bpf__load(floor_.get())) throw Error("loading the probe-floor BPF object failed");
  }
  if (!cfg.host) return;
  host_.reset(host_bpf__open());
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
  // One set of traced tgids for both skeletons, and one of Python layouts
  // (the host programs find the interpreter lock with it).
  bpf_map__reuse_fd(host_->maps.traced_tgids, bpf_map__fd(libcall_->maps.traced_tgids));
  bpf_map__reuse_fd(host_->maps.py_procs, bpf_map__fd(libcall_->maps.py_procs));
  bpf_map__reuse_fd(host_->maps.wait_stacks, bpf_map__fd(libcall_->maps.wait_stacks));
  int err = host_bpf__load(host_.get());
  if (!err) err = host_bpf__attach(host_.get());
  if (err) {
    throw Error("loading the host BPF programs (sched, block, tcp, process) failed: " +
                std::string(strerror(-err)) + " (run `causeway check`)");
  }
  if (cfg.requests) attach_sockets();
  if (cfg.stacks) {
    wait_stack_link_.reset(bpf_program__attach(libcall_->progs.cw_wait_stack));
    if (!wait_stack_link_) spdlog::warn("no Python line for sleeps: attaching sched_switch for wait stacks failed");
  }
}

// The trace's end: every probe out at once (a job traced by --pid keeps
// running, and each link left would trap in it for a grace period longer).
Probes::~Probes() {
  Released r;
  r.take(sample_links_);
  r.take(links_);
  r.take(multi_links_);
  r.take(duty_links_);
  r.take(duty_multi_links_);
  r.take_any(retsite_links_);
  r.take_any(duty_retsite_links_);
  r.take_any(usdt_links_);
  r.take_any(duty_usdt_links_);
  r.release_side_by_side();
}

void Probes::attach_cpu_sampler(uint32_t hz) {
  // cpu-clock is a software event: every kernel and VM has it (no PMU needed).
  const int ncpu = libbpf_num_possible_cpus();
  for (int cpu = 0; cpu < ncpu; cpu++) {
    perf_event_attr attr{};
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_CPU_CLOCK;
    attr.freq = 1;
    attr.sample_freq = hz;
    const int fd = int(syscall(__NR_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC));
    if (fd < 0) {
      if (errno == ENODEV || errno == ENOENT) continue;  // a possible CPU that is not online
      spdlog::warn("no CPU samples on CPU {}: perf_event_open: {}", cpu, strerror(errno));
      continue;
    }
    Link l(bpf_program__attach_perf_event(libcall_->progs.cw_cpu_sample, fd));
    if (!l) {
      close(fd);
      spdlog::warn("no CPU samples on CPU {}: attaching the sampler failed", cpu);
      continue;
    }
    sample_links_.push_back(std::move(l));
  }
}

void SkeletonDeleter::operator()(libcall_bpf* s) const { libcall_bpf__destroy(s); }
void SkeletonDeleter::operator()(host_bpf* s) const { host_bpf__destroy(s); }
void SkeletonDeleter::operator()(probe_check_bpf* s) const { probe_check_bpf__destroy(s); }
void SkeletonDeleter::operator()(sockets_bpf* s) const { sockets_bpf__destroy(s); }

// The socket probes share the host ring, the traced tgids and the drop
// counters; a kernel without their tracepoints (before 6.3) traces on
// without requests.
void Probes::attach_sockets() {
  sockets_.reset(sockets_bpf__open());
  if (!sockets_) {
    spdlog::warn("no requests: cannot open the socket BPF object");
    return;
  }
  sockets_->rodata->filter_tgids = cfg_.filter_tgids;
  sockets_->rodata->target_cgroup = cfg_.target_cgroup;
  bpf_map__reuse_fd(sockets_->maps.host_events, bpf_map__fd(host_->maps.host_events));
  bpf_map__reuse_fd(sockets_->maps.traced_tgids, bpf_map__fd(libcall_->maps.traced_tgids));
  bpf_map__reuse_fd(sockets_->maps.drops, bpf_map__fd(host_->maps.drops));
  bpf_map__reuse_fd(sockets_->maps.py_procs, bpf_map__fd(libcall_->maps.py_procs));
  bpf_map__reuse_fd(sockets_->maps.wait_stacks, bpf_map__fd(libcall_->maps.wait_stacks));
  int err = sockets_bpf__load(sockets_.get());
  if (!err) err = sockets_bpf__attach(sockets_.get());
  if (err) {
    spdlog::warn("no requests: the socket probes failed to load ({}); they need kernel 6.3+", strerror(-err));
    sockets_.reset();
  }
}

void Probes::set_runtime_launches(bool on) { cfg_.runtime_launches = on; }

bpf_program* Probes::entry_program() const {
  if (cfg_.entry_only) return floor_->progs.cw_check_uprobe;
  if (cfg_.floor_pair) return floor_->progs.cw_floor_entry;
  return libcall_->progs.cw_call_entry;
}

bpf_program* Probes::return_program() const {
  return cfg_.floor_pair ? floor_->progs.cw_floor_return : libcall_->progs.cw_call_return;
}

AttachResult Probes::attach_library(const std::string& path, LibraryKind kind) {
  AttachResult res;
  const auto elf = discover::ElfSymbols::open(path);
  // [with a return probe, entry only]: paired, or duty-cycled
  DutySet sets[2] = {{path, {}, {}, true}, {path, {}, {}, false}};
  DutySet duty[2] = {{path, {}, {}, true}, {path, {}, {}, false}};
  std::vector<uint64_t> all;
  // PyTorch's allocator through its own USDT probes where the file has them:
  // then not through the symbols as well.
  const bool torch_usdt = kind == LibraryKind::C10Cuda && elf && attach_torch_usdt(path, *elf);
  if (torch_usdt) res.ops_attached += res.usdt_ops = 2;
  for (const auto& op : all_ops()) {
    if (op.library != kind || !op.in_default_set || !cfg_.layers.count(op.layer)) continue;
    if (torch_usdt && op.cls == OpClass::Tensor) continue;
    if (!cfg_.runtime_launches && op.layer == Layer::Runtime && op.cls == OpClass::Launch) continue;
    std::optional<uint64_t> off;
    if (elf)
      if (auto vaddr = elf->symbol_value(op.symbol)) off = elf->offset_of_vaddr(*vaddr);
    if (!off) {
      res.missing.emplace_back(op.symbol);
      continue;
    }
    // Aliases (two exported names at one address) would fire twice: keep the first.
    if (std::find(all.begin(), all.end(), *off) != all.end()) continue;
    all.push_back(*off);
    const uint64_t cookie = op.id | op.cookie_flags;
    const int entry_only = (cookie & (CW_COOKIE_RETSITE | CW_COOKIE_ENTRY_ONLY)) ? 1 : 0;
    const bool cycled = cfg_.duty_cycled && (cookie & CW_COOKIE_DUTY) && !cfg_.entry_only && !cfg_.floor_pair;
    if (auto vaddr = elf->symbol_value(op.symbol))
      if (auto bytes = discover::read_entry_bytes(path, *elf, *vaddr))
        res.entries.push_back({op.id, std::string(op.symbol), op.cls, discover::classify_entry_insn(*bytes), cycled});
    DutySet& into = cycled ? duty[entry_only] : sets[entry_only];
    into.offsets.push_back(*off);
    into.cookies.push_back(cookie);
  }
  for (const auto& s : sets)
    if (!s.offsets.empty())
      res.ops_attached += attach_offsets(path, s.offsets, s.cookies, links_, multi_links_, s.with_return);
  for (auto& d : duty) {
    if (d.offsets.empty()) continue;
    if (duty_on_)
      res.ops_attached += attach_offsets(path, d.offsets, d.cookies, duty_links_, duty_multi_links_, d.with_return);
    else
      res.ops_attached += int(d.offsets.size());  // attached in the next launch window
    duty_sets_.push_back(std::move(d));
  }
  return res;
}

bool Probes::set_run_stats(bool on) {
  if (on == run_stats_.valid()) return true;
  if (!on) {
    run_stats_ = OwnedFd(-1);
    return true;
  }
  const int fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
  if (fd < 0) return false;
  run_stats_ = OwnedFd(fd);
  return true;
}

int64_t Probes::call_programs_run_ns() const {
  int64_t ns = 0;
  bpf_program* p = nullptr;
  bpf_object__for_each_program(p, libcall_->obj) {
    // uprobes, return probes and USDT probes load as kprobe programs; the
    // CPU sampler and the sleep-stack tracepoint are not a call's cost.
    const int fd = bpf_program__fd(p);
    if (fd < 0 || bpf_program__type(p) != BPF_PROG_TYPE_KPROBE) continue;
    bpf_prog_info info{};
    __u32 len = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0) ns += int64_t(info.run_time_ns);
  }
  return ns;
}

void Probes::stop() {
  libcall_->bss->stopped = 1;
  // A handler that read the flag before it was set finishes within
  // microseconds; its record is in the ring before the last drain.
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
}

int Probes::attach_offsets(const std::string& path, const std::vector<uint64_t>& offsets,
                           const std::vector<uint64_t>& cookies, std::vector<Link>& links,
                           std::vector<OwnedFd>& multi, bool with_return) {
  with_return = with_return && !cfg_.entry_only;
  // Return probes first: a call entered once its entry probe is on then
  // always meets its return probe. The other way round, the calls entered
  // between the two links (a loop already running, its library probed late)
  // pushed frames nothing popped, and every later call of the thread was
  // taken for a nested one: counted, never a row (a sync loop at ~65k
  // calls/s: 0 rows of ~130k syncs, 3-6 `nest` drops). A return whose entry
  // was not seen, on a thread with no frame, records nothing.
  if (multi_) {
    if (with_return) {
      int ret = create_uprobe_multi(bpf_program__fd(return_program()), path, offsets, cookies, true);
      if (ret < 0) throw Error("attaching uretprobes to " + path + " failed: " + strerror(errno));
      multi.emplace_back(ret);
    }
    int entry = create_uprobe_multi(bpf_program__fd(entry_program()), path, offsets, cookies, false);
    if (entry < 0) throw Error("attaching uprobes to " + path + " failed: " + strerror(errno));
    multi.emplace_back(entry);
    return int(offsets.size());
  }
  for (size_t i = 0; i < offsets.size(); i++) {
    LIBBPF_OPTS(bpf_uprobe_opts, entry_opts, .bpf_cookie = cookies[i], .retprobe = false);
    LIBBPF_OPTS(bpf_uprobe_opts, ret_opts, .bpf_cookie = cookies[i], .retprobe = true);
    if (with_return) {
      Link ret(bpf_program__attach_uprobe_opts(return_program(), -1, path.c_str(), offsets[i], &ret_opts));
      if (!ret) throw Error("attaching uretprobes to " + path + " failed: " + strerror(errno));
      links.push_back(std::move(ret));
    }
    Link entry(bpf_program__attach_uprobe_opts(entry_program(), -1, path.c_str(), offsets[i], &entry_opts));
    if (!entry) throw Error("attaching uprobes to " + path + " failed: " + strerror(errno));
    links.push_back(std::move(entry));
  }
  return int(offsets.size());
}

std::vector<Probes::AnyLink> Probes::attach_retsites(const std::string& path,
                                                     const std::vector<const ReturnSite*>& sites) {
  std::vector<AnyLink> out;
  if (multi_) {
    std::vector<uint64_t> offsets, cookies;
    for (const auto* r : sites) {
      offsets.push_back(r->offset);
      cookies.push_back(r->cookie);
    }
    AnyLink l;
    l.multi = OwnedFd(create_uprobe_multi(bpf_program__fd(libcall_->progs.cw_call_retsite), path, offsets, cookies, false));
    if (l)
      out.push_back(std::move(l));
    else
      spdlog::warn("no return probes at {} sites of {}: {}", sites.size(), path, strerror(errno));
    return out;
  }
  for (const auto* r : sites) {
    LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = r->cookie, .retprobe = false);
    AnyLink l;
    l.link.reset(bpf_program__attach_uprobe_opts(libcall_->progs.cw_call_retsite, -1, path.c_str(), r->offset, &opts));
    if (l)
      out.push_back(std::move(l));
    else
      spdlog::warn("no return probe at {}+{:#x}: {}", path, r->offset, strerror(errno));
  }
  return out;
}

bool Probes::attach_return_site(const std::string& path, uint64_t offset, uint64_t cookie) {
  if (cfg_.entry_only || cfg_.floor_pair) return false;
  for (const auto& r : retsites_)
    if (r.path == path && r.offset == offset) return true;
  ReturnSite r{path, offset, cookie, cfg_.duty_cycled && (cookie & CW_COOKIE_DUTY)};
  if (r.duty && !duty_on_) {  // attached in the next launch window
    retsites_.push_back(std::move(r));
    return true;
  }
  auto l = attach_retsites(path, {&r});
  if (l.empty()) return false;
  spdlog::debug("return-site probe at {}+{:#x}", r.path, r.offset);
  (r.duty ? duty_retsite_links_ : retsite_links_).push_back(std::move(l[0]));
  retsites_.push_back(std::move(r));
  return true;
}

Probes::AnyLink Probes::attach_usdt(const UsdtProbe& u) {
  AnyLink l;
  if (multi_) {
    l.multi = OwnedFd(create_uprobe_multi(bpf_program__fd(u.prog), u.path, u.offsets, u.spec_ids, false, u.ref_ctrs));
  } else {
    LIBBPF_OPTS(bpf_usdt_opts, opts, .usdt_cookie = u.cookie);
    l.link.reset(bpf_program__attach_usdt(u.prog, -1, u.path.c_str(), u.provider.c_str(), u.name.c_str(), &opts));
  }
  if (!l) spdlog::warn("no USDT probe {}:{} in {}: {}", u.provider, u.name, u.path, strerror(errno));
  return l;
}

bool Probes::usdt_multi_sites(const discover::ElfSymbols& elf, UsdtProbe& u) {
  const auto sites = usdt_sites(elf, u.provider, u.name);
  bpf_map* specs = libcall_->maps.__bpf_usdt_specs;
  if (sites.empty() || bpf_map__value_size(specs) != sizeof(UsdtSpec) ||
      next_usdt_spec_ + int(sites.size()) > int(bpf_map__max_entries(specs))) {
    spdlog::warn("USDT probe {}:{} in {}: its sites cannot be read here; probing the symbols instead", u.provider,
                 u.name, u.path);
    return false;
  }
  for (const auto& site : sites) {
    UsdtSpec spec = site.spec;
    spec.usdt_cookie = u.cookie;
    const int id = next_usdt_spec_++;
    if (bpf_map_update_elem(bpf_map__fd(specs), &id, &spec, BPF_ANY)) return false;
    u.offsets.push_back(site.offset);
    u.ref_ctrs.push_back(site.ref_ctr);
    u.spec_ids.push_back(uint64_t(id));
  }
  return true;
}

bool Probes::attach_torch_usdt(const std::string& path, const discover::ElfSymbols& elf) {
  if (cfg_.entry_only || cfg_.floor_pair || !cfg_.layers.count(Layer::Torch)) return false;
  if (!elf.has_usdt("pytorch", "malloc") || !elf.has_usdt("pytorch", "free")) return false;
  const OpSpec* malloc_op = find_op("CachingAllocator::malloc");
  const OpSpec* free_op = find_op("CachingAllocator::free");
  if (!malloc_op || !free_op) return false;
  std::vector<UsdtProbe> probes;
  std::vector<AnyLink> links;
  for (const auto& [op, prog, name] : {std::tuple{malloc_op, libcall_->progs.cw_torch_malloc, "malloc"},
                                       std::tuple{free_op, libcall_->progs.cw_torch_free, "free"}}) {
    const uint64_t cookie = op->id | op->cookie_flags;
    probes.push_back({path, "pytorch", name, prog, cookie, cfg_.duty_cycled && (cookie & CW_COOKIE_DUTY), {}, {}, {}});
    if (multi_ && !usdt_multi_sites(elf, probes.back())) return false;
    if (!probes.back().duty || duty_on_) {
      links.push_back(attach_usdt(probes.back()));
      if (!links.back()) return false;  // both or neither (the symbols then): the other detaches here
    }
  }
  for (size_t i = 0, l = 0; i < probes.size(); i++) {
    if (!probes[i].duty || duty_on_) (probes[i].duty ? duty_usdt_links_ : usdt_links_).push_back(std::move(links[l++]));
    usdt_.push_back(std::move(probes[i]));
  }
  return true;
}

void Probes::mark_return_site(uint32_t tgid, uint64_t addr) {
  struct {
    uint32_t tgid, pad;
    uint64_t addr;
  } key{tgid, 0, addr};
  const uint8_t attached = 1;
  bpf_map_update_elem(bpf_map__fd(libcall_->maps.ret_sites), &key, &attached, BPF_ANY);
}

void Probes::set_duty_probes(bool on) {
  if (on == duty_on_) return;
  duty_on_ = on;
  if (on) {
    // While they go on, duty_off keeps their entries from pushing frames;
    // each function's return probe goes on before its entry probe anyway
    // (attach_offsets), so a call entered once the window is open meets its
    // return. The generation moves on with the window.
    for (const auto& d : duty_sets_)
      attach_offsets(d.path, d.offsets, d.cookies, duty_links_, duty_multi_links_, d.with_return);
    // A window's return sites, one link per file.
    std::map<std::string, std::vector<const ReturnSite*>> by_file;
    for (const auto& r : retsites_)
      if (r.duty) by_file[r.path].push_back(&r);
    for (const auto& [path, sites] : by_file)
      for (auto& l : attach_retsites(path, sites)) duty_retsite_links_.push_back(std::move(l));
    for (const auto& u : usdt_)
      if (u.duty)
        if (AnyLink l = attach_usdt(u)) duty_usdt_links_.push_back(std::move(l));
    libcall_->bss->launch_gen++;
    libcall_->bss->duty_off = 0;
    return;
  }
  // Off before the links go: their entries do nothing from now on, and a
  // call entered before never sees its return (its frame is dropped).
  libcall_->bss->launch_gen++;
  libcall_->bss->duty_off = 1;
  duty_off_at_ = monotonic_now_ns();
  Released r;  // destroying a link detaches it
  r.take_any(duty_usdt_links_);
  r.take(duty_links_);
  r.take(duty_multi_links_);
  r.take_any(duty_retsite_links_);
  r.release_side_by_side();
}

void Probes::trace_tgid(uint32_t tgid) {
  uint8_t one = 1;
  bpf_map_update_elem(traced_tgids_fd(), &tgid, &one, BPF_ANY);
}

void Probes::untrace_tgid(uint32_t tgid) { bpf_map_delete_elem(traced_tgids_fd(), &tgid); }

int Probes::libcall_ring_fd() const { return bpf_map__fd(libcall_->maps.libcall_events); }
int Probes::host_ring_fd() const { return host_ ? bpf_map__fd(host_->maps.host_events) : -1; }
int Probes::traced_tgids_fd() const { return bpf_map__fd(libcall_->maps.traced_tgids); }
int Probes::py_procs_fd() const { return bpf_map__fd(libcall_->maps.py_procs); }

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
      sum.shed += s.shed;
    }
    if (sum.calls) out.emplace_back(uint16_t(op), sum);
  }
  return out;
}

std::vector<std::pair<cw_launch_key, cw_launch_agg>> Probes::launch_aggregates() const {
  std::vector<std::pair<cw_launch_key, cw_launch_agg>> out;
  const int fd = bpf_map__fd(libcall_->maps.launch_agg);
  cw_launch_key key{}, next{};
  const cw_launch_key* prev = nullptr;
  // Keys are only deleted by forget_launch_keys (this thread), so the walk
  // never restarts from a key removed under it.
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    cw_launch_agg v{};
    if (bpf_map_lookup_elem(fd, &next, &v) == 0) out.emplace_back(next, v);
    key = next;
    prev = &key;
  }
  return out;
}

std::vector<InFlightCall> Probes::calls_in_flight(uint64_t entered_before_ktime) const {
  std::vector<InFlightCall> out;
  if (!libcall_) return out;
  const int fd = bpf_map__fd(libcall_->maps.inflight);
  const uint32_t max = bpf_map__max_entries(libcall_->maps.inflight);
  uint32_t key = 0, next = 0;
  const uint32_t* prev = nullptr;
  // An LRU map may evict the previous key mid-walk and restart it from the
  // first: the walk is bounded by the map's size.
  cw_thread_calls tc{};
  for (uint32_t n = 0; n < max && bpf_map_get_next_key(fd, prev, &next) == 0; n++) {
    if (bpf_map_lookup_elem(fd, &next, &tc) == 0)
      for (uint32_t d = 0; d < tc.depth && d < CW_MAX_NEST; d++)
        if (tc.fr[d].ts && tc.fr[d].ts < entered_before_ktime &&
            // an orphan of a detached launch window is not in flight
            !((tc.fr[d].cookie & CW_COOKIE_DUTY) &&
              (tc.fr[d].gen != uint16_t(libcall_->bss->launch_gen) || libcall_->bss->duty_off)) &&
            // a framework call's frame outlives it when it throws; what it waits on is its own frame
            !(tc.fr[d].cookie & CW_COOKIE_RETSITE))
          out.push_back({next, d, tc.fr[d]});
    key = next;
    prev = &key;
  }
  return out;
}

std::vector<cw_offcpu_event> Probes::offcpu_in_progress(uint64_t now_ktime, uint64_t min_ns) const {
  std::vector<cw_offcpu_event> out;
  if (!host_ || !libcall_) return out;
  const int fd = bpf_map__fd(host_->maps.offcpu_starts), stacks = bpf_map__fd(libcall_->maps.wait_stacks);
  const uint32_t max = bpf_map__max_entries(host_->maps.offcpu_starts);
  uint32_t key = 0, next = 0;
  const uint32_t* prev = nullptr;
  cw_offcpu_start s{};
  for (uint32_t n = 0; n < max && bpf_map_get_next_key(fd, prev, &next) == 0; n++) {
    key = next;
    prev = &key;
    if (bpf_map_lookup_elem(fd, &next, &s) != 0 || !s.ts || s.ts > now_ktime || now_ktime - s.ts < min_ns) continue;
    // The thread's process; a thread that died while off-CPU left its entry.
    uint32_t tgid = 0;
    std::ifstream status("/proc/" + std::to_string(next) + "/status");
    for (std::string line; std::getline(status, line);)
      if (line.rfind("Tgid:", 0) == 0) tgid = uint32_t(std::strtoul(line.c_str() + 5, nullptr, 10));
    if (!tgid) continue;
    cw_offcpu_event e{};
    e.hdr.type = CW_EV_OFFCPU;
    e.hdr.ts_ns = s.ts;
    e.hdr.pid = tgid;
    e.hdr.tid = next;
    e.dur_ns = now_ktime - s.ts;
    e.state = s.state;
    e.by_pid = s.by_pid;
    std::memcpy(e.by_comm, s.by_comm, sizeof e.by_comm);
    e.syscall = s.syscall;
    e.wait = s.wait;
    e.wait_arg = s.wait_arg;
    e.holder_tid = s.holder_tid;
    cw_wait_stack ws{};
    if (bpf_map_lookup_elem(stacks, &next, &ws) == 0 && ws.ts + CW_WAIT_STACK_SLACK_NS >= s.ts &&
        ws.ts <= s.ts + CW_WAIT_STACK_SLACK_NS)
      e.stack_hash = ws.hash;
    out.push_back(e);
  }
  return out;
}

void Probes::forget_launch_keys(const std::vector<cw_launch_key>& keys) {
  const int fd = bpf_map__fd(libcall_->maps.launch_agg);
  for (const auto& k : keys) bpf_map_delete_elem(fd, &k);
}

void Probes::forget_collective_numbers(uint32_t tgid) {
  if (!libcall_) return;
  const int fd = bpf_map__fd(libcall_->maps.coll_seq);
  std::vector<cw_seq_key> gone;
  cw_seq_key key{}, next{};
  const cw_seq_key* prev = nullptr;
  // Collected first, deleted after: deleting the key a walk stands on would
  // restart it from the first key.
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    if (next.tgid == tgid) gone.push_back(next);
    key = next;
    prev = &key;
  }
  for (const auto& k : gone) bpf_map_delete_elem(fd, &k);
}

void Probes::forget_seen(bool code, const cw_seen_key& key) {
  bpf_map_delete_elem(bpf_map__fd(code ? libcall_->maps.code_seen : libcall_->maps.stack_seen), &key);
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
