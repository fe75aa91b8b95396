// SPDX-License-Identifier: Apache-2.0
#include "causeway/consume/live_stats.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace causeway::consume {

int LatencyHistogram::bucket(int64_t ns) {
  if (ns < kSub) return int(std::max<int64_t>(ns, 0));
  const int msb = 63 - std::countl_zero(uint64_t(ns));
  const int shift = msb - 4;  // log2(kSub)
  const int sub = int((uint64_t(ns) >> shift) & (kSub - 1));
  return std::min((shift + 1) * kSub + sub, 64 * kSub - 1);
}

int64_t LatencyHistogram::bucket_upper(int b) {
  if (b < kSub) return b;
  const int shift = b / kSub - 1;
  const int sub = b % kSub;
  return ((int64_t(kSub + sub) + 1) << shift) - 1;
}

void LatencyHistogram::add(int64_t ns) {
  buckets_[size_t(bucket(ns))]++;
  count_++;
  add_saturating(total_, ns);
  max_ = std::max(max_, ns);
}

void LatencyHistogram::add_many(int64_t ns, int64_t n) {
  if (n <= 0) return;
  buckets_[size_t(bucket(ns))] += n;
  count_ += n;
  int64_t t = 0;
  add_saturating(total_, __builtin_mul_overflow(ns, n, &t) ? INT64_MAX : t);
  max_ = std::max(max_, ns);
}

int64_t LatencyHistogram::percentile(double p) const {
  if (!count_) return 0;
  const int64_t rank = std::max<int64_t>(1, int64_t(std::ceil(p / 100.0 * double(count_))));
  int64_t seen = 0;
  for (size_t b = 0; b < buckets_.size(); b++) {
    seen += buckets_[b];
    if (seen >= rank) return std::min(bucket_upper(int(b)), max_);
  }
  return max_;
}

int64_t LatencyHistogram::count_le(int64_t ns) const {
  int64_t n = 0;
  for (int b = 0; b < int(buckets_.size()) && bucket_upper(b) <= ns; b++) n += buckets_[size_t(b)];
  return n;
}

void LatencyHistogram::merge(const LatencyHistogram& o) {
  for (size_t i = 0; i < buckets_.size(); i++) buckets_[i] += o.buckets_[i];
  count_ += o.count_;
  add_saturating(total_, o.total_);
  max_ = std::max(max_, o.max_);
}

}  // namespace causeway::consume
