// SPDX-License-Identifier: Apache-2.0
#pragma once
// What store/'s readers share: a nullable column of the current row as an
// optional, one process's rows, and integers as the text of an `IN (...)` list.
#include <optional>
#include <string>

#include "causeway/store/checked_sql.h"
#include "causeway/store/sqlite.h"

namespace causeway::store {

inline std::optional<int64_t> opt_int(const Statement& st, int col) {
  if (st.col_null(col)) return std::nullopt;
  return st.col_int(col);
}

inline std::optional<std::string> opt_text(const Statement& st, int col) {
  if (st.col_null(col)) return std::nullopt;
  return st.col_text(col);
}

// "session_id = S AND pid = P": one process of one session.
inline std::string of_process(int64_t session, uint32_t pid) {
  return sql<"session_id = {} AND pid = {}">(session, pid);
}

// "1,2,3"; "" when empty.
template <typename Ints>
std::string comma_list(const Ints& ints) {
  std::string s;
  for (const auto v : ints) s += (s.empty() ? "" : ",") + std::to_string(v);
  return s;
}

}  // namespace causeway::store
