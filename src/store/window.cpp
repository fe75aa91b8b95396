// SPDX-License-Identifier: Apache-2.0
#include "causeway/store/window.h"

#include "causeway/store/checked_sql.h"

namespace causeway::store {

std::string Window::sql_and(const std::string& ts, const std::string& pid_col) const {
  std::string s;
  // The columns come in holes: each caller's names are checked where it names them.
  if (from_ns) s += sql<" AND {} >= {}">(ts, *from_ns);
  if (to_ns) s += sql<" AND {} < {}">(ts, *to_ns);
  if (pid) s += sql<" AND {} = {}">(pid_col, *pid);
  return s;
}

std::string Window::sql_where(const std::string& alias) const {
  const std::string s = sql_and(alias + sql<"ts_ns">(), alias + sql<"pid">());
  return s.empty() ? "1" : s.substr(5);  // less the leading " AND "
}

}  // namespace causeway::store
