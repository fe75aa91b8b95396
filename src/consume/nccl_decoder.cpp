// SPDX-License-Identifier: Apache-2.0
#include "causeway/consume/nccl_decoder.h"

#include <array>
#include <cstdint>
#include <cstdio>

namespace causeway::consume {
namespace {

// Where each call's arguments are: 0..5 registers, 6.. stack words (x86-64 SysV).
struct NcclLayout {
  int8_t count = -1, dtype = -1, redop = -1, peer = -1, comm = -1, stream = -1;
};

std::optional<NcclLayout> layout_of(std::string_view name) {
  // peer: the other rank of a send/recv, the root of a rooted collective.
  if (name == "ncclAllReduce") return NcclLayout{2, 3, 4, -1, 5, 6};
  if (name == "ncclAllGather") return NcclLayout{2, 3, -1, -1, 4, 5};
  if (name == "ncclReduceScatter") return NcclLayout{2, 3, 4, -1, 5, 6};
  if (name == "ncclBroadcast") return NcclLayout{2, 3, -1, 4, 5, 6};
  if (name == "ncclBcast") return NcclLayout{1, 2, -1, 3, 4, 5};
  if (name == "ncclReduce") return NcclLayout{2, 3, 4, 5, 6, 7};
  if (name == "ncclSend" || name == "ncclRecv") return NcclLayout{1, 2, -1, 3, 4, 5};
  return std::nullopt;
}

std::optional<uint64_t> arg(const cw_call_event& e, int i) {
  if (i < 0) return std::nullopt;
  if (i < 6) return e.args[i];
  if (!(e.flags & CW_CALL_HAS_STACK) || i - 6 >= CW_STACK_WORDS) return std::nullopt;
  return e.stack[i - 6];
}

uint64_t fnv1a(uint64_t h, const void* data, size_t n) {
  auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}
constexpr uint64_t kFnvBasis = 0xcbf29ce484222325ULL;

// ncclResult_t is an int: the upper half of rax is not part of it.
int64_t nccl_result(int64_t raw) { return int32_t(uint32_t(raw)); }
constexpr int64_t kNcclInProgress = 7;

}  // namespace

std::string_view nccl_datatype_name(uint64_t dt) {
  static constexpr std::array<std::string_view, 12> names = {
      "int8",    "uint8",   "int32",   "uint32",   "int64",      "uint64",
      "float16", "float32", "float64", "bfloat16", "float8e4m3", "float8e5m2"};
  return dt < names.size() ? names[dt] : std::string_view{};
}

std::optional<int> nccl_datatype_size(uint64_t dt) {
  static constexpr std::array<int, 12> sizes = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  if (dt < sizes.size()) return sizes[dt];
  return std::nullopt;
}

std::string_view nccl_redop_name(uint64_t op) {
  static constexpr std::array<std::string_view, 5> names = {"sum", "prod", "max", "min", "avg"};
  if (op < names.size()) return names[op];
  // ncclRedOpCreatePreMulSum hands out ids from ncclNumOps upwards.
  return uint32_t(op) < 0x7fffffff ? "custom" : "";
}

std::string nccl_comm_hash_hex(uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

NcclDecoder::Comm& NcclDecoder::comm_for(Process& p, uint64_t handle) {
  auto it = p.comms.find(handle);
  if (it != p.comms.end()) return it->second;
  Comm c;
  // First use of a handle no init call produced: the oldest pending split's
  // child (splits are collective, so every rank binds them in the same order).
  if (!p.pending_splits.empty()) {
    c.hash = p.pending_splits.front().hash;
    p.pending_splits.pop_front();
  }
  return p.comms.emplace(handle, std::move(c)).first->second;
}

void NcclDecoder::decode(const cw_call_event& e, const OpSpec& op, DecodeContext& ctx) {
  model::NcclCall row;
  row.ts_ns = ctx.ts_ns;
  row.dur_ns = int64_t(e.dur_ns);
  row.pid = e.hdr.pid;
  row.tid = e.hdr.tid;
  row.op_id = op.id;
  row.ret = nccl_result(e.ret);
  row.stack_id = ctx.stack_id;
  Process& proc = procs_[e.hdr.pid];

  auto fill_comm = [&row](const Comm& c) {
    row.comm_hash = c.hash;
    row.rank = c.rank;
    row.nranks = c.nranks;
  };

  if (auto lay = layout_of(op.name)) {
    auto count = arg(e, lay->count), dtype = arg(e, lay->dtype), comm = arg(e, lay->comm);
    if (count) row.count = int64_t(*count);
    if (dtype) {
      row.datatype = std::string(nccl_datatype_name(uint32_t(*dtype)));
      // A count no real buffer has (a corrupt record) leaves the bytes
      // unknown rather than overflowing (found by fuzz_event_decoder).
      if (auto size = nccl_datatype_size(uint32_t(*dtype));
          size && count && *count <= uint64_t(INT64_MAX) / uint64_t(*size))
        row.bytes = int64_t(*count * uint64_t(*size));
    }
    if (auto r = arg(e, lay->redop)) row.redop = std::string(nccl_redop_name(uint32_t(*r)));
    if (auto p = arg(e, lay->peer)) row.peer = int32_t(uint32_t(*p));
    if (auto s = arg(e, lay->stream)) row.stream = *s;
    if (comm) fill_comm(comm_for(proc, *comm));
    // Numbered by the probe at the call's entry (events.h, CW_COOKIE_SEQ_*):
    // a lost record or another return order shifts no other number. 0: the
    // kernel had no counter for it (its map full), so it is matched with none.
    if ((op.cookie_flags & CW_COOKIE_SEQ_MASK) && e.aux) row.seq = int64_t(e.aux - 1);
  } else if (op.cls == OpClass::CommInit) {
    const uint64_t handle = e.out_value;
    Comm c;
    if (op.name == "ncclCommSplit") {
      // ncclCommSplit(comm, color, key, newcomm*, config): the child's identity
      // is (parent, n-th split of it, color), the same on every member rank.
      Comm& parent = comm_for(proc, e.args[0]);
      fill_comm(parent);
      const int32_t color = int32_t(uint32_t(e.args[1]));
      const int64_t nth = parent.splits++;
      constexpr int32_t kNoColor = -1;  // NCCL_SPLIT_NOCOLOR: no child on this rank
      if ((row.ret == 0 || row.ret == kNcclInProgress) && color != kNoColor) {
        uint64_t h = fnv1a(kFnvBasis, parent.hash.data(), parent.hash.size());
        h = fnv1a(h, &nth, sizeof nth);
        h = fnv1a(h, &color, sizeof color);
        proc.pending_splits.push_back({nccl_comm_hash_hex(h)});
      }
    } else if (op.name == "ncclCommInitAll") {
      // One process holds every rank: a process-local identity is enough.
      c.nranks = int32_t(uint32_t(e.args[1]));
      c.rank = 0;
      uint64_t h = fnv1a(kFnvBasis, &e.hdr.pid, sizeof e.hdr.pid);
      c.hash = nccl_comm_hash_hex(fnv1a(h, &handle, sizeof handle));
    } else {  // ncclCommInitRank / ncclCommInitRankConfig
      c.nranks = int32_t(uint32_t(e.args[1]));
      c.rank = int32_t(uint32_t(e.args[2]));
      if (e.aux) c.hash = nccl_comm_hash_hex(e.aux);
    }
    if (op.name != "ncclCommSplit") {
      fill_comm(c);
      // A handle is what later calls name; a failed blocking init leaves none.
      if (handle) proc.comms[handle] = std::move(c);
    }
  } else if (op.cls == OpClass::CommEnd) {
    auto it = proc.comms.find(e.args[0]);
    if (it != proc.comms.end()) {
      fill_comm(it->second);
      proc.comms.erase(it);  // the handle may be reused by a later init
    }
  }
  ctx.batch.add(std::move(row));
}

}  // namespace causeway::consume
