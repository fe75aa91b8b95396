/* SPDX-License-Identifier: (GPL-2.0-only OR Apache-2.0) */
/*
 * TCP retransmits (bpf/host.bpf.c, tcp_retransmit_skb): addresses, ports and
 * state. The pid is whoever was on the CPU (often 0 in softirq).
 */
#ifndef CAUSEWAY_MODEL_TCP_RETRANSMITS_H
#define CAUSEWAY_MODEL_TCP_RETRANSMITS_H

#include "causeway/events.h"

#define CW_EV_TCP_RETRANS 4

struct cw_tcp_retrans_event {
	struct cw_header hdr;
	__u16 family;           /* AF_INET / AF_INET6 */
	__u16 sport;
	__u16 dport;
	__u16 state;
	__u8 saddr[16];
	__u8 daddr[16];
};

#ifdef __cplusplus
#include <arpa/inet.h>

#include <iterator>
#include <string>

#include "causeway/model/family.h"

namespace causeway::model {

struct TcpRetransmit {
  int64_t ts_ns = 0;
  uint32_t pid = 0;
  std::string saddr, daddr;
  uint16_t sport = 0, dport = 0;
  std::string state;
};

// "10.0.0.1" / "fe80::1" from the raw address bytes.
inline std::string format_ip(uint16_t family, const uint8_t addr[16]) {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(family == AF_INET ? AF_INET : AF_INET6, addr, buf, sizeof buf);
  return buf;
}

inline std::string tcp_state_name(uint16_t s) {
  static const char* names[] = {"?", "ESTABLISHED", "SYN_SENT", "SYN_RECV", "FIN_WAIT1",
                                "FIN_WAIT2", "TIME_WAIT", "CLOSE", "CLOSE_WAIT", "LAST_ACK",
                                "LISTEN", "CLOSING", "NEW_SYN_RECV"};
  return s < std::size(names) ? names[s] : std::to_string(s);
}

struct TcpRetransmits {
  using Event = cw_tcp_retrans_event;
  using Row = TcpRetransmit;
  static constexpr uint32_t kEventType = CW_EV_TCP_RETRANS;
  static constexpr Column<Row> kColumns[] = {
      {"ts_ns", SqlType::Integer, true, "when", field<&Row::ts_ns>},
      {"pid", SqlType::Integer, true, "the task on the CPU (often 0: softirq)", field<&Row::pid>},
      {"saddr", SqlType::Text, true, "local address", field<&Row::saddr>},
      {"daddr", SqlType::Text, true, "remote address", field<&Row::daddr>},
      {"sport", SqlType::Integer, true, "local port", field<&Row::sport>},
      {"dport", SqlType::Integer, true, "remote port", field<&Row::dport>},
      {"state", SqlType::Text, true, "TCP state, e.g. `ESTABLISHED`", field<&Row::state>},
  };
  static constexpr Table<Row> kTable{"tcp_retransmits", "TCP segments retransmitted, host-wide.",
                                     TableKind::Events, kColumns};

  static Row decode(const Event& e, DecodeContext& cx) {
    Row t;
    t.ts_ns = cx.wall(e.hdr.ts_ns);
    t.pid = e.hdr.pid;
    t.saddr = format_ip(e.family, e.saddr);
    t.daddr = format_ip(e.family, e.daddr);
    t.sport = e.sport;
    t.dport = e.dport;
    t.state = tcp_state_name(e.state);
    cx.host.retransmits++;
    return t;
  }
};
static_assert(sizeof(cw_tcp_retrans_event) == 72);

}  // namespace causeway::model
CAUSEWAY_TABLE(TcpRetransmits);
#endif /* __cplusplus */

#endif /* CAUSEWAY_MODEL_TCP_RETRANSMITS_H */
