/* SPDX-License-Identifier: (GPL-2.0-only OR Apache-2.0) */
/*
 * Exact per-op counters (bpf/libcall.bpf.c, per-CPU array map op_stats):
 * right even when records are dropped or shed; stored at the end of a trace.
 */
#ifndef CAUSEWAY_MODEL_OP_COUNTS_H
#define CAUSEWAY_MODEL_OP_COUNTS_H

#include "causeway/events.h"

/* Exact per-op counters kept in a per-CPU array map indexed by op id, so that
 * counts stay right even when ring-buffer records are dropped. */
struct cw_op_stats {
	__u64 calls;
	__u64 errors;           /* ret != 0 */
	__u64 total_ns;
	__u64 nested;           /* calls folded into an outer traced call */
	__u64 dropped;          /* records that did not fit in the ring buffer */
	__u64 shed;             /* rows of fast calls not recorded because the ring was filling */
};

#ifdef __cplusplus
#include "causeway/model/family.h"

namespace causeway::model {

struct OpCount {
  uint16_t op_id = 0;
  int64_t calls = 0, errors = 0, total_ns = 0, nested = 0, dropped = 0;
  int64_t shed = 0;  // rows not recorded under overload (the calls are counted)
};

struct OpCounts {
  using Row = OpCount;
  static constexpr Column<Row> kColumns[] = {
      {"op_id", SqlType::Integer, true, "→ `ops.id`", field<&Row::op_id>},
      {"calls", SqlType::Integer, true, "calls completed", field<&Row::calls>},
      {"errors", SqlType::Integer, true, "calls that returned an error", field<&Row::errors>},
      {"total_ns", SqlType::Integer, true, "summed duration", field<&Row::total_ns>},
      {"nested", SqlType::Integer, true,
       "calls made inside another traced call on the same thread (counted, not recorded)",
       field<&Row::nested>},
      {"dropped", SqlType::Integer, true, "records of this op lost because the ring buffer was full",
       field<&Row::dropped>},
      {"shed", SqlType::Integer, true,
       "rows of this op's fast calls (< 100 µs) not recorded because the ring was over half full: "
       "planned shedding, the calls are still counted here",
       field<&Row::shed>},
  };
  static constexpr Table<Row> kTable{
      "op_counts",
      "Exact per-function counters kept in kernel maps (per CPU): right even when records were "
      "dropped. View `op_stats` names the op and its layer.",
      TableKind::Keyed, kColumns,
      "ON CONFLICT(session_id, op_id) DO UPDATE SET calls=excluded.calls, errors=excluded.errors, "
      "total_ns=excluded.total_ns, nested=excluded.nested, dropped=excluded.dropped, shed=excluded.shed"};
};
static_assert(sizeof(cw_op_stats) == 48);

}  // namespace causeway::model
CAUSEWAY_TABLE(OpCounts);
#endif /* __cplusplus */

#endif /* CAUSEWAY_MODEL_OP_COUNTS_H */
