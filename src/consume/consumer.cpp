// SPDX-License-Identifier: Apache-2.0
#include "causeway/consume/consumer.h"

#include <arpa/inet.h>

#include <cstring>

#include "causeway/common/error.h"
#include "causeway/common/op_table.h"
#include "causeway/common/time.h"
#include "causeway/discover/processes.h"

namespace causeway::consume {
namespace {

int ring_callback(void* ctx, void* data, size_t size) {
  return static_cast<EventConsumer*>(ctx)->handle(data, size);
}

const char* io_op_name(uint32_t op) {
  switch (op) {
    case 0: return "read";
    case 1: return "write";
    case 2: return "flush";
    case 3: return "discard";
    default: return "other";
  }
}

}  // namespace

EventConsumer::EventConsumer(int64_t mono_to_wall_ns)
    : mono_to_wall_ns_(mono_to_wall_ns), cuda_(std::make_shared<CudaDecoder>()) {
  register_cuda_decoder(decoders_, cuda_);
  register_family_decoders(decoders_);
}

EventConsumer::EventConsumer(int libcall_fd, int host_fd, int64_t mono_to_wall_ns)
    : EventConsumer(mono_to_wall_ns) {
  rb_ = ring_buffer__new(libcall_fd, ring_callback, this, nullptr);
  if (!rb_) throw Error("cannot open the library-call ring buffer");
  if (host_fd >= 0 && ring_buffer__add(rb_, host_fd, ring_callback, this) != 0) {
    ring_buffer__free(rb_);
    rb_ = nullptr;
    throw Error("cannot open the host ring buffer");
  }
}

EventConsumer::~EventConsumer() {
  if (rb_) ring_buffer__free(rb_);
}

int EventConsumer::drain() {
  if (!rb_) return 0;
  int n = ring_buffer__consume(rb_);
  retire_exited(uint64_t(monotonic_now_ns()));
  return n < 0 ? 0 : n;
}

void EventConsumer::retire_exited(uint64_t mono_now_ns) {
  while (!exited_.empty() && exited_.front().first + kRetireAfterNs <= mono_now_ns) {
    const uint32_t pid = exited_.front().second;
    exited_.pop_front();
    if (seen_pids_.count(pid)) continue;  // the pid came back (reused): keep its new state
    cuda_->forget_process(pid);
    if (stacks_) stacks_->forget_process(pid);
  }
}

const EventConsumer::Identity* EventConsumer::identity(uint32_t pid) const {
  auto it = identities_.find(pid);
  return it == identities_.end() ? nullptr : &it->second;
}

void EventConsumer::remember_identity(uint32_t pid, Identity id) {
  auto [it, fresh] = identities_.insert_or_assign(pid, std::move(id));
  if (!fresh) return;
  identity_order_.push_back(pid);
  if (identity_order_.size() > kMaxIdentities) {
    identities_.erase(identity_order_.front());
    identity_order_.pop_front();
  }
}

int EventConsumer::wait_and_drain(int timeout_ms) {
  if (!rb_) return 0;
  ring_buffer__poll(rb_, timeout_ms);
  return drain();
}

store::Batch EventConsumer::take_batch() {
  store::Batch out = std::move(batch_);
  batch_ = store::Batch{};
  return out;
}

int EventConsumer::handle(const void* data, size_t size) {
  stats_.records++;
  if (size < sizeof(cw_header)) {
    malformed_++;
    return 0;
  }
  cw_header h;
  std::memcpy(&h, data, sizeof h);
  // Records are fixed-size per type: anything else is not ours to decode.
  auto as = [&](auto tag) -> const decltype(tag)* {
    if (size < sizeof(decltype(tag))) {
      malformed_++;
      return nullptr;
    }
    return static_cast<const decltype(tag)*>(data);
  };
  switch (h.type) {
    case CW_EV_CALL:
      if (auto* e = as(cw_call_event{})) on_call(*e);
      break;
    case CW_EV_PYSTACK:
      if (auto* e = as(cw_pystack_event{}); e && stacks_) stacks_->on_pystack(*e, batch_);
      break;
    case CW_EV_PYCODE:
      if (auto* e = as(cw_pycode_event{}); e && stacks_) stacks_->on_pycode(*e);
      break;
    case CW_EV_OFFCPU:
      if (auto* e = as(cw_offcpu_event{})) on_offcpu(*e);
      break;
    case CW_EV_BLOCK_IO:
      if (auto* e = as(cw_block_io_event{})) on_block_io(*e);
      break;
    case CW_EV_TCP_RETRANS:
      if (auto* e = as(cw_tcp_retrans_event{})) on_tcp(*e);
      break;
    case CW_EV_PROC_EXEC:
    case CW_EV_PROC_EXIT:
    case CW_EV_PROC_FORK:
    case CW_EV_PROC_IDENTITY:
      if (auto* e = as(cw_proc_event{})) on_proc(*e);
      break;
    case CW_EV_RECLAIM:
      if (auto* e = as(cw_reclaim_event{})) on_reclaim(*e);
      break;
    default:
      malformed_++;
  }
  return 0;
}

void EventConsumer::seen_process(uint32_t pid) {
  if (!seen_pids_.insert(pid).second) return;
  // Who it is, as the kernel saw it at exec or at its first call: the process
  // may be gone before anything reads /proc (hooks_.on_new_process adds what
  // /proc still holds: the whole command line, the cgroup).
  if (const Identity* id = identity(pid)) {
    store::ProcessInfo p;
    p.pid = pid;
    p.comm = id->comm;
    p.cmdline = id->cmdline;
    if (id->ppid) p.ppid = id->ppid;
    batch_.processes.push_back(std::move(p));
  }
  if (hooks_.on_new_process) hooks_.on_new_process(pid);
}

void EventConsumer::on_call(const cw_call_event& e) {
  const OpSpec* op = find_op(e.op);
  if (!op) {
    malformed_++;
    return;
  }
  seen_process(e.hdr.pid);
  std::optional<int64_t> stack_id;
  if (stacks_) stack_id = stacks_->stack_for_call(e, batch_);
  DecodeContext ctx{wall(e.hdr.ts_ns), stack_id, batch_};
  if (CallDecoder* d = decoders_.find(op->shape)) d->decode(e, *op, ctx);
  // An aggregated launch reaches the live view through its kernel counters.
  if (e.flags & CW_CALL_AGGREGATED) return;
  stats_.ops[op->id].add(int64_t(e.dur_ns));
  stats_.interval[op->id].add(int64_t(e.dur_ns));
}

void EventConsumer::on_launch_aggregates(const LaunchSnapshot& snapshot, int64_t wall_ts_ns) {
  for (const auto& [k, now] : snapshot) {
    const OpSpec* op = find_op(k.op);
    if (!op) continue;
    cw_launch_agg& last = launch_last_[{k.pid, k.op, k.kernel}];
    if (now.calls <= last.calls) continue;  // no new launch (or a key reused after a wrap)
    store::LaunchStat l;
    l.ts_ns = wall_ts_ns;
    l.pid = k.pid;
    l.op_id = k.op;
    l.calls = int64_t(now.calls - last.calls);
    l.errors = int64_t(now.errors - last.errors);
    l.total_ns = int64_t(now.total_ns - last.total_ns);
    l.kernel = cuda_->launch_kernel(k.pid, op->shape, k.kernel);
    auto& all = stats_.ops[k.op];
    auto& interval = stats_.interval[k.op];
    for (int b = 0; b < CW_HIST_BUCKETS; b++) {
      const int64_t n = int64_t(now.hist[b] - last.hist[b]);
      l.buckets[size_t(b)] = n;
      if (n <= 0) continue;
      // The live view's histograms get the bucket's middle: log2 resolution.
      const int64_t mid = (int64_t(1) << b) + (int64_t(1) << b) / 2;
      all.add_many(mid, n);
      interval.add_many(mid, n);
    }
    last = now;
    batch_.launch_stats.push_back(std::move(l));
  }
}

void EventConsumer::flush_launch_aggregates(int64_t wall_ts_ns) {
  if (launch_source_.read) on_launch_aggregates(launch_source_.read(), wall_ts_ns);
}

void EventConsumer::forget_launch_process(uint32_t pid, int64_t wall_ts_ns) {
  // One read of the map serves both: the last deltas, and which keys to delete.
  const LaunchSnapshot snapshot = launch_source_.read();
  on_launch_aggregates(snapshot, wall_ts_ns);
  std::vector<cw_launch_key> gone;
  for (const auto& [k, v] : snapshot)
    if (k.pid == pid) gone.push_back(k);
  launch_source_.forget(gone);
  launch_last_.erase(launch_last_.lower_bound({pid, 0, 0}),
                     launch_last_.upper_bound({pid, UINT16_MAX, UINT64_MAX}));
}

void EventConsumer::on_offcpu(const cw_offcpu_event& e) {
  store::OffCpuInterval o;
  o.ts_ns = wall(e.hdr.ts_ns);
  o.dur_ns = int64_t(e.dur_ns);
  o.pid = e.hdr.pid;
  o.tid = e.hdr.tid;
  o.cpu = e.hdr.cpu;
  o.state = int(e.state);
  o.by_pid = e.by_pid;
  o.by_comm.assign(e.by_comm, strnlen(e.by_comm, sizeof e.by_comm));
  o.waker_pid = e.waker_pid;
  add_saturating(stats_.host.offcpu_ns, o.dur_ns);
  stats_.host.offcpu_count++;
  if (o.state == CW_STATE_RUNNING) add_saturating(stats_.host.offcpu_runnable_ns, o.dur_ns);
  batch_.offcpu.push_back(std::move(o));
}

void EventConsumer::on_block_io(const cw_block_io_event& e) {
  store::IoRequest r;
  r.ts_ns = wall(e.hdr.ts_ns);
  r.dur_ns = int64_t(e.dur_ns);
  r.pid = e.hdr.pid;
  r.dev = std::to_string(e.dev >> 20) + ":" + std::to_string(e.dev & 0xfffff);
  r.bytes = e.bytes;
  r.op = io_op_name(e.op);
  stats_.host.io_count++;
  add_saturating(stats_.host.io_ns, r.dur_ns);
  add_saturating(stats_.host.io_bytes, r.bytes);
  batch_.io.push_back(std::move(r));
}

void EventConsumer::on_tcp(const cw_tcp_retrans_event& e) {
  store::TcpRetransmit t;
  t.ts_ns = wall(e.hdr.ts_ns);
  t.pid = e.hdr.pid;
  t.saddr = format_ip(e.family, e.saddr);
  t.daddr = format_ip(e.family, e.daddr);
  t.sport = e.sport;
  t.dport = e.dport;
  t.state = tcp_state_name(e.state);
  stats_.host.retransmits++;
  batch_.tcp.push_back(std::move(t));
}

void EventConsumer::on_proc(const cw_proc_event& e) {
  const std::string comm(e.comm, strnlen(e.comm, sizeof e.comm));
  auto args = [&] {
    const size_t n = std::min<size_t>(e.args_len, sizeof e.args);
    std::string cmd = discover::join_cmdline(std::string_view(e.args, n));
    if (n == sizeof e.args) cmd += "…";  // cut by the kernel's copy
    return cmd;
  };
  store::ProcessInfo p;
  p.pid = e.hdr.pid;
  p.comm = comm;
  switch (e.hdr.type) {
    case CW_EV_PROC_EXEC:
      remember_identity(e.hdr.pid, {comm, args(), e.ppid});
      if (hooks_.on_exec)
        hooks_.on_exec(e.hdr.pid, std::string(e.filename, strnlen(e.filename, sizeof e.filename)), comm);
      return;  // a process row is written once it is traced (seen_process)
    case CW_EV_PROC_IDENTITY:
      // Its first traced call: traced from now on. Unless it exec'd while
      // traced, this is the first word of who it is.
      remember_identity(e.hdr.pid, {comm, args(), e.ppid});
      seen_process(e.hdr.pid);
      return;
    case CW_EV_PROC_FORK:
      p.ppid = e.ppid;
      p.start_ts_ns = wall(e.hdr.ts_ns);
      // A forked child (a DataLoader worker) runs its parent's command line.
      if (const Identity* parent = identity(e.ppid)) {
        remember_identity(e.hdr.pid, {comm, parent->cmdline, e.ppid});
        p.cmdline = parent->cmdline;
      }
      if (hooks_.on_fork) hooks_.on_fork(e.hdr.pid, e.ppid);
      break;
    case CW_EV_PROC_EXIT:
      p.end_ts_ns = wall(e.hdr.ts_ns);
      p.exit_code = e.exit_code;
      // Its last launch counts, while its kernel handles still have names.
      if (launch_source_.read) forget_launch_process(e.hdr.pid, wall(e.hdr.ts_ns));
      // Names and stacks stay a while: the other ring may still hold its
      // last calls (retire_exited).
      exited_.emplace_back(e.hdr.ts_ns, e.hdr.pid);
      seen_pids_.erase(e.hdr.pid);
      if (hooks_.on_exit) hooks_.on_exit(e.hdr.pid);
      break;
  }
  batch_.processes.push_back(std::move(p));
}

void EventConsumer::on_reclaim(const cw_reclaim_event& e) {
  store::Reclaim r;
  r.ts_ns = wall(e.hdr.ts_ns);
  r.dur_ns = int64_t(e.dur_ns);
  r.pid = e.hdr.pid;
  r.tid = e.hdr.tid;
  r.nr_reclaimed = int64_t(e.nr_reclaimed);
  add_saturating(stats_.host.reclaim_ns, r.dur_ns);
  batch_.reclaims.push_back(std::move(r));
}

std::string format_ip(uint16_t family, const uint8_t addr[16]) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (family == AF_INET)
    inet_ntop(AF_INET, addr, buf, sizeof buf);
  else
    inet_ntop(AF_INET6, addr, buf, sizeof buf);
  return buf;
}

std::string tcp_state_name(uint16_t s) {
  static const char* names[] = {"?", "ESTABLISHED", "SYN_SENT", "SYN_RECV", "FIN_WAIT1",
                                "FIN_WAIT2", "TIME_WAIT", "CLOSE", "CLOSE_WAIT", "LAST_ACK",
                                "LISTEN", "CLOSING", "NEW_SYN_RECV"};
  return s < std::size(names) ? names[s] : std::to_string(s);
}

}  // namespace causeway::consume
