/* SPDX-License-Identifier: (GPL-2.0-only OR Apache-2.0) */
/*
 * Block requests (bpf/host.bpf.c, block_rq_issue / block_rq_complete): of
 * traced processes always, of others when slower than 5 ms.
 */
#ifndef CAUSEWAY_MODEL_BLOCK_IO_H
#define CAUSEWAY_MODEL_BLOCK_IO_H

#include "causeway/events.h"

#define CW_EV_BLOCK_IO 3

struct cw_block_io_event {
	struct cw_header hdr;   /* pid = issuing process; ts_ns = issue */
	__u64 dur_ns;
	__u64 sector;
	__u32 dev;              /* major << 20 | minor (kernel dev_t) */
	__u32 bytes;
	__u32 op;               /* 0 read, 1 write, 2 flush, 3 discard, 4 other */
	__u32 _pad;
};

#ifdef __cplusplus
#include <string>

#include "causeway/model/family.h"

namespace causeway::model {

struct IoRequest {
  int64_t ts_ns = 0;
  int64_t dur_ns = 0;
  uint32_t pid = 0;
  std::string dev;  // "major:minor"
  int64_t bytes = 0;
  std::string op;  // read | write | flush | discard | other
};

struct BlockIo {
  using Event = cw_block_io_event;
  using Row = IoRequest;
  static constexpr uint32_t kEventType = CW_EV_BLOCK_IO;
  static constexpr Column<Row> kColumns[] = {
      {"ts_ns", SqlType::Integer, true, "issue time", field<&Row::ts_ns>},
      {"dur_ns", SqlType::Integer, true, "issue to completion", field<&Row::dur_ns>},
      {"pid", SqlType::Integer, true, "process that issued it", field<&Row::pid>},
      {"dev", SqlType::Text, true, "device, `major:minor`", field<&Row::dev>},
      {"bytes", SqlType::Integer, true, "size", field<&Row::bytes>},
      {"op", SqlType::Text, true, "`read`, `write`, `flush`, `discard` or `other`", field<&Row::op>},
  };
  static constexpr Table<Row> kTable{"io_requests",
                                     "Block I/O requests: of traced processes, and of any process when slower than 5 ms.",
                                     TableKind::Events, kColumns, {}, true};

  static Row decode(const Event& e, DecodeContext& cx) {
    static const char* const ops[] = {"read", "write", "flush", "discard", "other"};
    Row r;
    r.ts_ns = cx.wall(e.hdr.ts_ns);
    r.dur_ns = int64_t(e.dur_ns);
    r.pid = e.hdr.pid;
    r.dev = std::to_string(e.dev >> 20) + ":" + std::to_string(e.dev & 0xfffff);
    r.bytes = e.bytes;
    r.op = ops[e.op < 4 ? e.op : 4];
    cx.host.io_count++;
    add_saturating(cx.host.io_ns, r.dur_ns);
    add_saturating(cx.host.io_bytes, r.bytes);
    return r;
  }
};
static_assert(sizeof(cw_block_io_event) == 64);

}  // namespace causeway::model
CAUSEWAY_TABLE(BlockIo);
#endif /* __cplusplus */

#endif /* CAUSEWAY_MODEL_BLOCK_IO_H */
