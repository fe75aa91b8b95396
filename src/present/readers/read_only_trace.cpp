// SPDX-License-Identifier: Apache-2.0
#include "causeway/present/read_only_trace.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "causeway/common/error.h"
#include "causeway/store/migrations.h"

namespace causeway::present {

std::unique_ptr<store::Connection> open_trace_read_only(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  auto st = fs::status(path, ec);
  // EACCES on a parent folder is not "no trace": say what is wrong.
  if (ec && ec != std::errc::no_such_file_or_directory)
    throw UsageError("cannot read " + path + ": " + ec.message());
  if (ec || !fs::exists(st)) throw UsageError("no trace at " + path);
  if (fs::is_directory(st)) throw UsageError(path + " is a directory, not a trace file");
  if (::access(path.c_str(), R_OK) != 0)
    throw UsageError("cannot read " + path + ": " + std::strerror(errno));
  // SQLite would only say "file is not a database" on the first read.
  std::ifstream in(path, std::ios::binary);
  char magic[16] = {};
  in.read(magic, sizeof magic);
  if (in.gcount() > 0 && std::memcmp(magic, "SQLite format 3", 16) != 0)
    throw UsageError(path + " is not a causeway trace (not a SQLite file)");
  auto db = std::make_unique<store::Connection>(path, store::Connection::Mode::ReadOnly);
  if (store::check_schema_version(*db) == 0)
    throw UsageError(path + " is not a causeway trace (it holds no schema)");
  return db;
}

}  // namespace causeway::present
