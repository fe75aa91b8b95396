// SPDX-License-Identifier: Apache-2.0
#pragma once
// NCCL calls -> nccl_call_events rows. Communicators are opaque pointers that
// differ on every rank; the init calls tie each pointer to the hash of the
// ncclUniqueId (identical on every rank), its rank and nranks, so the n-th
// collective of one communicator can be matched across ranks and hosts.
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "causeway/consume/call_decoder.h"

namespace causeway::consume {

// ncclDataType_t / ncclRedOp_t as NCCL 2.x defines them.
std::string_view nccl_datatype_name(uint64_t dt);  // "float32"; "" when unknown
std::optional<int> nccl_datatype_size(uint64_t dt);
std::string_view nccl_redop_name(uint64_t op);  // "sum"; "custom" for PreMulSum-created ops
// 16 lowercase hex digits: how a communicator hash is written in traces.
std::string nccl_comm_hash_hex(uint64_t h);

class NcclDecoder : public CallDecoder {
 public:
  void decode(const cw_call_event& e, const OpSpec& op, DecodeContext& ctx) override;

 private:
  struct Comm {
    std::string hash;
    std::optional<int> rank, nranks;
    int64_t splits = 0;
  };
  // A split whose child handle has not been seen yet: ncclCommSplit's out
  // parameter is its 4th argument, which the generic probe does not read.
  struct PendingSplit {
    std::string hash;
  };
  struct Process {
    std::map<uint64_t, Comm> comms;  // handle -> communicator
    std::deque<PendingSplit> pending_splits;
  };
  Comm& comm_for(Process& p, uint64_t handle);
  std::map<uint32_t, Process> procs_;
};

}  // namespace causeway::consume
