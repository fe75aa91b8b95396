// SPDX-License-Identifier: Apache-2.0
#pragma once
// Samples <root>/class/infiniband/<device>/ports/<port>/counters/<name>
// (port_rcv_errors, symbol_error, link_downed, port_xmit_discards, ...) into
// ib_counters as cumulative values. No HCA, no files: a no-op. The trace loop
// calls sample() about once a second; only counters whose value changed since
// the last stored sample are stored (the first sample stores all), so a quiet
// fabric costs nothing and a counter's value at time T is its last row <= T.
#include <cstdint>
#include <string>
#include <vector>

#include "causeway/model/records.h"

namespace causeway::consume {

class IbCounterPoller {
 public:
  explicit IbCounterPoller(std::string sysfs_root = "/sys");
  // Finds the counter files; returns how many (0 without an HCA).
  size_t start();
  // Appends changed counters (all of them when `all`) at wall time ts_ns.
  void sample(model::Batch& batch, int64_t ts_ns, bool all = false);
  size_t counters() const { return files_.size(); }

 private:
  struct CounterFile {
    std::string path, device, counter;
    int port = 0;
    bool seen = false;
    int64_t last = 0;
  };
  std::string root_;
  std::vector<CounterFile> files_;
};

}  // namespace causeway::consume
