// SPDX-License-Identifier: Apache-2.0
#pragma once
// Running statistics for the live view: per-op latency histograms (log-linear
// buckets, ~3% relative error) and host context totals. Cheap to update on
// every decoded record; percentiles read from the histogram.
#include <array>
#include <cstdint>
#include <map>

namespace causeway::consume {

// Statistic sums saturate: a corrupt duration must not overflow (UB).
inline void add_saturating(int64_t& sum, int64_t v) {
  if (__builtin_add_overflow(sum, v, &sum)) sum = v < 0 ? INT64_MIN : INT64_MAX;
}

class LatencyHistogram {
 public:
  void add(int64_t ns);
  void add_many(int64_t ns, int64_t n);  // n calls of ns each (aggregated launches)
  int64_t percentile(double p) const;  // 0 when empty
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

struct HostTotals {
  int64_t offcpu_ns = 0, offcpu_count = 0, offcpu_runnable_ns = 0;
  int64_t io_count = 0, io_ns = 0, io_bytes = 0;
  int64_t retransmits = 0;
  int64_t reclaim_ns = 0;
};

struct LiveStats {
  std::map<uint16_t, LatencyHistogram> ops;       // since start
  std::map<uint16_t, LatencyHistogram> interval;  // since the last refresh
  HostTotals host;
  int64_t records = 0;
  void reset_interval() { interval.clear(); }
};

}  // namespace causeway::consume
