// SPDX-License-Identifier: Apache-2.0
#pragma once
#include <string_view>
#include <vector>

namespace causeway::store {

struct Migration {
  int version;
  std::string_view name;
  std::string_view sql;
};

// schema/NNN_*.sql, in order (generated at build time).
const std::vector<Migration>& embedded_migrations();

class Connection;
// Apply every migration newer than the file's version, each in a transaction,
// recording it in schema_version. A file newer than this binary: UsageError.
void migrate(Connection& db);
// latest_schema_version, check_schema_version: read_only_trace.h (readers check them).

}  // namespace causeway::store
