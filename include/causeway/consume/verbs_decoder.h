// SPDX-License-Identifier: Apache-2.0
#pragma once
// ibverbs calls -> verbs_events rows: async events (type, fatal or
// informational), QP creation, state transitions (a QP moved into ERR is the
// RDMA-side symptom of a broken link) and destruction.
#include <cstdint>
#include <map>
#include <string_view>

#include "causeway/consume/call_decoder.h"

namespace causeway::consume {

std::string_view ibv_event_name(uint32_t type);  // "QP_FATAL"; "" when unknown
bool ibv_event_is_fatal(uint32_t type);
std::string_view ibv_qp_state_name(uint32_t state);  // "RTS"
std::string_view ibv_qp_type_name(uint32_t type);    // "RC"

class VerbsDecoder : public CallDecoder {
 public:
  void decode(const cw_call_event& e, const OpSpec& op, DecodeContext& ctx) override;

 private:
  // (pid, struct ibv_qp *) -> qp_num, learnt when a call shows the struct.
  std::map<std::pair<uint32_t, uint64_t>, uint32_t> qp_nums_;
};

}  // namespace causeway::consume
