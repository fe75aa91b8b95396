// SPDX-License-Identifier: Apache-2.0
// Random SQL -> store::SqlGuard over a real trace opened read-only. Beyond
// "no crash": the file must never change, whatever the SQL (the guard's one
// promise), so its size and mtime are checked after every statement.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>

#include "causeway/store/read_only_trace.h"
#include "causeway/store/read_only_trace.h"

namespace {
std::string g_db;
struct stat g_before;
std::unique_ptr<causeway::store::Connection> g_conn;
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* db = std::getenv("CW_FUZZ_TRACE");
  if (!db) {
    std::fprintf(stderr, "set CW_FUZZ_TRACE to a trace file (run_fuzz.sh makes one)\n");
    std::abort();
  }
  g_db = db;
  stat(g_db.c_str(), &g_before);
  g_conn = causeway::store::open_trace_read_only(g_db);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string sql(reinterpret_cast<const char*>(data), size);
  try {
    causeway::store::SqlGuard guard(*g_conn);
    causeway::store::QueryLimits limits;
    limits.max_rows = 100;
    limits.timeout_ns = 200'000'000;  // a statement that never ends is stopped
    guard.run(sql, limits);
  } catch (const std::exception&) {
  }
  struct stat now;
  stat(g_db.c_str(), &now);
  if (now.st_size != g_before.st_size || now.st_mtim.tv_sec != g_before.st_mtim.tv_sec ||
      now.st_mtim.tv_nsec != g_before.st_mtim.tv_nsec)
    std::abort();  // the guard let SQL write the trace
  return 0;
}
