// SPDX-License-Identifier: Apache-2.0
// Builds the verbs structs the decoder reads, from the real <infiniband/verbs.h>.
// Its own translation unit so the test reads only bytes, as the decoder does.
#include <infiniband/verbs.h>

#include <cstdint>
#include <cstring>

namespace verbs_fixture {

static_assert(sizeof(ibv_async_event) <= 64);

void async_event(uint8_t out[64], uint32_t type, uint64_t element) {
  ibv_async_event ev{};
  ev.event_type = ibv_event_type(type);
  if (type == IBV_EVENT_PORT_ERR || type == IBV_EVENT_PORT_ACTIVE)
    ev.element.port_num = int(element);
  else
    ev.element.qp = reinterpret_cast<ibv_qp*>(element);
  std::memset(out, 0, 64);
  std::memcpy(out, &ev, sizeof ev);
}

void qp_attr(uint8_t out[64], uint32_t state, uint32_t dest_qp) {
  ibv_qp_attr a{};
  a.qp_state = ibv_qp_state(state);
  a.dest_qp_num = dest_qp;
  std::memcpy(out, &a, 64);
}

void qp_init_attr(uint8_t out[64], uint32_t type, uint32_t send_wr, uint32_t recv_wr) {
  ibv_qp_init_attr a{};
  a.qp_type = ibv_qp_type(type);
  a.cap.max_send_wr = send_wr;
  a.cap.max_recv_wr = recv_wr;
  std::memcpy(out, &a, 64);
}

void qp(uint8_t out[64], uint32_t qp_num, uint32_t state, uint32_t type) {
  ibv_qp q{};
  q.qp_num = qp_num;
  q.state = ibv_qp_state(state);
  q.qp_type = ibv_qp_type(type);
  std::memcpy(out, &q, 64);
}

uint64_t mask_state() { return IBV_QP_STATE; }
uint64_t mask_dest_qpn() { return IBV_QP_DEST_QPN; }

}  // namespace verbs_fixture
