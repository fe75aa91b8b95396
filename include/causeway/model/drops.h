/* SPDX-License-Identifier: (GPL-2.0-only OR Apache-2.0) */
/*
 * What was not recorded, per source (per-CPU array map drops in each BPF
 * object; user space adds 'retention'), read once a second.
 */
#ifndef CAUSEWAY_MODEL_DROPS_H
#define CAUSEWAY_MODEL_DROPS_H

#include "causeway/events.h"

/* Per-source drop counters (array map index). */
enum cw_drop_source {
	CW_DROP_LIBCALL = 0,
	CW_DROP_HOST = 1,
	CW_DROP_PYSTACK = 2,
	CW_DROP_NEST = 3,       /* nesting deeper than CW_MAX_NEST */
	CW_DROP_SHED = 4,       /* planned: rows of fast calls shed while the ring was over
	                           CW_SHED_FILL full; their calls stay counted in op_stats */
	CW_DROP_PYCODE = 5,     /* code object copies that did not fit (their frames are
	                           read from the process instead, while it lives) */
	CW_DROP_SAMPLE = 6,     /* CPU samples (cpu_samples) that did not fit */
	CW_DROP_RETSITE = 7,    /* framework calls (CW_COOKIE_RETSITE) that returned through a call
	                           site before its probe was attached: the first from each site */
	CW_DROP_MAX = 8,
};

/* Overload: past this fill of the library-call ring (in 1/16ths), rows of
 * calls faster than CW_LAUNCH_KEEP_NS are shed before anything else is lost:
 * new stacks, code objects, slow calls, and the host ring (apart) are kept. */
#define CW_SHED_FILL 8

#ifdef __cplusplus
#include <string>
#include <string_view>

#include "causeway/model/family.h"

namespace causeway::model {

// The drops.source name of each kernel counter.
inline constexpr std::string_view kDropSourceNames[CW_DROP_MAX] = {"libcall", "host", "pystack", "nest",
                                                                   "shed", "pycode", "sample", "retsite"};

struct Drop {
  int64_t ts_ns = 0;
  std::string source;
  int64_t count = 0;
};

struct Drops {
  using Row = Drop;
  static constexpr Column<Row> kColumns[] = {
      {"ts_ns", SqlType::Integer, true, "when the drop was noticed (read once a second)", field<&Row::ts_ns>},
      {"source", SqlType::Text, true,
       "`libcall`, `host`, `pystack` (a new stack), `pycode` (a code object's copy: its frames are "
       "read from the process instead, while it lives), `nest` (nesting deeper than 4 calls), `shed` "
       "(rows of fast calls shed under overload, in a planned order: their calls stay counted in "
       "`op_stats`), `sample` (CPU samples), `retsite` (tensor allocations that returned through a call "
       "site before its probe was attached: the first from each site), `retention` (rows deleted by `--max-db-size`)",
       field<&Row::source>},
      {"count", SqlType::Integer, true, "records lost since the previous row", field<&Row::count>},
  };
  static constexpr Table<Row> kTable{"drops", "Records not stored, by source and time.", TableKind::Log,
                                     kColumns};
};

}  // namespace causeway::model
CAUSEWAY_TABLE(Drops);
#endif /* __cplusplus */

#endif /* CAUSEWAY_MODEL_DROPS_H */
