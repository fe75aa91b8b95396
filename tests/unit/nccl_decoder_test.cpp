// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <cstring>

#include "causeway/consume/call_decoder.h"
#include "causeway/consume/nccl_decoder.h"

using namespace causeway;
using namespace causeway::consume;

namespace {

struct Harness {
  NcclDecoder dec;
  model::Batch batch;
  int64_t ts = 1000;

  const model::NcclCall& call(std::string_view op, std::initializer_list<uint64_t> args,
                              std::initializer_list<uint64_t> stack = {}, int64_t ret = 0,
                              uint64_t out = 0, uint64_t aux = 0, uint32_t pid = 42) {
    cw_call_event e{};
    e.hdr.pid = pid;
    e.hdr.tid = pid + 1;
    e.dur_ns = 500;
    e.ret = ret;
    int i = 0;
    for (auto a : args) e.args[i++] = a;
    i = 0;
    for (auto s : stack) e.stack[i++] = s;
    if (stack.size()) e.flags |= CW_CALL_HAS_STACK;
    e.out_value = out;
    e.aux = aux;
    const OpSpec* spec = find_op(op);
    EXPECT_NE(spec, nullptr) << op;
    DecodeContext ctx{ts++, std::nullopt, batch};
    dec.decode(e, *spec, ctx);
    return batch.of<model::NcclCall>().back();
  }
};

constexpr uint64_t kComm = 0x7f0000001000, kStream = 0x5000;
constexpr int kFloat32 = 7, kBf16 = 9, kSum = 0, kMax = 2;
// What the probe puts in aux for the n-th call of a communicator (events.h).
constexpr uint64_t numbered(int64_t n) { return uint64_t(n) + 1; }

}  // namespace

TEST(NcclDecoder, InitRankTiesHandleToHashRankAndNranks) {
  Harness h;
  uint64_t comm_ptr_arg = 0x7ffd0000;
  auto& init = h.call("ncclCommInitRank", {comm_ptr_arg, 8, 3}, {}, 0, kComm, 0x0123456789abcdefULL);
  EXPECT_EQ(init.comm_hash, "0123456789abcdef");
  EXPECT_EQ(init.rank, 3);
  EXPECT_EQ(init.nranks, 8);
  EXPECT_FALSE(init.seq.has_value());

  auto& ar = h.call("ncclAllReduce", {0x1, 0x2, 1024, kFloat32, kSum, kComm}, {kStream}, 0, 0, numbered(0));
  EXPECT_EQ(ar.comm_hash, "0123456789abcdef");
  EXPECT_EQ(ar.rank, 3);
  EXPECT_EQ(ar.nranks, 8);
  EXPECT_EQ(ar.seq, 0);
  EXPECT_EQ(ar.count, 1024);
  EXPECT_EQ(ar.datatype, "float32");
  EXPECT_EQ(ar.redop, "sum");
  EXPECT_EQ(ar.bytes, 4096);
  EXPECT_EQ(ar.stream, kStream);
  EXPECT_EQ(ar.ts_ns, 1001);
  EXPECT_EQ(ar.dur_ns, 500);

  auto& ag = h.call("ncclAllGather", {0x1, 0x2, 10, kBf16, kComm, kStream}, {}, 0, 0, numbered(1));
  EXPECT_EQ(ag.seq, 1);
  EXPECT_EQ(ag.bytes, 20);
  EXPECT_EQ(ag.datatype, "bfloat16");
  EXPECT_EQ(ag.redop, "");
  EXPECT_EQ(ag.stream, kStream);

  auto& rd = h.call("ncclReduce", {0x1, 0x2, 3, 4 /*int64*/, kMax, 2 /*root*/}, {kComm, kStream}, 0, 0, numbered(2));
  EXPECT_EQ(rd.seq, 2);
  EXPECT_EQ(rd.redop, "max");
  EXPECT_EQ(rd.peer, 2);
  EXPECT_EQ(rd.bytes, 24);
  EXPECT_EQ(rd.stream, kStream);

  auto& bc = h.call("ncclBcast", {0x1, 5, 0 /*int8*/, 1, kComm, kStream}, {}, 0, 0, numbered(3));
  EXPECT_EQ(bc.seq, 3);
  EXPECT_EQ(bc.peer, 1);
  EXPECT_EQ(bc.bytes, 5);
}

TEST(NcclDecoder, PointToPointCallsCarryTheProbesNumberAndPeer) {
  Harness h;
  h.call("ncclCommInitRank", {0x1, 2, 0}, {}, 0, kComm, 0xaa);
  EXPECT_EQ(h.call("ncclGroupStart", {}).comm_hash, "");
  auto& s = h.call("ncclSend", {0x1, 4, kFloat32, 5, kComm, kStream}, {}, 0, 0, numbered(1));
  EXPECT_EQ(s.seq, 1);
  EXPECT_EQ(s.peer, 5);
  EXPECT_EQ(s.bytes, 16);
  EXPECT_EQ(h.call("ncclRecv", {0x1, 4, kFloat32, 1, kComm, kStream}, {}, 0, 0, numbered(0)).seq, 0);
  h.call("ncclGroupEnd", {});
}

// The number is the probe's, taken at the call's entry: records decoded out of
// order, or with one lost between them, keep their own numbers; a call the
// probe could not number (aux 0) gets none rather than a guess.
TEST(NcclDecoder, ALostOrReorderedRecordShiftsNoNumber) {
  Harness h;
  h.call("ncclCommInitRank", {0x1, 2, 0}, {}, 0, kComm, 0xaa);
  EXPECT_EQ(h.call("ncclAllReduce", {0, 0, 1, kFloat32, kSum, kComm}, {0}, 0, 0, numbered(0)).seq, 0);
  // #1 lost; #3 returned before #2
  EXPECT_EQ(h.call("ncclAllReduce", {0, 0, 1, kFloat32, kSum, kComm}, {0}, 0, 0, numbered(3)).seq, 3);
  EXPECT_EQ(h.call("ncclAllReduce", {0, 0, 1, kFloat32, kSum, kComm}, {0}, 0, 0, numbered(2)).seq, 2);
  auto& unnumbered = h.call("ncclAllReduce", {0, 0, 1, kFloat32, kSum, kComm}, {0});
  EXPECT_FALSE(unnumbered.seq.has_value());
  EXPECT_EQ(unnumbered.comm_hash, "00000000000000aa");
}

TEST(NcclDecoder, DestroyForgetsTheHandleAndReinitRestartsSeq) {
  Harness h;
  h.call("ncclCommInitRank", {0x1, 4, 2}, {}, 0, kComm, 0xcc);
  h.call("ncclAllReduce", {0, 0, 1, kFloat32, kSum, kComm}, {0}, 0, 0, numbered(0));
  auto& d = h.call("ncclCommDestroy", {kComm});
  EXPECT_EQ(d.comm_hash, "00000000000000cc");
  EXPECT_EQ(d.rank, 2);
  // Same address handed out again for a new communicator.
  h.call("ncclCommInitRankConfig", {0x1, 4, 1, 0x999}, {}, 0, kComm, 0xdd);
  auto& ar = h.call("ncclAllReduce", {0, 0, 1, kFloat32, kSum, kComm}, {0}, 0, 0, numbered(0));
  EXPECT_EQ(ar.seq, 0);
  EXPECT_EQ(ar.comm_hash, "00000000000000dd");
  EXPECT_EQ(ar.rank, 1);
}

TEST(NcclDecoder, FailedInitWithoutHandleLeavesCollectivesUnattributed) {
  Harness h;
  auto& init = h.call("ncclCommInitRank", {0x1, 2, 0}, {}, /*ret=*/int64_t(0xdead00000002), 0, 0xee);
  EXPECT_EQ(init.ret, 2);  // only the low 32 bits are ncclResult_t
  EXPECT_EQ(init.comm_hash, "00000000000000ee");
  auto& ar = h.call("ncclAllReduce", {0, 0, 1, kFloat32, kSum, kComm}, {0}, 0, 0, numbered(0));
  EXPECT_EQ(ar.comm_hash, "");
  EXPECT_FALSE(ar.rank.has_value());
  EXPECT_EQ(ar.seq, 0);
}

TEST(NcclDecoder, SplitChildGetsTheSameHashOnEveryRank) {
  Harness h;
  std::string child[2];
  for (uint32_t pid : {1u, 2u}) {
    h.call("ncclCommInitRank", {0x1, 2, pid - 1}, {}, 0, kComm, 0xab, pid);
    auto& sp = h.call("ncclCommSplit", {kComm, 7, pid, 0x1, 0}, {}, 0, 0, 0, pid);
    EXPECT_EQ(sp.comm_hash, "00000000000000ab");
    auto& ar = h.call("ncclAllReduce", {0, 0, 1, kFloat32, kSum, kComm + 0x100 * pid}, {0}, 0, 0, numbered(0), pid);
    child[pid - 1] = ar.comm_hash;
    EXPECT_EQ(ar.seq, 0);
  }
  EXPECT_EQ(child[0].size(), 16u);
  EXPECT_EQ(child[0], child[1]);
  EXPECT_NE(child[0], "00000000000000ab");
}

TEST(NcclDecoder, MissingStackWordsLeaveStreamUnknown) {
  Harness h;
  auto& ar = h.call("ncclAllReduce", {0, 0, 8, kFloat32, kSum, kComm});
  EXPECT_FALSE(ar.stream.has_value());
  EXPECT_EQ(ar.bytes, 32);
  auto& rd = h.call("ncclReduce", {0, 0, 8, kFloat32, kSum, 0});
  EXPECT_FALSE(rd.seq.has_value());  // the communicator is a stack word: the probe numbered none
}

// Found by fuzz_event_decoder: count * datatype size overflowed int64 (UBSan).
TEST(NcclDecoder, ACountPastAnyBufferLeavesBytesUnknown) {
  Harness h;
  const uint64_t huge = (uint64_t(1) << 61) + 0x100000;  // * 8 bytes does not fit in int64
  auto& big = h.call("ncclAllReduce", {0x1, 0x2, huge, 4 /*int64*/, kSum, kComm}, {kStream});
  EXPECT_FALSE(big.bytes.has_value());
  EXPECT_EQ(big.datatype, "int64");
  auto& top = h.call("ncclAllReduce", {0x1, 0x2, ~uint64_t(0), kFloat32, kSum, kComm}, {kStream});
  EXPECT_FALSE(top.bytes.has_value());
  // the largest count whose byte total fits still has one
  const uint64_t fits = uint64_t(INT64_MAX) / 8;
  auto& edge = h.call("ncclAllReduce", {0x1, 0x2, fits, 4 /*int64*/, kSum, kComm}, {kStream});
  EXPECT_EQ(edge.bytes, int64_t(fits * 8));
}

TEST(NcclDecoder, NamesFollowNccl) {
  EXPECT_EQ(nccl_datatype_name(6), "float16");
  EXPECT_EQ(nccl_datatype_name(11), "float8e5m2");
  EXPECT_EQ(nccl_datatype_name(12), "");
  EXPECT_EQ(nccl_datatype_size(8), 8);
  EXPECT_FALSE(nccl_datatype_size(99).has_value());
  EXPECT_EQ(nccl_redop_name(4), "avg");
  EXPECT_EQ(nccl_redop_name(5), "custom");
}

TEST(NcclDecoder, RegisteredForTheNcclAndVerbsShapes) {
  CallDecoderRegistry reg;
  register_family_decoders(reg);
  EXPECT_NE(dynamic_cast<NcclDecoder*>(reg.find(ArgShape::Nccl)), nullptr);
  EXPECT_NE(reg.find(ArgShape::Verbs), nullptr);
}

TEST(NcclOpTable, RowsAreInTheirRangesAndLayers) {
  int nccl = 0, hip = 0, verbs = 0;
  for (const auto& op : all_ops()) {
    if (op.layer == Layer::Nccl) {
      nccl++;
      EXPECT_TRUE(op.id >= 128 && op.id < 160) << op.name;
      EXPECT_EQ(op.library, LibraryKind::Nccl);
      EXPECT_EQ(op.shape, ArgShape::Nccl);
      EXPECT_EQ(op.symbol.substr(0, 4), "nccl") << "attach ncclX, not its pncclX alias";
    }
    if (op.layer == Layer::Hip) {
      hip++;
      EXPECT_TRUE(op.id >= 160 && op.id < 192) << op.name;
      EXPECT_EQ(op.library, LibraryKind::Hip);
    }
    if (op.layer == Layer::Verbs) {
      verbs++;
      EXPECT_TRUE(op.id >= 192 && op.id < 224) << op.name;
    }
  }
  EXPECT_EQ(nccl, 16);
  EXPECT_EQ(hip, 16);
  EXPECT_EQ(verbs, 5);
  EXPECT_TRUE(find_op("ncclCommInitRank")->cookie_flags & CW_COOKIE_HASH_STACK);
  EXPECT_TRUE(find_op("ncclCommInitRank")->cookie_flags & CW_COOKIE_OUT0);
  EXPECT_TRUE(find_op("ncclAllReduce")->cookie_flags & CW_COOKIE_STACK_ARGS);
  // Numbered at entry by the communicator argument the decoder reads too.
  EXPECT_EQ(find_op("ncclAllReduce")->cookie_flags & CW_COOKIE_SEQ_MASK, uint64_t(6) << CW_COOKIE_SEQ_SHIFT);
  EXPECT_EQ(find_op("ncclReduce")->cookie_flags & CW_COOKIE_SEQ_MASK, uint64_t(7) << CW_COOKIE_SEQ_SHIFT);
  EXPECT_EQ(find_op("ncclSend")->cookie_flags & CW_COOKIE_PEER_MASK, uint64_t(4) << CW_COOKIE_PEER_SHIFT);
  EXPECT_TRUE(find_op("ncclCommDestroy")->cookie_flags & CW_COOKIE_SEQ_RESET);
  EXPECT_FALSE(find_op("ncclGroupStart")->cookie_flags & CW_COOKIE_SEQ_MASK);
  EXPECT_EQ(find_op("hipMemcpyAsync")->kind_arg, 3);
}
