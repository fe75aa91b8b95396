// SPDX-License-Identifier: Apache-2.0
// Mutated trace files -> what every reader does with one: the checks of
// open_trace_read_only (through open_trace_in_memory: the same SQLite-header
// and schema-version checks on the bytes, without writing a file per input,
// which held this target to ~70 inputs/s), then real readers: the summaries
// the MCP tools and the report share (present/trace_stats) and the Perfetto
// export, which reads every event table. Errors are expected (UsageError /
// Error); crashes, hangs and sanitizer reports are not. Seed: a real trace
// written by make_fuzz_seeds.
#include <sqlite3.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <ostream>
#include <streambuf>
#include <vector>

#include "causeway/analyze/trace_stats.h"
#include "causeway/present/perfetto_export.h"
#include "causeway/store/read_only_trace.h"

namespace {

// SQLite's memory, recycled through free lists of 16-byte size classes.
// Debian's SQLite has no lookaside, so each open (schema parse) and query
// makes hundreds of small allocations; through ASan's allocator, with the
// memory-statistics mutex, they were half of this target's time. Each block
// is still one ASan allocation with its redzones, so an overflow past it is
// still reported; only reuse after free inside SQLite goes unseen, and
// SQLite is not the code under test.
namespace sqlite_pool {
constexpr size_t kAlign = 16, kLargest = 2048;  // larger blocks go back to malloc
// Never destroyed: LeakSanitizer checks at exit, after static destructors,
// and must still see the pooled blocks as reachable.
auto* const free_blocks = new std::vector<void*>[kLargest / kAlign + 1];

size_t rounded(int n) { return n <= 0 ? kAlign : (size_t(n) + kAlign - 1) & ~(kAlign - 1); }
size_t& size_of(void* p) { return *reinterpret_cast<size_t*>(static_cast<char*>(p) - kAlign); }

void* allocate(int n) {
  const size_t r = rounded(n);
  if (r <= kLargest && !free_blocks[r / kAlign].empty()) {
    void* p = free_blocks[r / kAlign].back();
    free_blocks[r / kAlign].pop_back();
    return p;
  }
  auto* b = static_cast<char*>(std::malloc(kAlign + r));  // the size, then the block
  if (!b) return nullptr;
  *reinterpret_cast<size_t*>(b) = r;
  return b + kAlign;
}
void release(void* p) {
  if (!p) return;
  const size_t r = size_of(p);
  if (r <= kLargest)
    free_blocks[r / kAlign].push_back(p);
  else
    std::free(static_cast<char*>(p) - kAlign);
}
void* reallocate(void* p, int n) {
  if (p && rounded(n) <= size_of(p)) return p;
  void* q = allocate(n);
  if (q && p) std::memcpy(q, p, size_of(p));
  if (q) release(p);
  return q;
}
int size(void* p) { return p ? int(size_of(p)) : 0; }
int roundup(int n) { return int(rounded(n)); }
int init(void*) { return SQLITE_OK; }
void shutdown(void*) {}
}  // namespace sqlite_pool

// Discards the export; the JSON is still built and formatted.
struct NullBuffer : std::streambuf {
  int overflow(int c) override { return c; }
  std::streamsize xsputn(const char*, std::streamsize n) override { return n; }
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  static const sqlite3_mem_methods pool{sqlite_pool::allocate, sqlite_pool::release,
                                        sqlite_pool::reallocate, sqlite_pool::size,
                                        sqlite_pool::roundup, sqlite_pool::init,
                                        sqlite_pool::shutdown, nullptr};
  if (sqlite3_config(SQLITE_CONFIG_MALLOC, &pool) != SQLITE_OK ||
      sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0) != SQLITE_OK)
    std::abort();  // SQLite was initialized before us: the numbers would not be this target's
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace causeway::analyze;
  using causeway::present::write_perfetto_json;
  std::unique_ptr<causeway::store::Connection> db;
  try {
    db = causeway::store::open_trace_in_memory(data, size, "fuzz.db");
  } catch (const std::exception&) {
    return 0;  // refused, with a message: what a reader should do
  }
  // Each reader on its own: one failing on a corrupt table must not hide the others.
  const causeway::store::Window all;
  const auto guarded = [](auto&& read) {
    try {
      read();
    } catch (const std::exception&) {
    }
  };
  guarded([&] { op_latencies(*db, all, "", true); });
  guarded([&] { top_kernels(*db, all, 10); });
  guarded([&] { memcpy_by_direction(*db, all); });
  guarded([&] { nccl_ranks(*db, all); });
  guarded([&] {
    NullBuffer sink;
    std::ostream out(&sink);
    write_perfetto_json(*db, all, {{"flow", 0, 1, 1, 1'000'000'000, 1, 1}}, out);
  });
  return 0;
}
