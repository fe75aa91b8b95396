/* SPDX-License-Identifier: (GPL-2.0-only OR Apache-2.0) */
/*
 * Launches aggregated in the kernel (trace --launch-sampling N,
 * bpf/libcall.bpf.c map launch_agg): exact counts and a log2 latency
 * histogram per (process, op, kernel), stored once a second as the deltas of
 * that interval. Decoded by src/consume/consumer.cpp.
 */
#ifndef CAUSEWAY_MODEL_LAUNCHES_H
#define CAUSEWAY_MODEL_LAUNCHES_H

#include "causeway/events.h"

/*
 * In-kernel aggregation of launch-class calls (--launch-sampling N): every
 * outermost launch is counted here, per (process, op, kernel handle), with a
 * log2 latency histogram; only launches at least CW_LAUNCH_KEEP_NS slow, the
 * first of each key and one in N are also recorded as rows. User space reads
 * the map once a second and stores the deltas (launch_buckets).
 */
#define CW_HIST_BUCKETS 32      /* bucket b: [2^b, 2^(b+1)) ns; the last one is open */
#define CW_LAUNCH_KEEP_NS 100000ULL /* explain never calls a launch slow below 100 us
                                       (kSlowMinExcessNs): every one above is kept */
struct cw_launch_key {
	__u32 pid;              /* tgid */
	__u16 op;
	__u16 _pad;
	__u64 kernel;           /* host stub (runtime) or CUfunction/CUkernel (driver) */
};

struct cw_launch_agg {
	__u64 calls;
	__u64 errors;
	__u64 total_ns;
	__u64 hist[CW_HIST_BUCKETS];
};

#ifdef __cplusplus
#include <array>
#include <string>

#include "causeway/model/family.h"

namespace causeway::model {

// One flush interval of one (process, op, kernel): a launch_stats row, and
// one launch_buckets row per non-empty bucket.
struct LaunchStat {
  int64_t ts_ns = 0;  // end of the interval
  uint32_t pid = 0;
  uint16_t op_id = 0;
  std::string kernel;  // empty = unknown
  int64_t calls = 0, errors = 0, total_ns = 0;
};

struct LaunchBucket {
  int64_t ts_ns = 0;
  uint32_t pid = 0;
  uint16_t op_id = 0;
  std::string kernel;
  int bucket = 0;  // [2^b, 2^(b+1)) ns
  int64_t calls = 0;
};

struct LaunchStats {
  using Row = LaunchStat;
  static constexpr Column<Row> kColumns[] = {
      {"ts_ns", SqlType::Integer, true, "end of the interval (about 1 s long) the row counts", field<&Row::ts_ns>},
      {"pid", SqlType::Integer, true, "process (tgid)", field<&Row::pid>},
      {"op_id", SqlType::Integer, true, "→ `ops.id`", field<&Row::op_id>},
      {"kernel_id", SqlType::Integer, false, "→ `kernels.id`, NULL when the handle could not be named",
       field<&Row::kernel>, "kernels"},
      {"calls", SqlType::Integer, true, "launches in the interval", field<&Row::calls>},
      {"errors", SqlType::Integer, true, "launches that returned an error", field<&Row::errors>},
      {"total_ns", SqlType::Integer, true, "their summed duration, exact", field<&Row::total_ns>},
  };
  static constexpr Table<Row> kTable{"launch_stats", "Launches per (process, op, kernel) and interval.",
                                     TableKind::Events, kColumns, {}, true};
};

struct LaunchBuckets {
  using Row = LaunchBucket;
  static constexpr Column<Row> kColumns[] = {
      {"ts_ns", SqlType::Integer, true, "end of the interval", field<&Row::ts_ns>},
      {"pid", SqlType::Integer, true, "process (tgid)", field<&Row::pid>},
      {"op_id", SqlType::Integer, true, "→ `ops.id`", field<&Row::op_id>},
      {"kernel_id", SqlType::Integer, false, "→ `kernels.id`", field<&Row::kernel>, "kernels"},
      {"bucket", SqlType::Integer, true,
       "`b`: durations in [2^b, 2^(b+1)) ns; 31 also holds everything slower", field<&Row::bucket>},
      {"calls", SqlType::Integer, true, "launches in the bucket", field<&Row::calls>},
  };
  static constexpr Table<Row> kTable{"launch_buckets",
                                     "The same launches by latency: only non-empty buckets are stored.",
                                     TableKind::Events, kColumns};
};

}  // namespace causeway::model
CAUSEWAY_TABLE(LaunchStats);
CAUSEWAY_TABLE(LaunchBuckets);
#endif /* __cplusplus */

#endif /* CAUSEWAY_MODEL_LAUNCHES_H */
