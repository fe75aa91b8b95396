// SPDX-License-Identifier: Apache-2.0
#include "causeway/store/window.h"

namespace causeway::store {

std::string Window::sql_and(const std::string& ts, const std::string& pid_col) const {
  std::string s;
  if (from_ns) s += " AND " + ts + " >= " + std::to_string(*from_ns);
  if (to_ns) s += " AND " + ts + " < " + std::to_string(*to_ns);
  if (pid) s += " AND " + pid_col + " = " + std::to_string(*pid);
  return s;
}

std::string Window::sql_where(const std::string& alias) const {
  const std::string s = sql_and(alias + "ts_ns", alias + "pid");
  return s.empty() ? "1" : s.substr(5);  // less the leading " AND "
}

}  // namespace causeway::store
