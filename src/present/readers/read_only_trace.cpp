// SPDX-License-Identifier: Apache-2.0
#include "causeway/present/read_only_trace.h"

#include <spdlog/spdlog.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "causeway/common/error.h"
#include "causeway/store/migrations.h"

namespace causeway::present {
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
bool readable(store::Connection& db) {
  return sqlite3_exec(db.raw(), "SELECT count(*) FROM sqlite_master", nullptr, nullptr,
                      nullptr) == SQLITE_OK;
}

}  // namespace

std::unique_ptr<store::Connection> open_trace_read_only(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  auto st = fs::status(path, ec);
  // EACCES on a parent folder is not "no trace": say what is wrong.
  if (ec && ec != std::errc::no_such_file_or_directory)
    throw UsageError("cannot read " + path + ": " + ec.message());
  if (ec || !fs::exists(st)) throw UsageError("no trace at " + path);
  if (fs::is_directory(st)) throw UsageError(path + " is a directory, not a trace file");
  // SQLite would only say "file is not a database" on the first read.
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError("cannot read " + path + ": " + std::strerror(errno));
  char magic[16] = {};
  in.read(magic, sizeof magic);
  if (in.gcount() > 0 && std::memcmp(magic, "SQLite format 3", 16) != 0)
    throw UsageError(path + " is not a causeway trace (not a SQLite file)");
  auto db = std::make_unique<store::Connection>(path, store::Connection::Mode::ReadOnly);
  if (!readable(*db)) {
    // No writer is active without a -wal file (it would have made one), so
    // the file can be read as immutable: no -shm, no locks. With a -wal we
    // cannot read, recent writes are missed: say so.
    const std::string wal = path + "-wal";
    if (fs::exists(wal) && fs::file_size(wal, ec) > 0)
      spdlog::warn("{}: cannot read its -wal file from here (the folder is not writable); recent "
                   "writes are not seen. Copy the file with its -wal to a writable folder.",
                   path);
    db = std::make_unique<store::Connection>(file_uri(path) + "?immutable=1",
                                             store::Connection::Mode::ReadOnly);
  }
  try {
    if (store::check_schema_version(*db) == 0)
      throw UsageError(path + " is not a causeway trace (it holds no schema)");
  } catch (const UsageError& e) {
    // Name the file as the user gave it, not the URI.
    std::string msg = e.what();
    if (msg.rfind(db->path(), 0) == 0) msg = path + msg.substr(db->path().size());
    throw UsageError(msg);
  }
  return db;
}

}  // namespace causeway::present
