/* SPDX-License-Identifier: (GPL-2.0-only OR Apache-2.0) */
/*
 * Direct reclaim episodes (bpf/host.bpf.c, mm_vmscan_direct_reclaim_begin /
 * _end): a task that had to free memory before it could allocate. Of traced
 * processes always, of others when slower than 1 ms.
 */
#ifndef CAUSEWAY_MODEL_RECLAIMS_H
#define CAUSEWAY_MODEL_RECLAIMS_H

#include "causeway/events.h"

#define CW_EV_RECLAIM 8

struct cw_reclaim_event {
	struct cw_header hdr;   /* ts_ns = begin */
	__u64 dur_ns;
	__u64 nr_reclaimed;
};

#ifdef __cplusplus
#include "causeway/model/family.h"

namespace causeway::model {

struct Reclaim {
  int64_t ts_ns = 0;
  int64_t dur_ns = 0;
  uint32_t pid = 0;
  uint32_t tid = 0;
  int64_t nr_reclaimed = 0;
};

struct Reclaims {
  using Event = cw_reclaim_event;
  using Row = Reclaim;
  static constexpr uint32_t kEventType = CW_EV_RECLAIM;
  static constexpr Column<Row> kColumns[] = {
      {"ts_ns", SqlType::Integer, true, "begin", field<&Row::ts_ns>},
      {"dur_ns", SqlType::Integer, true, "how long the task was reclaiming", field<&Row::dur_ns>},
      {"pid", SqlType::Integer, true, "process", field<&Row::pid>},
      {"tid", SqlType::Integer, true, "thread", field<&Row::tid>},
      {"nr_reclaimed", SqlType::Integer, true, "pages freed", field<&Row::nr_reclaimed>},
  };
  static constexpr Table<Row> kTable{"reclaims", "Direct memory reclaim episodes.", TableKind::Events,
                                     kColumns};

  static Row decode(const Event& e, DecodeContext& cx) {
    Row r;
    r.ts_ns = cx.wall(e.hdr.ts_ns);
    r.dur_ns = int64_t(e.dur_ns);
    r.pid = e.hdr.pid;
    r.tid = e.hdr.tid;
    r.nr_reclaimed = int64_t(e.nr_reclaimed);
    add_saturating(cx.host.reclaim_ns, r.dur_ns);
    return r;
  }
};
static_assert(sizeof(cw_reclaim_event) == 48);

}  // namespace causeway::model
CAUSEWAY_TABLE(Reclaims);
#endif /* __cplusplus */

#endif /* CAUSEWAY_MODEL_RECLAIMS_H */
