// SPDX-License-Identifier: Apache-2.0
// The processes a trace follows: libraries found and probed, each process
// looked at again while it maps code, its identity sent once, the command
// started under the probes.
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "causeway/attach/python_process.h"
#include "causeway/discover/processes.h"
#include "trace_agent.h"

namespace causeway::agent {

void TraceAgent::note_coverage(uint32_t pid, const std::vector<discover::LibraryFile>& mapped) {
  auto c = discover::coverage_of(mapped);
  // Only the layers this trace probes.
  if (!probe_cfg_.layers.count(Layer::Runtime)) c.shared_runtimes = 0, c.embedded.clear();
  c.driver &= probe_cfg_.layers.count(Layer::Driver) > 0;
  c.nccl &= probe_cfg_.layers.count(Layer::Nccl) > 0;
  c.hip &= probe_cfg_.layers.count(Layer::Hip) > 0;
  c.verbs &= probe_cfg_.layers.count(Layer::Verbs) > 0;
  c.torch_allocator &= probe_cfg_.layers.count(Layer::Torch) > 0;
  if (c.empty()) return;
  // A later scan that sees less (the process is exiting) keeps what was seen.
  auto& known = coverage_[pid];
  if (c.shared_runtimes < known.shared_runtimes) c.shared_runtimes = known.shared_runtimes;
  if (c.embedded.empty()) c.embedded = known.embedded;
  c.driver |= known.driver, c.nccl |= known.nccl, c.hip |= known.hip, c.verbs |= known.verbs;
  c.torch_allocator |= known.torch_allocator;
  known = std::move(c);
}

void TraceAgent::forget_exited(int64_t now) {
  for (auto it = exited_at_.begin(); it != exited_at_.end();) {
    if (now - it->second < kExitedKeepNs) {
      ++it;
      continue;
    }
    live_.erase(it->first);
    consumer_->stats().processes.erase(it->first);
    it = exited_at_.erase(it);
  }
}

void TraceAgent::attach_libraries(const std::vector<discover::LibraryFile>& libs) {
  for (const auto& lib : libs) {
    if (!attached_.insert({lib.id.dev, lib.id.ino}).second) continue;
    auto r = probes_.attach_library(lib.path, lib.kind);
    ops_attached_ += r.ops_attached;
    weigh_entries(r.entries);
    // Frames in a probed library stay nameable after their process exits.
    if (resolver_) resolver_->remember_file(lib.path);
    else probed_files_.push_back(lib.path);
    spdlog::info("probing {} ({} functions)", lib.path, r.ops_attached);
  }
}

void TraceAgent::attach_discovered_libraries() {
  discover::DiscoverOptions dopts;
  dopts.extra_paths = cfg_.libs;
  auto libs = discover::discover_libraries(dopts);
  // A GPU host: the NVIDIA kernel driver is loaded and a libcuda is probed.
  // (A libcuda alone, e.g. a stand-in mapped by some process, is not enough.)
  struct stat nv;
  const bool have_driver =
      probe_cfg_.layers.count(Layer::Driver) && stat("/proc/driver/nvidia/version", &nv) == 0 &&
      std::any_of(libs.begin(), libs.end(), [](const auto& l) { return l.kind == LibraryKind::Cuda; });
  const LaunchLayer layer = cfg_.launch_layer;
  if (layer == LaunchLayer::Driver || layer == LaunchLayer::Auto)
    probes_.set_runtime_launches(!(have_driver || layer == LaunchLayer::Driver));
  if (layer == LaunchLayer::Driver && !have_driver)
    spdlog::warn("--launch-layer driver: no libcuda found; runtime launches are not traced");
  spdlog::info("launches traced at the {} layer",
               have_driver && layer != LaunchLayer::Both && layer != LaunchLayer::Runtime ? "driver"
                                                                                         : "runtime");
  attach_libraries(libs);
}

void TraceAgent::schedule_rescan(uint32_t pid, int64_t delay, int fast) {
  const int64_t due = monotonic_now_ns() + delay;
  auto [it, fresh] = rescan_due_.emplace(pid, Rescan{due, fast});
  if (!fresh) {
    it->second.due = std::min(it->second.due, due);
    it->second.fast = std::max(it->second.fast, fast);
  }
}

void TraceAgent::trace_pid(uint32_t pid) {
  probes_.trace_tgid(pid);
  schedule_rescan(pid, 0);
}

// A process first seen (its first record, or a call found in flight in it
// before the trace: a hung job sends none): its identity goes out once.
void TraceAgent::process_seen(uint32_t pid) {
  if (!announced_.insert(pid).second) return;
  // A new job: its launches seen whole for a while (its first steps).
  // (The kernel's counters are read only when the probes go on now.)
  if (probe_cfg_.duty_cycled && duty_.new_process(monotonic_now_ns(), duty_.on() ? 0 : duty_calls()))
    toggle_duty_probes(true);
  if (auto info = discover::read_process_info(pid, "/proc", cfg_.runtime_root)) {
    live_[pid] = *info;
    const bool older = info->start_ts_ns && *info->start_ts_ns < trace_start_wall_ - kNsPerSec;
    new_processes_.push_back(std::move(*info));
    // A job already running when the trace began named its threads long
    // before (pt_autograd_0, its loader's): their names as they are now.
    // (A process started since has its threads' creations and renames.)
    if (older)
      for (auto& t : discover::thread_names(pid, "/proc")) {
        t.ts_ns = wall_now_ns();
        new_threads_.push_back(std::move(t));
      }
  } else {
    new_processes_.push_back(model::ProcessInfo{.pid = pid});
    // Gone before its records were drained (a short job): its series still
    // show for a while, under the name the kernel gave.
    const auto* id = consumer_->identity(pid);
    live_[pid] = model::ProcessInfo{.pid = pid, .comm = id ? id->comm : ""};
    exited_at_[pid] = monotonic_now_ns();
  }
}

void TraceAgent::wire_consumer() {
  if (cfg_.launch_sample_every)
    consumer_->set_launch_source({[this] { return probes_.launch_aggregates(); },
                                  [this](const std::vector<cw_launch_key>& keys) {
                                    probes_.forget_launch_keys(keys);
                                  }});
  consumer_->count_per_process(cfg_.metrics);
  consume::ConsumerHooks hooks;
  hooks.on_new_process = [this](uint32_t pid) {
    process_seen(pid);
    schedule_rescan(pid, 0);
  };
  hooks.on_exec = [this](uint32_t pid, const std::string&, const std::string& comm) {
    if (!comms_.empty() && comms_.count(comm)) trace_pid(pid);
    python_checked_.erase(pid);  // a new image: maybe a different interpreter, or none
    code_maps_.erase(pid);
    // Now (the executable: a static Python's runtime), and again once the
    // dynamic loader has mapped the DT_NEEDED libraries.
    if (!probe_cfg_.filter_tgids || rescan_due_.count(pid)) schedule_rescan(pid, 0, 2);
  };
  hooks.on_fork = [this](uint32_t child, uint32_t) { schedule_rescan(child, 0); };
  hooks.on_return_site = [this](uint32_t pid, uint16_t op, uint64_t addr) { attach_return_site(pid, op, addr); };
  hooks.on_exit = [this](uint32_t pid) {
    announced_.erase(pid);  // the pid, reused, is another process
    if (live_.count(pid)) exited_at_[pid] = monotonic_now_ns();
    rescan_due_.erase(pid);
    code_maps_.erase(pid);
    if (python_checked_.erase(pid)) attach::unregister_python_process(probes_.py_procs_fd(), pid);
    if (probe_cfg_.filter_tgids) probes_.untrace_tgid(pid);
    probes_.forget_collective_numbers(pid);
  };
  consumer_->set_hooks(hooks);

  for (uint32_t pid : cfg_.pids) trace_pid(pid);
  if (!comms_.empty()) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
      const std::string name = entry.path().filename();
      if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
      if (comms_.count(read_first_line(entry.path() / "comm"))) trace_pid(uint32_t(std::stoul(name)));
    }
  }
}

void TraceAgent::attach_return_site(uint32_t pid, uint16_t op, uint64_t addr) {
  const OpSpec* spec = find_op(op);
  if (!spec) return;
  for (const auto& r : discover::read_proc_maps(pid)) {
    if (addr < r.start || addr >= r.end) continue;
    bool canonical = true;
    const std::string path =
        r.executable() && !r.path.empty() && r.path[0] == '/' ? discover::openable_mapped_path("/proc", pid, r, &canonical)
                                                              : std::string();
    if (path.empty()) {
      spdlog::debug("pid {}: return site {:#x} of {} is in no file mapped as code", pid, addr, spec->name);
      return;
    }
    if (probes_.attach_return_site(path, addr - r.start + r.offset, op | spec->cookie_flags))
      probes_.mark_return_site(pid, addr);
    return;
  }
}

void TraceAgent::rescan_due_processes(int64_t now) {
  std::vector<uint32_t> due;
  for (const auto& [pid, r] : rescan_due_)
    if (r.due <= now) due.push_back(pid);
  int64_t drained_at = monotonic_now_ns();
  for (uint32_t pid : due) {
    // The rings fill while this looks (4 PyTorch ranks and their loader
    // workers: 0.3-2 s a round): drained between processes. A drain may
    // end a process (its exit), so each is looked up again.
    if (monotonic_now_ns() - drained_at >= 20 * kNsPerMs) {
      consumer_->drain();
      drained_at = monotonic_now_ns();
    }
    auto it = rescan_due_.find(pid);
    if (it == rescan_due_.end()) continue;
    Rescan& r = it->second;
    // Nothing new mapped as code since the last look: only the reschedule.
    const uint64_t sig = discover::code_maps_signature(pid);
    uint64_t& last_sig = code_maps_[pid];
    const bool same = sig != 0 && sig == last_sig && (!cfg_.stacks || python_checked_.count(pid));
    last_sig = sig;
    if (same) {
      r.due = now + (r.fast > 0 ? 50 * kNsPerMs : kNsPerSec);
      if (r.fast > 0) r.fast--;
      continue;
    }
    const auto mapped = discover::libraries_mapped_by(pid);
    attach_libraries(mapped);
    note_coverage(pid, mapped);
    // Its files, while it lives: native frames stay nameable after it exits.
    if (resolver_) resolver_->remember_process(pid);
    // Tell the Python walker, and the resolver the same runtime (it decodes
    // frames after the process is gone). A shared-library Python
    // (libpython3.X.so) is mapped by the loader after exec: until the fast
    // rescans after an exec are over, a miss is tried again.
    std::optional<discover::PythonRuntime> rt;
    if (cfg_.stacks && !python_checked_.count(pid)) {
      rt = attach::register_python_process(probes_.py_procs_fd(), pid);
      if (rt && resolver_) resolver_->add_python_process(*rt);
      if (rt || r.fast == 0) python_checked_.insert(pid);
    }
    // A process that began before the trace: calls it was already inside
    // (a job traced after it started hanging), once, with its probes on.
    if (!mapped.empty() && looked_before_.insert(pid).second) {
      auto info = discover::read_process_info(pid);
      if (info && info->start_ts_ns && *info->start_ts_ns < trace_start_wall_ - kNsPerSec) {
        if (!rt && cfg_.stacks) rt = discover::find_python_runtime(pid);
        model::Batch b;
        if (before_.scan(pid, rt ? &*rt : nullptr, cfg_.stacks ? resolver_ : nullptr, b, monotonic_now_ns()))
          process_seen(pid);
        out_->post(std::move(b));
      }
    }
    // Traced processes keep being rescanned (late dlopen), once a second.
    r.due = now + (r.fast > 0 ? 50 * kNsPerMs : kNsPerSec);
    if (r.fast > 0) r.fast--;
  }
}

// The command to trace (--), forked stopped: it is in the traced set, and a
// runtime linked into it probed, before its first instruction runs.
std::unique_ptr<TracedCommand> TraceAgent::prepare_command() {
  if (cfg_.command.empty()) return nullptr;
  auto child = std::make_unique<TracedCommand>(cfg_.command);
  // Its exec event (which wakes the consumer) triggers the first rescan;
  // this one is the fallback without host probes.
  probes_.trace_tgid(uint32_t(child->pid()));
  schedule_rescan(uint32_t(child->pid()), kNsPerSec);
  // A runtime linked into the command itself is probed before it runs:
  // its first call comes before any rescan could find it.
  if (auto exe = child->executable(); !exe.empty() && probe_cfg_.layers.count(Layer::Runtime))
    if (auto id = discover::file_id(exe); id && discover::embeds_cuda_runtime(exe)) {
      const std::vector<discover::LibraryFile> own = {
          discover::LibraryFile{exe, LibraryKind::Cudart, *id, {"command"}, {}, {exe}, true}};
      attach_libraries(own);
      note_coverage(uint32_t(child->pid()), own);
    }
  return child;
}

}  // namespace causeway::agent
