// SPDX-License-Identifier: Apache-2.0
// Mutated trace files -> the read path every reader takes: open read-only,
// store::check_schema_version, then a few reads of the views the readers use.
// Errors are expected (UsageError / Error); crashes, hangs and sanitizer
// reports are not. Seeds: real trace files (see run_fuzz.sh).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>

#include "causeway/present/read_only_trace.h"
#include "causeway/store/migrations.h"
#include "causeway/store/sqlite.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/dev/shm/cw_fuzz_db_" + std::to_string(getpid());
  // A -wal left by an earlier input would be replayed onto this one.
  unlink((path + "-wal").c_str());
  unlink((path + "-shm").c_str());
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  try {
    auto db = causeway::present::open_trace_read_only(path);
    causeway::store::check_schema_version(*db);
    for (const char* sql :
         {"SELECT count(*) FROM cuda_calls", "SELECT sum(calls) FROM op_stats",
          "SELECT count(*) FROM sessions WHERE end_ts_ns IS NOT NULL",
          "SELECT max(dur_ns) FROM cuda_calls WHERE op = 'cudaMalloc'",
          "SELECT coalesce(sum(count), 0) FROM drops"}) {
      try {
        db->query_int(sql);
      } catch (const std::exception&) {
      }
    }
  } catch (const std::exception&) {
  }
  return 0;
}
