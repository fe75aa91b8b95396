// SPDX-License-Identifier: Apache-2.0
#include "causeway/store/migrations.h"

#include "causeway/common/error.h"
#include "causeway/common/op_table.h"
#include "causeway/store/checked_sql.h"
#include "causeway/store/read_only_trace.h"
#include "causeway/store/sqlite.h"

namespace causeway::store {

int latest_schema_version() {
  int v = 0;
  for (const auto& m : embedded_migrations()) v = std::max(v, m.version);
  return v;
}

int check_schema_version(Connection& db) {
  // Not a SQLite file at all: SQLite reports it on the first read.
  int64_t has_table = 0;
  try {
    has_table = db.query_int(
                      sql<"SELECT count(*) FROM sqlite_master WHERE type='table' AND "
                          "name='schema_version'">())
                    .value_or(0);
  } catch (const Error& e) {
    throw UsageError(db.path() + " is not a causeway trace (" + e.what() + ")");
  }
  if (!has_table) {
    auto tables = db.query_int(sql<"SELECT count(*) FROM sqlite_master">()).value_or(0);
    if (tables > 0) throw UsageError(db.path() + " is a SQLite file but not a causeway trace");
    return 0;
  }
  int v = int(db.query_int(sql<"SELECT max(version) FROM schema_version">()).value_or(0));
  if (v > latest_schema_version())
    throw UsageError(db.path() + " has schema version " + std::to_string(v) +
                     ", newer than this causeway understands (" +
                     std::to_string(latest_schema_version()) + "): upgrade causeway");
  return v;
}

void migrate(Connection& db) {
  int current = check_schema_version(db);
  if (current == 0)
    db.exec(
        sql<"CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, name TEXT NOT "
            "NULL, applied_ts_ns INTEGER NOT NULL)">());
  for (const auto& m : embedded_migrations()) {
    if (m.version <= current) continue;
    in_transaction(db, [&] {
      db.exec(m.sql);
      auto st = db.prepare(
          sql<"INSERT INTO schema_version(version, name, applied_ts_ns) VALUES (?, ?, "
              "CAST((julianday('now') - 2440587.5) * 86400000000000 AS INTEGER))">());
      st.bind(1, int64_t(m.version)).bind(2, m.name).exec();
    }, sql<"BEGIN IMMEDIATE">());
  }
  // The op dictionary follows the binary's table; ids never change meaning.
  db.exec(sql<"BEGIN">());
  auto ins = db.prepare(
      sql<"INSERT INTO ops(id, name, layer, class, memory) VALUES (?, ?, ?, ?, ?) "
          "ON CONFLICT(id) DO UPDATE SET class = excluded.class, memory = excluded.memory">());
  for (const auto& op : all_ops()) {
    ins.bind(1, int64_t(op.id)).bind(2, op.name).bind(3, layer_name(op.layer)).bind(4, op_class_name(op.cls));
    const auto mem = memory_kind_name(memory_kind(op));
    if (mem.empty())
      ins.bind_null(5);
    else
      ins.bind(5, mem);
    ins.exec();
  }
  db.exec(sql<"COMMIT">());
}

}  // namespace causeway::store
