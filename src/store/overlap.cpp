// SPDX-License-Identifier: Apache-2.0
#include "causeway/store/overlap.h"

#include "causeway/store/checked_sql.h"

namespace causeway::store {

Overlap overlap(const std::string& table, const std::string& a, const std::string& call,
                const std::string& call_end, bool same_thread, int64_t longest_ns) {
  Overlap o;
  o.join = sql<" JOIN {} {} ON {}.pid = {}.pid AND {}.session_id = {}.session_id{} AND {}.ts_ns >= {}.ts_ns - {}"
               " AND {}.ts_ns < {} AND {}.ts_ns + {}.dur_ns > {}.ts_ns">(
      table, a, a, call, a, call, same_thread ? sql<" AND {}.tid = {}.tid">(a, call) : std::string(), a, call,
      longest_ns, a, call_end, a, a, call);
  o.clipped = sql<"min({}.ts_ns + {}.dur_ns, {}) - max({}.ts_ns, {}.ts_ns)">(a, a, call_end, a, call);
  return o;
}

}  // namespace causeway::store
