// SPDX-License-Identifier: Apache-2.0
#pragma once
// The section of docs/schema.md that documents one declared table, made from
// its declaration (tests/unit/families_test.cpp checks the document holds
// exactly this for every table).
#include <string>

#include "causeway/model/family.h"

namespace causeway::model {

inline std::string_view sql_type_name(SqlType t) {
  switch (t) {
    case SqlType::Integer: return "INTEGER";
    case SqlType::Real: return "REAL";
    case SqlType::Text: return "TEXT";
  }
  return "?";
}

template <typename Row>
std::string table_markdown(const Table<Row>& t) {
  std::string s = "## " + std::string(t.name) + " (table)\n" + std::string(t.doc) +
                  "\n\n| column | type | meaning |\n|---|---|---|\n";
  if (t.per_session()) s += "| `session_id` | INTEGER NOT NULL | → `sessions.id` |\n";
  for (const auto& c : t.columns)
    s += "| `" + std::string(c.name) + "` | " + std::string(sql_type_name(c.type)) +
         (c.not_null ? " NOT NULL" : "") + " | " + std::string(c.doc) + " |\n";
  return s;
}

}  // namespace causeway::model
