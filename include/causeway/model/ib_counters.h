// SPDX-License-Identifier: Apache-2.0
#pragma once
// RDMA port counters, polled from /sys/class/infiniband/*/ports/*/counters
// by src/consume/ib_counters.cpp (no BPF: nothing to probe). A no-op on a
// host without an HCA.
#include <string>

#include "causeway/model/family.h"

namespace causeway::model {

struct IbCounterSample {
  int64_t ts_ns = 0;
  std::string device;
  int port = 0;
  std::string counter;
  int64_t value = 0;
};

struct IbCounters {
  using Row = IbCounterSample;
  static constexpr Column<Row> kColumns[] = {
      {"ts_ns", SqlType::Integer, true, "when it was read", field<&Row::ts_ns>},
      {"device", SqlType::Text, true, "HCA, e.g. `mlx5_0`", field<&Row::device>},
      {"port", SqlType::Integer, true, "port number", field<&Row::port>},
      {"counter", SqlType::Text, true, "counter file name, e.g. `port_rcv_errors`", field<&Row::counter>},
      {"value", SqlType::Integer, true, "its cumulative value", field<&Row::value>},
  };
  static constexpr Table<Row> kTable{"ib_counters",
                                     "Cumulative RDMA port counters, sampled with the op counts.",
                                     TableKind::Samples, kColumns};
};

}  // namespace causeway::model
CAUSEWAY_TABLE(IbCounters);
