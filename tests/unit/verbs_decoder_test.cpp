// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <cstring>

#include "causeway/consume/verbs_decoder.h"

using namespace causeway;
using namespace causeway::consume;

namespace verbs_fixture {
void async_event(uint8_t out[64], uint32_t type, uint64_t element);
void qp_attr(uint8_t out[64], uint32_t state, uint32_t dest_qp);
void qp_init_attr(uint8_t out[64], uint32_t type, uint32_t send_wr, uint32_t recv_wr);
void qp(uint8_t out[64], uint32_t qp_num, uint32_t state, uint32_t type);
uint64_t mask_state();
uint64_t mask_dest_qpn();
}  // namespace verbs_fixture
namespace vf = verbs_fixture;

namespace {

// ibv_event_type, ibv_qp_state, ibv_qp_type values (verbs.h).
enum : uint32_t { kQpFatal = 1, kCommEst = 4, kDeviceFatal = 8, kPortActive = 9, kPortErr = 10, kWqFatal = 19 };
enum : uint32_t { kRtr = 2, kRts = 3, kErr = 6 };
enum : uint32_t { kRc = 2, kUd = 4 };

struct Harness {
  VerbsDecoder dec;
  model::Batch batch;

  const model::VerbsEvent& call(std::string_view op, std::initializer_list<uint64_t> args,
                                const uint8_t* deref, int64_t ret = 0) {
    cw_call_event e{};
    e.hdr.pid = 7;
    e.hdr.tid = 8;
    e.ret = ret;
    int i = 0;
    for (auto a : args) e.args[i++] = a;
    if (deref) {
      std::memcpy(e.deref, deref, sizeof e.deref);
      e.flags |= CW_CALL_HAS_DEREF;
    }
    DecodeContext ctx{100, std::nullopt, batch};
    dec.decode(e, *find_op(op), ctx);
    return batch.of<model::VerbsEvent>().back();
  }
};

}  // namespace

// Layouts are built by the real <infiniband/verbs.h>, so a changed ABI fails here.
TEST(VerbsDecoder, AckedAsyncEventsNameTypeAndSeverity) {
  Harness h;
  uint8_t ev[64];
  vf::async_event(ev, kPortErr, 1);
  EXPECT_EQ(h.call("ibv_ack_async_event", {0x10}, ev).detail, "PORT_ERR fatal port=1");
  vf::async_event(ev, kQpFatal, 0xabc0);
  EXPECT_EQ(h.call("ibv_ack_async_event", {0x10}, ev).detail, "QP_FATAL fatal qp=0xabc0");
  vf::async_event(ev, kPortActive, 2);
  EXPECT_EQ(h.call("ibv_ack_async_event", {0x10}, ev).detail, "PORT_ACTIVE info port=2");
  EXPECT_TRUE(ibv_event_is_fatal(kDeviceFatal));
  EXPECT_FALSE(ibv_event_is_fatal(kCommEst));
  EXPECT_EQ(ibv_event_name(kWqFatal), "WQ_FATAL");
}

TEST(VerbsDecoder, ModifyQpRecordsTheTargetStateAndPeer) {
  Harness h;
  uint8_t attr[64];
  vf::qp_attr(attr, kRtr, 0x1234);
  auto& rtr = h.call("ibv_modify_qp", {0x5000, 0x7000, vf::mask_state() | vf::mask_dest_qpn()}, attr);
  EXPECT_EQ(rtr.detail, "-> RTR dest_qp=4660");
  vf::qp_attr(attr, kErr, 0);
  auto& err = h.call("ibv_modify_qp", {0x5000, 0x7000, vf::mask_state()}, attr, int64_t(0xffffffff00000000));
  EXPECT_EQ(err.detail, "-> ERR");
  EXPECT_EQ(err.ret, 0);
}

TEST(VerbsDecoder, CreateAndDestroyQp) {
  Harness h;
  uint8_t init[64];
  vf::qp_init_attr(init, kRc, 128, 64);
  auto& c = h.call("ibv_create_qp", {0x100, 0x200}, init, 0x55550000);
  EXPECT_EQ(c.detail, "type=RC max_send_wr=128 max_recv_wr=64");
  EXPECT_EQ(c.ret, 0x55550000);

  uint8_t qp[64];
  vf::qp(qp, 77, kRts, kUd);
  auto& d = h.call("ibv_destroy_qp", {0x55550000}, qp);
  EXPECT_EQ(d.qp_num, 77);
  EXPECT_EQ(d.detail, "state=RTS type=UD");
}

TEST(VerbsDecoder, WaitingForAnEventIsARowWithItsDuration) {
  Harness h;
  auto& w = h.call("ibv_get_async_event", {0x10, 0x20}, nullptr, -1);
  EXPECT_EQ(w.ret, -1);
  EXPECT_EQ(w.detail, "");
}
