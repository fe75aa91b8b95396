// SPDX-License-Identifier: Apache-2.0
#include "causeway/store/read_only_trace.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "causeway/common/error.h"
#include "causeway/store/checked_sql.h"
#include "causeway/store/migrations.h"

namespace causeway::store {
namespace {

// SQLite URIs need %, ? and # escaped in the path.
std::string file_uri(const std::string& path) {
  std::string uri = "file:";
  for (char c : std::filesystem::absolute(path).string()) {
    if (c == '%' || c == '?' || c == '#') {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", static_cast<unsigned char>(c));
      uri += buf;
    } else {
      uri += c;
    }
  }
  return uri;
}

// Whether SQLite can read the file as opened: a WAL-mode trace in a folder
// this user cannot write, with no -shm file yet, cannot be read normally.
bool readable(Connection& db) {
  return sqlite3_exec(db.raw(), sql<"SELECT count(*) FROM sqlite_master">().c_str(), nullptr, nullptr,
                      nullptr) == SQLITE_OK;
}

// SQLite would only say "file is not a database" on the first read. An empty
// file passes: it is an empty trace.
void require_sqlite_header(const char* head, size_t n, const std::string& name) {
  if (n > 0 && std::memcmp(head, "SQLite format 3", 16) != 0)
    throw UsageError(name + " is not a causeway trace (not a SQLite file)");
}

// Readers must not guess at a file that is not a trace, or a newer one.
void require_trace_schema(Connection& db, const std::string& name) {
  try {
    if (check_schema_version(db) == 0)
      throw UsageError(name + " is not a causeway trace (it holds no schema)");
  } catch (const UsageError& e) {
    // Name the trace as the user gave it, not the URI.
    std::string msg = e.what();
    if (msg.rfind(db.path(), 0) == 0) msg = name + msg.substr(db.path().size());
    throw UsageError(msg);
  }
}

}  // namespace

std::unique_ptr<Connection> open_trace_read_only(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  auto st = fs::status(path, ec);
  // EACCES on a parent folder is not "no trace": say what is wrong.
  if (ec && ec != std::errc::no_such_file_or_directory)
    throw UsageError("cannot read " + path + ": " + ec.message());
  if (ec || !fs::exists(st)) throw UsageError("no trace at " + path);
  if (fs::is_directory(st)) throw UsageError(path + " is a directory, not a trace file");
  // Opening a FIFO to read its header would wait for a writer forever.
  if (!fs::is_regular_file(st))
    throw UsageError(path + " is " + (fs::is_fifo(st) ? "a FIFO" : fs::is_character_file(st) || fs::is_block_file(st) ? "a device" : "not a regular file") + ", not a trace file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError("cannot read " + path + ": " + std::strerror(errno));
  char head[20] = {};  // the magic, then bytes 18-19: 2 in a WAL-mode file
  in.read(head, sizeof head);
  require_sqlite_header(head, size_t(in.gcount()), path);
  const bool wal_mode = in.gcount() == sizeof head && head[18] == 2;
  // Before opening: SQLite may create an empty -wal beside a WAL-mode file.
  const bool wal_missing = fs::file_size(path + "-wal", ec) == 0 || ec;
  auto db = std::make_unique<Connection>(path, Connection::Mode::ReadOnly);
  if (!readable(*db)) {
    // No writer is active without a -wal file (it would have made one), so
    // the file can be read as immutable: no -shm, no locks. With a -wal we
    // cannot read, recent writes are missed: say so.
    const std::string wal = path + "-wal";
    if (fs::exists(wal) && fs::file_size(wal, ec) > 0)
      spdlog::warn("{}: cannot read its -wal file from here (the folder is not writable); recent "
                   "writes are not seen. Copy the file with its -wal to a writable folder.",
                   path);
    db = std::make_unique<Connection>(file_uri(path) + "?immutable=1", Connection::Mode::ReadOnly);
  }
  try {
    require_trace_schema(*db, path);
  } catch (const UsageError& e) {
    // A trace still being written (or killed) keeps its newest pages, the
    // schema among them, in its -wal: a copy without it is not "not a trace".
    if (!wal_mode || !wal_missing || std::string(e.what()).find("not a causeway trace") == std::string::npos)
      throw;
    throw UsageError(path + " is a causeway trace without its -wal file (" + path +
                     "-wal), which holds its schema and newest rows: copy the two files together");
  }
  return db;
}

std::unique_ptr<Connection> open_trace_in_memory(const uint8_t* data, size_t size, const std::string& name) {
  char magic[16] = {};  // compared as the file path compares a short file
  if (size) std::memcpy(magic, data, std::min<size_t>(size, sizeof magic));
  require_sqlite_header(magic, size, name);
  auto db = std::make_unique<Connection>(":memory:", Connection::Mode::ReadOnly);
  auto* copy = static_cast<uint8_t*>(sqlite3_malloc64(std::max<size_t>(size, 1)));
  if (!copy) throw Error("cannot open " + name + " in memory: out of memory");
  if (size) std::memcpy(copy, data, size);
  // memdb has no shared memory, so it refuses a WAL-mode file (header bytes
  // 18-19, the write/read format versions, at 2). As 1 it reads the bytes as
  // a file reader does when no -wal is left: a closed trace.
  for (size_t at : {18, 19})
    if (at < size && copy[at] == 2) copy[at] = 1;
  int rc = sqlite3_deserialize(db->raw(), "main", copy, sqlite3_int64(size), sqlite3_int64(size),
                               SQLITE_DESERIALIZE_READONLY | SQLITE_DESERIALIZE_FREEONCLOSE);
  if (rc != SQLITE_OK) throw Error("cannot open " + name + " in memory: " + sqlite3_errstr(rc));
  require_trace_schema(*db, name);
  return db;
}

}  // namespace causeway::store
