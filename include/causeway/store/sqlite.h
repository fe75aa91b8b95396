// SPDX-License-Identifier: Apache-2.0
#pragma once
// Thin RAII over the SQLite C API: a connection and prepared statements.
#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace causeway::store {

class Statement {
 public:
  Statement() = default;
  Statement(sqlite3* db, std::string_view sql);
  ~Statement();
  Statement(Statement&& o) noexcept : stmt_(o.stmt_) { o.stmt_ = nullptr; }
  Statement& operator=(Statement&& o) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(int i, int64_t v);
  Statement& bind(int i, double v);
  Statement& bind(int i, std::string_view v);
  Statement& bind_null(int i);
  template <typename T>
  Statement& bind(int i, const std::optional<T>& v) {
    return v ? bind(i, static_cast<int64_t>(*v)) : bind_null(i);
  }
  // true while a row is available
  bool step();
  // run to completion, then reset for reuse
  void exec();
  void reset();

  int64_t col_int(int i) const;
  double col_double(int i) const;
  std::string col_text(int i) const;
  bool col_null(int i) const;
  int col_count() const;
  sqlite3_stmt* raw() const { return stmt_; }

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

class Connection {
 public:
  enum class Mode { ReadOnly, ReadWriteCreate };
  Connection(const std::string& path, Mode mode);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  void exec(std::string_view sql);
  Statement prepare(std::string_view sql) { return Statement(db_, sql); }
  // A single-value query; nullopt when no row.
  std::optional<int64_t> query_int(std::string_view sql);
  sqlite3* raw() const { return db_; }
  const std::string& path() const { return path_; }

 private:
  sqlite3* db_ = nullptr;
  std::string path_;
};

// Runs body inside BEGIN/COMMIT; any exception rolls back and propagates.
template <typename Body>
void in_transaction(Connection& db, Body&& body, std::string_view begin = "BEGIN") {
  db.exec(begin);
  try {
    body();
    db.exec("COMMIT");
  } catch (...) {
    try {
      db.exec("ROLLBACK");
    } catch (...) {
    }
    throw;
  }
}

}  // namespace causeway::store
