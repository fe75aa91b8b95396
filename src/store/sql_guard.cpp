// SPDX-License-Identifier: Apache-2.0
#include "causeway/store/read_only_trace.h"

#include <strings.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>

#include "causeway/common/error.h"
#include "causeway/common/time.h"

namespace causeway::store {
namespace {

int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// PRAGMAs that only report. Any of them given a value (`PRAGMA x = v`) is
// refused, except those whose argument names a table or index.
constexpr const char* kReportPragmas[] = {
    "table_info",    "table_xinfo",    "table_list",       "index_list",   "index_info",
    "index_xinfo",   "foreign_key_list", "database_list",  "function_list", "pragma_list",
    "collation_list", "module_list",   "compile_options",  "user_version", "schema_version",
    "application_id", "page_count",    "page_size",        "freelist_count", "journal_mode",
    "encoding",      "integrity_check", "quick_check",     "foreign_key_check", "data_version",
};
constexpr const char* kPragmasWithTableArg[] = {
    "table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo",
    "foreign_key_list", "foreign_key_check", "integrity_check", "quick_check",
};
// Functions that reach outside the query: loading code, or FTS3's tokenizer
// pointer interface.
constexpr const char* kRefusedFunctions[] = {"load_extension", "fts3_tokenizer", "readfile",
                                             "writefile", "edit"};

bool in(const char* name, const auto& list) {
  if (!name) return false;
  return std::any_of(std::begin(list), std::end(list),
                     [&](const char* n) { return strcasecmp(n, name) == 0; });
}

constexpr const char* kSchemaChange = "a schema change";

// "DROP TABLE", "CREATE TEMP TRIGGER": the statement's leading keywords.
std::string statement_verb(std::string_view sql) {
  std::string out;
  size_t i = 0;
  for (int words = 0; words < 3; words++) {
    while (i < sql.size() && std::isspace(static_cast<unsigned char>(sql[i]))) i++;
    size_t start = i;
    while (i < sql.size() && std::isalpha(static_cast<unsigned char>(sql[i]))) i++;
    if (i == start) break;
    std::string w(sql.substr(start, i - start));
    for (auto& c : w) c = char(std::toupper(static_cast<unsigned char>(c)));
    out += (out.empty() ? "" : " ") + w;
    if (words == 0 && w != "CREATE" && w != "DROP" && w != "ALTER") break;
    if (words == 1 && w != "TEMP" && w != "TEMPORARY" && w != "UNIQUE" && w != "VIRTUAL") break;
  }
  return out.empty() ? kSchemaChange : out;
}

const char* action_name(int action) {
  switch (action) {
    case SQLITE_INSERT: return "INSERT";
    case SQLITE_UPDATE: return "UPDATE";
    case SQLITE_DELETE: return "DELETE";
    case SQLITE_CREATE_INDEX: return "CREATE INDEX";
    case SQLITE_CREATE_TEMP_INDEX: return "CREATE TEMP INDEX";
    case SQLITE_CREATE_TABLE: return "CREATE TABLE";
    case SQLITE_CREATE_TEMP_TABLE: return "CREATE TEMP TABLE";
    case SQLITE_CREATE_TRIGGER: return "CREATE TRIGGER";
    case SQLITE_CREATE_TEMP_TRIGGER: return "CREATE TEMP TRIGGER";
    case SQLITE_CREATE_VIEW: return "CREATE VIEW";
    case SQLITE_CREATE_TEMP_VIEW: return "CREATE TEMP VIEW";
    case SQLITE_CREATE_VTABLE: return "CREATE VIRTUAL TABLE";
    case SQLITE_DROP_INDEX: return "DROP INDEX";
    case SQLITE_DROP_TEMP_INDEX: return "DROP TEMP INDEX";
    case SQLITE_DROP_TABLE: return "DROP TABLE";
    case SQLITE_DROP_TEMP_TABLE: return "DROP TEMP TABLE";
    case SQLITE_DROP_TRIGGER: return "DROP TRIGGER";
    case SQLITE_DROP_TEMP_TRIGGER: return "DROP TEMP TRIGGER";
    case SQLITE_DROP_VIEW: return "DROP VIEW";
    case SQLITE_DROP_TEMP_VIEW: return "DROP TEMP VIEW";
    case SQLITE_DROP_VTABLE: return "DROP VIRTUAL TABLE";
    case SQLITE_ALTER_TABLE: return "ALTER TABLE";
    case SQLITE_ATTACH: return "ATTACH";
    case SQLITE_DETACH: return "DETACH";
    case SQLITE_TRANSACTION: return "a transaction statement";
    case SQLITE_SAVEPOINT: return "SAVEPOINT";
    case SQLITE_REINDEX: return "REINDEX";
    case SQLITE_ANALYZE: return "ANALYZE";
    default: return "this statement";
  }
}

// "near offset 14: "FROM nowhere"" — where SQLite stopped, for one-line errors.
std::string error_position(sqlite3* db, std::string_view sql) {
  int off = sqlite3_error_offset(db);
  if (off < 0) {
    // SQLite 3.40 gives no offset for an unknown table: find the name.
    std::string_view msg = sqlite3_errmsg(db);
    auto colon = msg.rfind(": ");
    if (colon != std::string_view::npos) {
      auto at = sql.find(msg.substr(colon + 2));
      if (at != std::string_view::npos) off = int(at);
    }
  }
  if (off < 0 || size_t(off) > sql.size()) return "";
  std::string at(sql.substr(off, 30));
  std::replace(at.begin(), at.end(), '\n', ' ');
  if (sql.size() - off > 30) at += "...";
  return " (at character " + std::to_string(off + 1) + ": \"" + at + "\")";
}

bool only_trivia(const char* p, const char* end) {
  while (p < end) {
    if (std::isspace(static_cast<unsigned char>(*p)) || *p == ';') {
      ++p;
    } else if (p + 1 < end && p[0] == '-' && p[1] == '-') {
      while (p < end && *p != '\n') ++p;
    } else if (p + 1 < end && p[0] == '/' && p[1] == '*') {
      const char* close = std::strstr(p + 2, "*/");
      if (!close || close >= end) return true;  // an unclosed comment is a comment
      p = close + 2;
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace

SqlGuard::SqlGuard(store::Connection& db) : db_(db) {
  sqlite3* h = db_.raw();
  sqlite3_set_authorizer(h, &SqlGuard::authorize, this);
  sqlite3_progress_handler(h, 1000, &SqlGuard::on_progress, this);
  // Belt and braces behind the authorizer: no extension loading, no ATTACH at
  // all, no schema tricks, bounded values.
  sqlite3_db_config(h, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, nullptr);
  sqlite3_db_config(h, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
  sqlite3_db_config(h, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nullptr);
  sqlite3_limit(h, SQLITE_LIMIT_ATTACHED, 0);
  sqlite3_limit(h, SQLITE_LIMIT_LENGTH, 64 << 20);
}

SqlGuard::~SqlGuard() {
  sqlite3_set_authorizer(db_.raw(), nullptr, nullptr);
  sqlite3_progress_handler(db_.raw(), 0, nullptr, nullptr);
}

int SqlGuard::authorize(void* self_ptr, int action, const char* a1, const char* a2,
                        const char* /*db*/, const char* /*trigger*/) {
  auto* self = static_cast<SqlGuard*>(self_ptr);
  switch (action) {
    case SQLITE_SELECT:
    case SQLITE_READ:
    case SQLITE_RECURSIVE:
      return SQLITE_OK;
    case SQLITE_UPDATE:
      // The first use of an eponymous virtual table (json_each,
      // pragma_table_info) asks to update sqlite_master's columns, in code it
      // never runs. A user's UPDATE of sqlite_master is still refused:
      // SQLITE_DBCONFIG_DEFENSIVE and sqlite3_stmt_readonly() both stop it.
      if (a1 && strcasecmp(a1, "sqlite_master") == 0) return SQLITE_OK;
      self->refuse("UPDATE");
      return SQLITE_DENY;
    case SQLITE_FUNCTION:
      // a1 is unused for functions; a2 is the function's name.
      if (in(a2, kRefusedFunctions)) {
        self->refuse(std::string(a2) + "()");
        return SQLITE_DENY;
      }
      return SQLITE_OK;
    case SQLITE_PRAGMA:
      // a1 is the PRAGMA's name, a2 its argument (NULL when it only reads).
      if (in(a1, kReportPragmas) && (a2 == nullptr || in(a1, kPragmasWithTableArg)))
        return SQLITE_OK;
      self->refuse("PRAGMA " + std::string(a1 ? a1 : "") + (a2 ? " with a value" : ""));
      return SQLITE_DENY;
    default:
      // CREATE/DROP first ask to write sqlite_master row by row: name the
      // statement instead (from its text, in run()).
      if ((action == SQLITE_INSERT || action == SQLITE_DELETE) && a1 &&
          (strcasecmp(a1, "sqlite_master") == 0 || strcasecmp(a1, "sqlite_temp_master") == 0))
        self->refuse(kSchemaChange);
      else
        self->refuse(action_name(action));
      return SQLITE_DENY;
  }
}

int SqlGuard::on_progress(void* self_ptr) {
  auto* self = static_cast<SqlGuard*>(self_ptr);
  if (steady_now_ns() < self->deadline_ns_) return 0;
  self->timed_out_ = true;
  return 1;  // interrupts the statement
}

QueryResult SqlGuard::run(std::string_view sql, const QueryLimits& limits,
                          const std::vector<SqlParam>& params) {
  sqlite3* h = db_.raw();
  refused_.clear();
  timed_out_ = false;
  // Preparing is bounded too (a huge IN list, a deep CTE plan).
  deadline_ns_ = steady_now_ns() + limits.timeout_ns;
  const std::string what = "the query is read-only";

  sqlite3_stmt* raw = nullptr;
  const char* tail = nullptr;
  std::string text(sql);
  int rc = sqlite3_prepare_v2(h, text.c_str(), int(text.size()), &raw, &tail);
  if (rc != SQLITE_OK) {
    if (refused_ == kSchemaChange) refused_ = statement_verb(text);
    if (!refused_.empty())
      throw UsageError("refused: " + refused_ + " is not allowed; " + what);
    throw UsageError("SQL error: " + std::string(sqlite3_errmsg(h)) + error_position(h, text));
  }
  if (!raw) throw UsageError("SQL error: no statement to run");
  struct Finalizer {
    sqlite3_stmt* s;
    ~Finalizer() { sqlite3_finalize(s); }
  } fin{raw};
  if (!only_trivia(tail, text.c_str() + text.size()))
    throw UsageError("refused: more than one statement (at character " +
                     std::to_string(tail - text.c_str() + 1) +
                     "); run one statement per query");
  // The authorizer sees every table and function; this catches what it cannot
  // name, e.g. VACUUM, which writes without an INSERT.
  if (!sqlite3_stmt_readonly(raw))
    throw UsageError("refused: the statement would write; " + what);
  for (size_t i = 0; i < params.size(); i++) {
    if (auto* v = std::get_if<int64_t>(&params[i]))
      sqlite3_bind_int64(raw, int(i + 1), *v);
    else
      sqlite3_bind_text(raw, int(i + 1), std::get<std::string>(params[i]).c_str(), -1,
                        SQLITE_TRANSIENT);
  }

  QueryResult out;
  const int ncol = sqlite3_column_count(raw);
  for (int c = 0; c < ncol; c++) out.columns.emplace_back(sqlite3_column_name(raw, c));
  for (;;) {
    rc = sqlite3_step(raw);
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) {
      if (timed_out_)
        throw Error("query stopped: it ran past the " + format_duration(limits.timeout_ns) +
                    " time limit (--timeout to change)");
      if (!refused_.empty())
        throw UsageError("refused: " + refused_ + " is not allowed; " + what);
      throw UsageError("SQL error: " + std::string(sqlite3_errmsg(h)));
    }
    if (int64_t(out.rows.size()) >= limits.max_rows) {
      out.truncated = true;
      break;
    }
    auto& row = out.rows.emplace_back();
    row.reserve(ncol);
    for (int c = 0; c < ncol; c++) {
      switch (sqlite3_column_type(raw, c)) {
        case SQLITE_INTEGER: row.emplace_back(int64_t(sqlite3_column_int64(raw, c))); break;
        case SQLITE_FLOAT: row.emplace_back(sqlite3_column_double(raw, c)); break;
        case SQLITE_TEXT:
          row.emplace_back(std::string(reinterpret_cast<const char*>(sqlite3_column_text(raw, c)),
                                       sqlite3_column_bytes(raw, c)));
          break;
        case SQLITE_BLOB: {
          auto* p = static_cast<const char*>(sqlite3_column_blob(raw, c));
          row.emplace_back(SqlBlob{std::string(p ? p : "", sqlite3_column_bytes(raw, c))});
          break;
        }
        default: row.emplace_back(std::monostate{});
      }
    }
  }
  return out;
}

}  // namespace causeway::store
