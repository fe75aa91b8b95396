// SPDX-License-Identifier: Apache-2.0
#pragma once
// Running statistics for the live view: per-op latency histograms (log-linear
// buckets, ~3% relative error) and host context totals. Cheap to update on
// every decoded record; percentiles read from the histogram.
#include <array>
#include <cstdint>
#include <map>
#include <string>

#include "causeway/model/family.h"

namespace causeway::consume {

using model::add_saturating;
using model::HostTotals;

class LatencyHistogram {
 public:
  void add(int64_t ns);
  void add_many(int64_t ns, int64_t n);  // n calls of ns each (aggregated launches)
  int64_t percentile(double p) const;  // 0 when empty
  // Calls in the buckets whose upper edge is <= ns (a cumulative histogram
  // bucket; edges fall within ~6% of ns).
  int64_t count_le(int64_t ns) const;
  int64_t count() const { return count_; }
  int64_t max() const { return max_; }
  int64_t total() const { return total_; }
  void merge(const LatencyHistogram& o);

 private:
  static constexpr int kSub = 16;  // sub-buckets per power of two
  static int bucket(int64_t ns);
  static int64_t bucket_upper(int b);
  std::array<int64_t, 64 * kSub> buckets_{};
  int64_t count_ = 0, max_ = 0, total_ = 0;
};

struct LiveStats {
  std::map<uint16_t, LatencyHistogram> ops;       // since start
  std::map<uint16_t, LatencyHistogram> interval;  // since the last refresh
  HostTotals host;
  int64_t records = 0;
  // Per traced process, when the consumer counts them (count_per_process, for
  // the metrics): recorded calls per op (rows, and launches counted in the
  // kernel; rows shed under overload are not in it, op_stats stays exact)
  // and of them the ones that failed,
  // collectives per communicator, copies per direction. The agent drops a
  // process's entry a while after it exits.
  struct Tally {
    int64_t calls = 0, bytes = 0, ns = 0;
    void add(int64_t b, int64_t d) { calls++, bytes += b, ns += d; }
  };
  struct CommOp {
    std::string comm;  // the communicator's hash; "" when its init was not seen
    int rank = -1, nranks = -1;
    uint16_t op = 0;
    auto operator<=>(const CommOp&) const = default;
  };
  struct ProcessTallies {
    std::map<uint16_t, int64_t> calls;
    std::map<uint16_t, int64_t> errors;  // calls that returned an error (ret != 0)
    std::map<CommOp, Tally> nccl;
    std::map<int, Tally> copies;  // by CopyKind (0 HtoH .. 4 default)
    int64_t tensor_bytes = 0;     // held by PyTorch's tensors (its allocator's calls recorded)
    bool has_tensors = false;
  };
  std::map<uint32_t, ProcessTallies> processes;
  void reset_interval() { interval.clear(); }
};

}  // namespace causeway::consume
