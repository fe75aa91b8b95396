// SPDX-License-Identifier: Apache-2.0
#pragma once
// How every reader (explain, query, export, mcp, report, the live explain)
// opens a trace: read-only, after checking that the path is a causeway trace
// this binary understands. The one way in for reading, as TraceWriter is for
// writing, and all that present takes from store/: a trace opened, its
// schema version, where traces live by default, and the user's own SQL run
// so that it can only read (query, MCP's sql). What a trace holds, present
// gets from analyze/.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "causeway/store/sqlite.h"
#include "causeway/store/window.h"

namespace causeway::store {

// UsageError (one line, exit 2) for a missing path, a directory, a file that is
// not SQLite, a SQLite file that is not a trace, or a newer schema.
std::unique_ptr<Connection> open_trace_read_only(const std::string& path);

// The same checks on a copy of a trace file's bytes, read from memory (the
// trace-file fuzzer: no file written per input). `name` stands for the file
// in messages.
std::unique_ptr<Connection> open_trace_in_memory(const uint8_t* data, size_t size, const std::string& name);

// The newest schema this binary writes (schema/NNN_*.sql).
int latest_schema_version();
// The file's schema version (0 for an empty file). Refuses newer files.
int check_schema_version(Connection& db);

// Default trace path: /var/lib/causeway/causeway.db as root, else
// $XDG_DATA_HOME/causeway/causeway.db (~/.local/share/...). Creates the folder.
std::string default_db_path(bool create_dir);

// `causeway query` without SQL: the calls in the window, NCCL's view or the
// CUDA/HIP one, oldest first, or the `top` slowest (slowest first). `by_op`:
// limited to the op bound as the statement's one parameter. Run through SqlGuard.
std::string call_listing_sql(bool nccl, const Window& w, bool by_op, std::optional<int64_t> top);

// User SQL against a trace, so that it can only read. Three locks, any one
// of which suffices for the file on disk: the connection is opened
// SQLITE_OPEN_READONLY; an authorizer allows only reads (no writes, no temp
// objects, no ATTACH, no writable PRAGMA, no load_extension); and a statement
// must report sqlite3_stmt_readonly(). A progress handler enforces a time
// limit, and a row limit stops runaway output.
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
