// SPDX-License-Identifier: Apache-2.0
#include "causeway/present/trace_session.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <cstring>
#include <fstream>
#include <map>
#include <set>

#include "causeway/attach/probes.h"
#include "causeway/attach/python_process.h"
#include "causeway/common/error.h"
#include "causeway/common/time.h"
#include "causeway/consume/consumer.h"
#include "causeway/consume/ib_counters.h"
#include "causeway/discover/libraries.h"
#include "causeway/discover/processes.h"
#include "causeway/present/live_view.h"
#include "causeway/store/trace_writer.h"

namespace causeway::cli {
namespace {

std::atomic<int> g_stop_signal{0};

void on_stop_signal(int sig) { g_stop_signal = sig; }

std::string read_first_line(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
}

std::string host_name() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

uint64_t cgroup_id_of(const std::string& path) {
  std::string p = path;
  if (p.rfind("/sys/fs/cgroup", 0) != 0) p = "/sys/fs/cgroup/" + p;
  struct stat st;
  // cgroup v2: the cgroup id is the inode number of its directory.
  if (stat(p.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw UsageError("--cgroup " + path + ": no such cgroup v2 directory (" + p + ")");
  return st.st_ino;
}

std::set<Layer> parse_layers(const std::vector<std::string>& names) {
  if (names.empty()) return {Layer::Runtime, Layer::Driver, Layer::Nccl, Layer::Hip, Layer::Verbs};
  std::set<Layer> out;
  for (const auto& n : names) {
    bool found = false;
    for (Layer l : {Layer::Runtime, Layer::Driver, Layer::Nccl, Layer::Hip, Layer::Verbs})
      if (layer_name(l) == n) out.insert(l), found = true;
    if (!found) throw UsageError("unknown layer '" + n + "' (runtime, driver, nccl, hip, verbs)");
  }
  return out;
}

// A child started stopped on a pipe, so its first call is already traced.
class TracedCommand {
 public:
  explicit TracedCommand(const std::vector<std::string>& argv) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) throw Error("pipe: " + std::string(strerror(errno)));
    pid_ = fork();
    if (pid_ < 0) throw Error("fork: " + std::string(strerror(errno)));
    if (pid_ == 0) {
      close(fds[1]);
      char go;
      if (read(fds[0], &go, 1) != 1) _exit(127);  // the tracer gave up
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      signal(SIGINT, SIG_DFL);
      execvp(args[0], args.data());
      std::fprintf(stderr, "causeway: cannot run %s: %s\n", args[0], strerror(errno));
      _exit(127);
    }
    close(fds[0]);
    go_fd_ = fds[1];
  }
  ~TracedCommand() {
    if (go_fd_ >= 0) close(go_fd_);
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }
  void start() {
    if (write(go_fd_, "g", 1) != 1) throw Error("cannot start the traced command");
    close(go_fd_);
    go_fd_ = -1;
  }
  bool poll_exit() {
    if (exited_) return true;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      exited_ = true;
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    return exited_;
  }
  pid_t pid() const { return pid_; }
  int exit_code() const { return exit_code_; }

 private:
  pid_t pid_ = -1;
  int go_fd_ = -1;
  bool exited_ = false;
  int exit_code_ = -1;
};

}  // namespace

TraceSummary run_trace(const TraceOptions& o, const std::string& command_line) {
  attach::ProbeConfig cfg;
  cfg.filter_tgids = !o.pids.empty() || !o.comms.empty() || !o.command.empty();
  cfg.target_cgroup = o.cgroup.empty() ? 0 : cgroup_id_of(o.cgroup);
  cfg.comms = o.comms;
  cfg.launch_min_ns = uint64_t(o.launch_min_ns);
  cfg.launch_sample_every = o.launch_sample_every;
  cfg.offcpu_min_ns = uint64_t(o.offcpu_min_ns);
  cfg.pystack_launch_min_ns = uint64_t(o.pystack_launch_min_ns);
  cfg.libcall_ring_bytes = (o.ring_mb ? o.ring_mb : o.launch_sample_every ? 8u : 16u) << 20;
  cfg.host = o.host;
  cfg.stacks = o.stacks;
  cfg.entry_only = o.entry_only;
  cfg.floor_pair = o.floor_pair;
  cfg.layers = parse_layers(o.layers);
  for (uint32_t pid : o.pids)
    if (kill(pid_t(pid), 0) != 0 && errno == ESRCH)
      throw UsageError("--pid " + std::to_string(pid) + ": no such process");

  // Fails fast, before any file is created, when BPF is not usable.
  attach::Probes probes(cfg);

  // Library files, attached once per (device, inode). Their paths go to the
  // stack resolver once it exists: frames in them stay nameable after their
  // process exits.
  consume::StackResolver* resolver = nullptr;
  std::vector<std::string> probed_files;
  auto consumer_stacks = [&]() { return resolver; };
  std::set<std::pair<uint64_t, uint64_t>> attached;
  int ops_attached = 0;
  auto attach_libs = [&](const std::vector<discover::LibraryFile>& libs) {
    for (const auto& lib : libs) {
      if (!attached.insert({lib.id.dev, lib.id.ino}).second) continue;
      auto r = probes.attach_library(lib.path, lib.kind);
      ops_attached += r.ops_attached;
      if (auto* st = consumer_stacks()) st->remember_file(lib.path);
      else probed_files.push_back(lib.path);
      spdlog::info("probing {} ({} functions)", lib.path, r.ops_attached);
    }
  };
  discover::DiscoverOptions dopts;
  dopts.extra_paths = o.libs;
  auto libs = discover::discover_libraries(dopts);
  // A GPU host: the NVIDIA kernel driver is loaded and a libcuda is probed.
  // (A libcuda alone, e.g. a stand-in mapped by some process, is not enough.)
  struct stat nv;
  const bool have_driver =
      cfg.layers.count(Layer::Driver) && stat("/proc/driver/nvidia/version", &nv) == 0 &&
      std::any_of(libs.begin(), libs.end(), [](const auto& l) { return l.kind == LibraryKind::Cuda; });
  if (o.launch_layer == "driver" || o.launch_layer == "auto")
    probes.set_runtime_launches(!(have_driver || o.launch_layer == "driver"));
  if (o.launch_layer == "driver" && !have_driver)
    spdlog::warn("--launch-layer driver: no libcuda found; runtime launches are not traced");
  spdlog::info("launches traced at the {} layer", have_driver && o.launch_layer != "both" &&
                                                          o.launch_layer != "runtime"
                                                      ? "driver"
                                                      : "runtime");
  attach_libs(libs);

  const std::string db_path = o.db_path.empty() ? store::default_db_path(true) : o.db_path;
  auto writer = std::make_unique<store::TraceWriter>(db_path);
  const int64_t mono_to_wall = wall_now_ns() - monotonic_now_ns();
  model::SessionInfo session;
  session.host = host_name();
  session.node_id = o.node_id.empty() ? session.host : o.node_id;
  session.boot_id = read_first_line("/proc/sys/kernel/random/boot_id");
  session.mono_to_wall_ns = mono_to_wall;
  session.version = CAUSEWAY_VERSION;
  session.command_line = command_line;
  session.start_ts_ns = wall_now_ns();
  const int64_t session_id = writer->begin_session(session);
  store::AsyncTraceWriter out(std::move(writer), o.max_db_bytes);

  consume::EventConsumer consumer(probes.libcall_ring_fd(), probes.host_ring_fd(), mono_to_wall);
  consume::StackOptions sopts;
  sopts.python = sopts.native = o.stacks;
  sopts.first_stack_id = (session_id << 32) + 1;  // unique across the sessions of one file
  sopts.resend = [&probes](bool code, const cw_seen_key& key) { probes.forget_seen(code, key); };
  consumer.set_stack_resolver(consume::make_stack_resolver(sopts));
  resolver = consumer.stacks();
  if (resolver)
    for (const auto& f : probed_files) resolver->remember_file(f);
  if (o.launch_sample_every)
    consumer.set_launch_source({[&probes] { return probes.launch_aggregates(); },
                                [&probes](const std::vector<cw_launch_key>& keys) {
                                  probes.forget_launch_keys(keys);
                                }});

  // Processes whose maps are rescanned for newly loaded libraries (dlopen):
  // when the next rescan is due, and how many more come 50 ms apart (just
  // after an exec, while the loader maps libraries) before settling at 1 s.
  struct Rescan {
    int64_t due;
    int fast;
  };
  std::map<uint32_t, Rescan> rescan_due;
  // Processes already offered to the Python walker (once each: it reads ELF files).
  std::set<uint32_t> python_checked;
  std::vector<model::ProcessInfo> new_processes;
  std::set<std::string> comms;
  for (const auto& c : o.comms) comms.insert(c.substr(0, CW_COMM_LEN - 1));
  auto schedule_rescan = [&](uint32_t pid, int64_t delay, int fast = 0) {
    int64_t due = monotonic_now_ns() + delay;
    auto [it, fresh] = rescan_due.emplace(pid, Rescan{due, fast});
    if (!fresh) {
      it->second.due = std::min(it->second.due, due);
      it->second.fast = std::max(it->second.fast, fast);
    }
  };
  auto trace_pid = [&](uint32_t pid) {
    probes.trace_tgid(pid);
    schedule_rescan(pid, 0);
  };

  consume::ConsumerHooks hooks;
  hooks.on_new_process = [&](uint32_t pid) {
    if (auto info = discover::read_process_info(pid)) new_processes.push_back(std::move(*info));
    else new_processes.push_back(model::ProcessInfo{.pid = pid});
    schedule_rescan(pid, 0);
  };
  hooks.on_exec = [&](uint32_t pid, const std::string&, const std::string& comm) {
    if (!comms.empty() && comms.count(comm)) trace_pid(pid);
    python_checked.erase(pid);  // a new image: maybe a different interpreter, or none
    // Now (the executable: a static Python's runtime), and again once the
    // dynamic loader has mapped the DT_NEEDED libraries.
    if (!cfg.filter_tgids || rescan_due.count(pid)) schedule_rescan(pid, 0, 2);
  };
  hooks.on_fork = [&](uint32_t child, uint32_t) { schedule_rescan(child, 0); };
  hooks.on_exit = [&](uint32_t pid) {
    rescan_due.erase(pid);
    if (python_checked.erase(pid)) attach::unregister_python_process(probes.py_procs_fd(), pid);
    if (cfg.filter_tgids) probes.untrace_tgid(pid);
  };
  consumer.set_hooks(hooks);

  for (uint32_t pid : o.pids) trace_pid(pid);
  if (!comms.empty()) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
      const std::string name = entry.path().filename();
      if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
      if (comms.count(read_first_line(entry.path() / "comm"))) trace_pid(uint32_t(std::stoul(name)));
    }
  }

  std::unique_ptr<TracedCommand> child;
  if (!o.command.empty()) {
    child = std::make_unique<TracedCommand>(o.command);
    // Its exec event (which wakes the consumer) triggers the first rescan;
    // this one is the fallback without host probes.
    probes.trace_tgid(uint32_t(child->pid()));
    schedule_rescan(uint32_t(child->pid()), kNsPerSec);
  }

  struct sigaction sa = {};
  sa.sa_handler = on_stop_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  g_stop_signal = 0;

  LiveMode live = o.live;
  if (live == LiveMode::Auto) live = isatty(STDOUT_FILENO) ? LiveMode::Table : LiveMode::Lines;
  LiveView view(live, db_path);

  if (child) child->start();
  const int64_t start = monotonic_now_ns();
  const int64_t end = o.duration_ns ? start + o.duration_ns : INT64_MAX;
  int64_t next_view = start + kNsPerSec, next_counts = start + kNsPerSec;
  // RDMA port counters: cumulative, sampled with the op counts (no HCA: no files).
  consume::IbCounterPoller ib_counters(o.sysfs_root);
  if (size_t n = ib_counters.start()) spdlog::info("sampling {} RDMA port counters", n);
  {
    model::Batch first;
    ib_counters.sample(first, wall_now_ns());
    out.post(std::move(first));
  }
  uint64_t last_drops[CW_DROP_MAX] = {};
  constexpr int64_t kDrainEvery = 50 * kNsPerMs;
  std::string stop_reason = "duration reached";

  auto flush_drops = [&](int64_t now_wall, model::Batch& b) {
    for (int s = 0; s < CW_DROP_MAX; s++) {
      uint64_t total = probes.drops(cw_drop_source(s));
      if (total > last_drops[s]) {
        b.add(model::Drop{now_wall, std::string(model::kDropSourceNames[s]), int64_t(total - last_drops[s])});
        last_drops[s] = total;
      }
    }
  };
  // Lost records; rows shed under overload are counted apart (planned, their
  // calls stay counted).
  auto total_drops = [&] {
    uint64_t t = 0;
    for (int s = 0; s < CW_DROP_MAX; s++)
      if (s != CW_DROP_SHED) t += last_drops[s];
    return int64_t(t);
  };
  auto op_counts = [&] {
    std::vector<model::OpCount> counts;
    for (const auto& [op, s] : probes.op_stats())
      counts.push_back({op, int64_t(s.calls), int64_t(s.errors), int64_t(s.total_ns),
                        int64_t(s.nested), int64_t(s.dropped), int64_t(s.shed)});
    return counts;
  };
  auto post = [&] {
    model::Batch b = consumer.take_batch();
    for (auto& p : new_processes) b.add(std::move(p));
    new_processes.clear();
    out.post(std::move(b));
  };

  for (;;) {
    int64_t now = monotonic_now_ns();
    if (g_stop_signal) {
      stop_reason = g_stop_signal == SIGINT ? "interrupted" : "terminated";
      break;
    }
    if (now >= end) break;
    if (child && child->poll_exit()) {
      stop_reason = "command exited with status " + std::to_string(child->exit_code());
      break;
    }
    if (out.failed()) throw Error("writing " + db_path + " failed: " + out.error() +
                                  " (events up to the last commit are kept)");
    consumer.drain();
    now = monotonic_now_ns();  // hooks run by the drain schedule rescans for "now"
    for (auto it = rescan_due.begin(); it != rescan_due.end(); ++it) {
      if (it->second.due > now) continue;
      attach_libs(discover::libraries_mapped_by(it->first));
      // Its files, while it lives: native frames stay nameable after it exits.
      if (resolver) resolver->remember_process(it->first);
      // The interpreter is mapped by now (exec + 50 ms): tell the Python walker,
      // and the resolver the same runtime (it decodes frames after the process is gone).
      // A shared-library Python (libpython3.X.so) is mapped by the loader
      // after exec: until the fast rescans after an exec are over, a miss is
      // tried again.
      if (o.stacks && !python_checked.count(it->first)) {
        auto rt = attach::register_python_process(probes.py_procs_fd(), it->first);
        if (rt && resolver) resolver->add_python_process(*rt);
        if (rt || it->second.fast == 0) python_checked.insert(it->first);
      }
      // Traced processes keep being rescanned (late dlopen), once a second.
      it->second.due = now + (it->second.fast > 0 ? 50 * kNsPerMs : kNsPerSec);
      if (it->second.fast > 0) it->second.fast--;
    }
    if (now >= next_counts) {
      consumer.flush_launch_aggregates(wall_now_ns());
      model::Batch b = consumer.take_batch();
      flush_drops(wall_now_ns(), b);
      ib_counters.sample(b, wall_now_ns());
      for (auto& p : new_processes) b.add(std::move(p));
      new_processes.clear();
      out.post(std::move(b));
      next_counts = now + kNsPerSec;
    } else {
      post();
    }
    if (now >= next_view) {
      view.refresh(consumer.stats(), total_drops(), now - start, out.rows_written());
      consumer.stats().reset_interval();
      next_view = now + kNsPerSec;
    }
    // Sleep until the next drain, or until an exec wakes us.
    int64_t sleep_ns = std::min(kDrainEvery, std::max<int64_t>(end - monotonic_now_ns(), 0));
    consumer.wait_and_drain(int(sleep_ns / kNsPerMs));
  }

  // Final drain: a child that just exited has its last records in the ring.
  while (consumer.drain() > 0) {
  }
  consumer.flush_launch_aggregates(wall_now_ns());
  model::Batch last = consumer.take_batch();
  flush_drops(wall_now_ns(), last);
  ib_counters.sample(last, wall_now_ns(), /*all=*/true);
  for (auto& p : new_processes) last.add(std::move(p));
  out.post(std::move(last));
  auto counts = op_counts();
  try {
    out.close(wall_now_ns(), counts);
  } catch (const Error& e) {
    // Same one line as a failure mid-run (e.g. the disk filled while the
    // last batches were written).
    throw Error("writing " + db_path + " failed: " + (out.failed() ? out.error() : e.what()) +
                " (events up to the last commit are kept)");
  }

  TraceSummary sum;
  sum.db_path = db_path;
  for (const auto& c : counts) sum.calls += c.calls;
  sum.rows = out.rows_written();
  sum.dropped = total_drops();
  sum.shed = int64_t(last_drops[CW_DROP_SHED]);
  if (child) {
    child->poll_exit();
    sum.command_exit = child->exit_code();
  }
  view.final_summary(consumer.stats(), sum.dropped, sum.shed, monotonic_now_ns() - start, sum.rows,
                     stop_reason, ops_attached, attached.size());
  return sum;
}

}  // namespace causeway::cli
