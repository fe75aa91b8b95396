// SPDX-License-Identifier: Apache-2.0
#include "causeway/consume/consumer.h"

#include <algorithm>
#include <concepts>
#include <cstring>
#include <span>

#include "causeway/common/error.h"
#include "causeway/common/op_table.h"
#include "causeway/common/time.h"
#include "causeway/discover/processes.h"

namespace causeway::consume {
namespace {

int ring_callback(void* ctx, void* data, size_t size) {
  return static_cast<EventConsumer*>(ctx)->handle(data, size);
}

// A family that decodes from its record alone (include/causeway/model/).
template <typename T>
concept SelfDecoding = requires(const typename T::Event& e, model::DecodeContext& cx) {
  { T::kEventType } -> std::convertible_to<uint32_t>;
  { T::decode(e, cx) } -> std::same_as<typename T::Row>;
};

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

model::Batch EventConsumer::take_batch() {
  model::Batch out = std::move(batch_);
  batch_ = model::Batch{};
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
    case CW_EV_RETSITE:
      if (auto* e = as(cw_retsite_event{}); e && hooks_.on_return_site) hooks_.on_return_site(e->hdr.pid, e->op, e->addr);
      break;
    case CW_EV_PYSTACK:
      if (auto* e = as(cw_pystack_event{}); e && stacks_) stacks_->on_pystack(*e, batch_);
      break;
    case CW_EV_PYCODE:
      if (auto* e = as(cw_pycode_event{}); e && stacks_) stacks_->on_pycode(*e);
      break;
    case CW_EV_CPU_SAMPLE:
      if (auto* e = as(cw_cpu_sample_event{})) on_cpu_sample(*e);
      break;
    case CW_EV_OFFCPU:
      if (auto* e = as(cw_offcpu_event{})) {
        model::DecodeContext cx{mono_to_wall_ns_, stats_.host};
        model::OffCpuInterval o = model::OffCpu::decode(*e, cx);
        // The stack it slept in (bpf/libcall.bpf.c took it at the switch-out).
        if (stacks_ && e->stack_hash) o.stack_id = stacks_->stack_for(e->hdr.pid, e->stack_hash);
        batch_.add(std::move(o));
      }
      break;
    case CW_EV_SOCK_IO:
      if (auto* e = as(cw_sock_event{})) on_socket(*e);
      break;
    case CW_EV_SOCK_CLOSE:
      if (auto* e = as(cw_sock_close_event{})) requests_.on_close(e->sock, wall(e->hdr.ts_ns), e->by_peer, batch_.of<model::ServedRequest>());
      break;
    case CW_EV_PROC_EXEC:
    case CW_EV_PROC_EXIT:
    case CW_EV_PROC_FORK:
    case CW_EV_PROC_IDENTITY:
      if (auto* e = as(cw_proc_event{})) on_proc(*e);
      break;
    default: {
      // Every family that decodes from its record alone, by its type number.
      bool known = false;
      model::DecodeContext cx{mono_to_wall_ns_, stats_.host};
      model::for_each_table([&]<typename T>() {
        if constexpr (SelfDecoding<T>) {
          if (known || h.type != T::kEventType) return;
          known = true;
          if (auto* e = as(typename T::Event{})) batch_.add(T::decode(*e, cx));
        }
      });
      if (!known) malformed_++;
    }
  }
  return 0;
}

void EventConsumer::seen_process(uint32_t pid) {
  if (!seen_pids_.insert(pid).second) return;
  // Who it is, as the kernel saw it at exec or at its first call: the process
  // may be gone before anything reads /proc (hooks_.on_new_process adds what
  // /proc still holds: the whole command line, the cgroup).
  if (const Identity* id = identity(pid)) {
    model::ProcessInfo p;
    p.pid = pid;
    p.comm = id->comm;
    p.cmdline = id->cmdline;
    if (id->ppid) p.ppid = id->ppid;
    batch_.add(std::move(p));
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
  const size_t cuda_rows = batch_.of<model::CudaCall>().size(), nccl_rows = batch_.of<model::NcclCall>().size();
  if (CallDecoder* d = decoders_.find(op->shape)) d->decode(e, *op, ctx);
  // An aggregated launch reaches the live view through its kernel counters.
  if (e.flags & CW_CALL_AGGREGATED) return;
  // Failed as the kernel's counters judge it (op_stats.errors).
  const bool failed = (op->cookie_flags & CW_COOKIE_RET_PTR) ? e.ret == 0 : uint32_t(e.ret) != 0;
  if (per_process_) tally(e.hdr.pid, *op, failed, cuda_rows, nccl_rows);
  stats_.ops[op->id].add(int64_t(e.dur_ns));
  stats_.interval[op->id].add(int64_t(e.dur_ns));
}

// The metrics' per-process tallies, from the rows this call decoded into.
void EventConsumer::tally(uint32_t pid, const OpSpec& op, bool failed, size_t cuda_rows, size_t nccl_rows) {
  auto& t = stats_.processes[pid];
  t.calls[op.id]++;
  if (failed) t.errors[op.id]++;
  if (op.cls == OpClass::Copy)
    for (const auto& c : std::span(batch_.of<model::CudaCall>()).subspan(cuda_rows))
      t.copies[c.kind.value_or(-1)].add(c.bytes.value_or(0), c.dur_ns);
  if (op.shape == ArgShape::TensorAlloc || op.shape == ArgShape::TensorFree) {
    t.has_tensors = true;
    for (const auto& c : std::span(batch_.of<model::CudaCall>()).subspan(cuda_rows))
      if (c.bytes && c.addr) t.tensor_bytes += op.shape == ArgShape::TensorAlloc ? *c.bytes : -*c.bytes;
  }
  for (const auto& n : std::span(batch_.of<model::NcclCall>()).subspan(nccl_rows))
    t.nccl[{n.comm_hash, n.rank.value_or(-1), n.nranks.value_or(-1), n.op_id}].add(n.bytes.value_or(0), n.dur_ns);
}

void EventConsumer::on_cpu_sample(const cw_cpu_sample_event& e) {
  const int64_t ts = wall(e.hdr.ts_ns);
  std::optional<int64_t> stack;
  if (stacks_) stack = stacks_->stack_for(e.hdr.pid, e.stack_hash);
  auto [it, fresh] = cpu_samples_.try_emplace({ts / kNsPerSec, e.hdr.pid, e.hdr.tid, stack.value_or(-1), e.in_call ? 1 : 0},
                                             ts, 0);
  it->second.second++;
}

void EventConsumer::flush_cpu_samples(int64_t wall_ts_ns, bool all) {
  const int64_t now_sec = wall_ts_ns / kNsPerSec;
  for (auto it = cpu_samples_.begin(); it != cpu_samples_.end();) {
    const auto& [sec, pid, tid, stack, in_call] = it->first;
    if (!all && sec >= now_sec) {
      ++it;
      continue;
    }
    model::CpuSampleCount c;
    c.ts_ns = it->second.first;
    c.pid = pid;
    c.tid = tid;
    if (stack >= 0) c.stack_id = stack;
    c.in_call = in_call;
    c.samples = it->second.second;
    batch_.add(std::move(c));
    it = cpu_samples_.erase(it);
  }
}

void EventConsumer::on_socket(const cw_sock_event& e) {
  SocketIo io;
  io.sock = e.sock;
  io.ts_ns = wall(e.hdr.ts_ns);
  io.pid = e.hdr.pid;
  io.tid = e.hdr.tid;
  io.send = e.dir == CW_SOCK_SEND;
  io.ret = e.ret;
  io.seen = std::string_view(reinterpret_cast<const char*>(e.data), std::min<size_t>(e.len, sizeof e.data));
  requests_.on_io(io, batch_.of<model::ServedRequest>());
}

void EventConsumer::flush_requests() { requests_.flush(batch_.of<model::ServedRequest>()); }

void EventConsumer::on_launch_aggregates(const LaunchSnapshot& snapshot, int64_t wall_ts_ns) {
  for (const auto& [k, now] : snapshot) {
    const OpSpec* op = find_op(k.op);
    if (!op) continue;
    cw_launch_agg& last = launch_last_[{k.pid, k.op, k.kernel}];
    if (now.calls <= last.calls) continue;  // no new launch (or a key reused after a wrap)
    model::LaunchStat l;
    l.ts_ns = wall_ts_ns;
    l.pid = k.pid;
    l.op_id = k.op;
    l.calls = int64_t(now.calls - last.calls);
    l.errors = int64_t(now.errors - last.errors);
    l.total_ns = int64_t(now.total_ns - last.total_ns);
    l.kernel = cuda_->launch_kernel(k.pid, op->shape, k.kernel);
    if (per_process_) {
      auto& t = stats_.processes[k.pid];
      t.calls[k.op] += l.calls;
      if (l.errors) t.errors[k.op] += l.errors;
    }
    auto& all = stats_.ops[k.op];
    auto& interval = stats_.interval[k.op];
    for (int b = 0; b < CW_HIST_BUCKETS; b++) {
      const int64_t n = int64_t(now.hist[b] - last.hist[b]);
      if (n <= 0) continue;
      batch_.add(model::LaunchBucket{wall_ts_ns, k.pid, k.op, l.kernel, b, n});
      // The live view's histograms get the bucket's middle: log2 resolution.
      const int64_t mid = (int64_t(1) << b) + (int64_t(1) << b) / 2;
      all.add_many(mid, n);
      interval.add_many(mid, n);
    }
    last = now;
    batch_.add(std::move(l));
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

void EventConsumer::on_proc(const cw_proc_event& e) {
  const std::string comm(e.comm, strnlen(e.comm, sizeof e.comm));
  auto args = [&] {
    const size_t n = std::min<size_t>(e.args_len, sizeof e.args);
    std::string cmd = discover::join_cmdline(std::string_view(e.args, n));
    if (n == sizeof e.args) cmd += "…";  // cut by the kernel's copy
    return cmd;
  };
  model::ProcessInfo p;
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
  batch_.add(std::move(p));
}

}  // namespace causeway::consume
