// SPDX-License-Identifier: Apache-2.0
#pragma once
// Runs user SQL against a trace so that it can only read. Three locks, any one
// of which suffices for the file on disk: the connection is opened
// SQLITE_OPEN_READONLY; an authorizer allows only reads (no writes, no temp
// objects, no ATTACH, no writable PRAGMA, no load_extension); and a statement
// must report sqlite3_stmt_readonly(). A progress handler enforces a time
// limit, and a row limit stops runaway output.
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "causeway/store/sqlite.h"

namespace causeway::store {

struct SqlBlob {
  std::string bytes;
};
// NULL, INTEGER, REAL, TEXT, BLOB: SQLite's own storage classes.
using SqlValue = std::variant<std::monostate, int64_t, double, std::string, SqlBlob>;
using SqlParam = std::variant<int64_t, std::string>;

struct QueryResult {
  std::vector<std::string> columns;
  std::vector<std::vector<SqlValue>> rows;
  bool truncated = false;  // more rows existed past QueryLimits::max_rows
};

struct QueryLimits {
  int64_t max_rows = 10000;
  int64_t timeout_ns = 10'000'000'000;
};

class SqlGuard {
 public:
  // Installs the authorizer, progress handler and limits on `db` (which must
  // stay open while the guard lives); the destructor removes them.
  explicit SqlGuard(store::Connection& db);
  ~SqlGuard();
  SqlGuard(const SqlGuard&) = delete;
  SqlGuard& operator=(const SqlGuard&) = delete;

  // One statement only: text after the first statement (other than
  // whitespace, comments and semicolons) is refused, never run.
  // Throws UsageError for bad SQL (SQLite's message and the position) and for
  // a refused statement; Error when the time limit stops it.
  QueryResult run(std::string_view sql, const QueryLimits& limits,
                  const std::vector<SqlParam>& params = {});

 private:
  static int authorize(void* self, int action, const char* a1, const char* a2, const char* db,
                       const char* trigger);
  static int on_progress(void* self);
  // The first denial names the statement (DROP TABLE, not the DELETE of
  // sqlite_master it implies).
  void refuse(std::string what) {
    if (refused_.empty()) refused_ = std::move(what);
  }

  store::Connection& db_;
  std::string refused_;         // why the authorizer said no, for the message
  int64_t deadline_ns_ = 0;     // steady clock
  bool timed_out_ = false;
};

}  // namespace causeway::store
