// SPDX-License-Identifier: Apache-2.0
#include "causeway/consume/verbs_decoder.h"

#include <array>
#include <cstdio>
#include <cstring>
#include <string>

namespace causeway::consume {
namespace {

// Offsets in the public structs of <infiniband/verbs.h> (x86-64; checked
// against the real header in tests/unit/verbs_decoder_test.cpp).
constexpr size_t kAsyncEventType = 8;    // ibv_async_event.event_type (after the element union)
constexpr size_t kQpAttrState = 0;       // ibv_qp_attr.qp_state
constexpr size_t kQpAttrDestQpNum = 28;  // ibv_qp_attr.dest_qp_num
constexpr size_t kInitAttrCap = 32;      // ibv_qp_init_attr.cap.max_send_wr
constexpr size_t kInitAttrQpType = 52;   // ibv_qp_init_attr.qp_type
constexpr size_t kQpNum = 52;            // ibv_qp.qp_num
constexpr size_t kQpState = 56;          // ibv_qp.state
constexpr size_t kQpType = 60;           // ibv_qp.qp_type
constexpr uint64_t kMaskState = 1u << 0;      // IBV_QP_STATE
constexpr uint64_t kMaskDestQpn = 1u << 20;   // IBV_QP_DEST_QPN

uint32_t u32_at(const cw_call_event& e, size_t off) {
  uint32_t v;
  std::memcpy(&v, e.deref + off, sizeof v);
  return v;
}
uint64_t u64_at(const cw_call_event& e, size_t off) {
  uint64_t v;
  std::memcpy(&v, e.deref + off, sizeof v);
  return v;
}

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

bool is_qp_event(uint32_t t) {
  // QP_FATAL, QP_REQ_ERR, QP_ACCESS_ERR, COMM_EST, SQ_DRAINED, PATH_MIG,
  // PATH_MIG_ERR, QP_LAST_WQE_REACHED carry a struct ibv_qp *.
  return (t >= 1 && t <= 7) || t == 16;
}
bool is_port_event(uint32_t t) { return t == 9 || t == 10 || (t >= 11 && t <= 13) || t == 17 || t == 18; }

}  // namespace

std::string_view ibv_event_name(uint32_t t) {
  static constexpr std::array<std::string_view, 20> names = {
      "CQ_ERR",      "QP_FATAL",    "QP_REQ_ERR", "QP_ACCESS_ERR",    "COMM_EST",
      "SQ_DRAINED",  "PATH_MIG",    "PATH_MIG_ERR", "DEVICE_FATAL",   "PORT_ACTIVE",
      "PORT_ERR",    "LID_CHANGE",  "PKEY_CHANGE", "SM_CHANGE",       "SRQ_ERR",
      "SRQ_LIMIT_REACHED", "QP_LAST_WQE_REACHED", "CLIENT_REREGISTER", "GID_CHANGE",
      "WQ_FATAL"};
  return t < names.size() ? names[t] : std::string_view{};
}

bool ibv_event_is_fatal(uint32_t t) {
  switch (t) {
    case 0: case 1: case 2: case 3: case 7: case 8: case 10: case 14: case 19: return true;
    default: return false;
  }
}

std::string_view ibv_qp_state_name(uint32_t s) {
  static constexpr std::array<std::string_view, 8> names = {"RESET", "INIT", "RTR", "RTS",
                                                            "SQD",   "SQE",  "ERR", "UNKNOWN"};
  return s < names.size() ? names[s] : std::string_view{"?"};
}

std::string_view ibv_qp_type_name(uint32_t t) {
  switch (t) {
    case 2: return "RC";
    case 3: return "UC";
    case 4: return "UD";
    case 8: return "RAW_PACKET";
    case 9: return "XRC_SEND";
    case 10: return "XRC_RECV";
    case 0xff: return "DRIVER";
    default: return "?";
  }
}

void VerbsDecoder::decode(const cw_call_event& e, const OpSpec& op, DecodeContext& ctx) {
  model::VerbsEvent row;
  row.ts_ns = ctx.ts_ns;
  row.dur_ns = int64_t(e.dur_ns);
  row.pid = e.hdr.pid;
  row.tid = e.hdr.tid;
  row.op_id = op.id;
  // ibv_create_qp returns a pointer; the others an int.
  row.ret = (op.cookie_flags & CW_COOKIE_RET_PTR) ? e.ret : int64_t(int32_t(uint32_t(e.ret)));
  if (op.name == "ibv_ack_async_event") row.ret = 0;  // returns void: rax is whatever was left
  const bool deref = e.flags & CW_CALL_HAS_DEREF;
  auto known_qp = [&](uint64_t qp) {
    auto it = qp_nums_.find({e.hdr.pid, qp});
    if (it != qp_nums_.end()) row.qp_num = it->second;
  };

  if (op.name == "ibv_ack_async_event" && deref) {
    const uint32_t type = u32_at(e, kAsyncEventType);
    const uint64_t element = u64_at(e, 0);
    auto name = ibv_event_name(type);
    row.detail = name.empty() ? "event " + std::to_string(type) : std::string(name);
    row.detail += ibv_event_is_fatal(type) ? " fatal" : " info";
    if (is_qp_event(type)) {
      row.detail += " qp=" + hex(element);
      known_qp(element);
    } else if (is_port_event(type)) {
      row.detail += " port=" + std::to_string(uint32_t(element));
    }
  } else if (op.name == "ibv_modify_qp") {
    known_qp(e.args[0]);
    const uint64_t mask = e.args[2];
    if (deref && (mask & kMaskState))
      row.detail = "-> " + std::string(ibv_qp_state_name(u32_at(e, kQpAttrState)));
    if (deref && (mask & kMaskDestQpn)) {
      if (!row.detail.empty()) row.detail += ' ';
      row.detail += "dest_qp=" + std::to_string(u32_at(e, kQpAttrDestQpNum));
    }
    if (row.detail.empty()) row.detail = "mask=" + hex(mask);
  } else if (op.name == "ibv_create_qp" && deref) {
    row.detail = "type=" + std::string(ibv_qp_type_name(u32_at(e, kInitAttrQpType))) +
                 " max_send_wr=" + std::to_string(u32_at(e, kInitAttrCap)) +
                 " max_recv_wr=" + std::to_string(u32_at(e, kInitAttrCap + 4));
  } else if (op.name == "ibv_destroy_qp" && deref) {
    row.qp_num = u32_at(e, kQpNum);
    row.detail = "state=" + std::string(ibv_qp_state_name(u32_at(e, kQpState))) +
                 " type=" + std::string(ibv_qp_type_name(u32_at(e, kQpType)));
    qp_nums_.erase({e.hdr.pid, e.args[0]});
  }
  ctx.batch.add(std::move(row));
}

}  // namespace causeway::consume
