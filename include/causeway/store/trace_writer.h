// SPDX-License-Identifier: Apache-2.0
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "causeway/model/records.h"
#include "causeway/store/sqlite.h"

namespace causeway::store {

// The one way events reach a trace file. Creates the file 0600 (traces hold
// command lines), takes an exclusive lock (never two writers), applies the
// schema, and writes each Batch in one transaction with prepared statements.
class TraceWriter {
 public:
  explicit TraceWriter(const std::string& path);
  ~TraceWriter();

  int64_t begin_session(const model::SessionInfo& info);
  // Every table's rows, in one transaction; inserts and bind order come from
  // the tables' declarations (include/causeway/model/).
  void write(const model::Batch& batch);
  void write_op_counts(const std::vector<model::OpCount>& counts);
  void end_session(int64_t end_ts_ns);
  int64_t session_id() const { return session_id_; }
  Connection& connection() { return *db_; }
  int64_t rows_written() const { return rows_written_; }
  // --max-db-size: when the live pages pass max_bytes, delete the oldest rows
  // of every event table (by insertion order) until they are under 3/4 of it,
  // and record how many in drops (source 'retention'). Freed pages are reused,
  // so the file stops growing near the limit. Returns the rows deleted.
  int64_t enforce_max_size(int64_t max_bytes);

 private:
  int64_t dict_id(std::string_view dictionary, std::unordered_map<std::string, int64_t>& cache,
                  std::string_view name);
  template <typename T>
  void insert_rows(const std::vector<typename T::Row>& rows);

  int lock_fd_ = -1;
  std::unique_ptr<Connection> db_;
  int64_t session_id_ = 0;
  int64_t rows_written_ = 0;
  std::map<std::string, std::unordered_map<std::string, int64_t>, std::less<>> dict_ids_;  // per dictionary
  struct Statements;
  std::unique_ptr<Statements> st_;
};

// TraceWriter on its own thread: the consumer hands over batches and never
// waits on disk. A write error stops writing, is kept, and is rethrown from
// close() (and reported by failed()), so nothing already committed is lost.
class AsyncTraceWriter {
 public:
  // max_db_bytes > 0: enforce_max_size after every commit.
  explicit AsyncTraceWriter(std::unique_ptr<TraceWriter> writer, int64_t max_db_bytes = 0);
  ~AsyncTraceWriter();
  void post(model::Batch&& batch);
  // Wait until every posted batch is committed.
  void flush();
  // Flush, then end the session and join the thread. Rethrows a write error.
  void close(int64_t end_ts_ns, const std::vector<model::OpCount>& counts);
  bool failed() const;
  std::string error() const;
  size_t queued() const;
  int64_t rows_written() const;

 private:
  void run();
  // A burst is absorbed here before the consumer waits (and the kernel's ring,
  // then its shedding, take over): ~256k rows are ~50 MB at most.
  static constexpr size_t kMaxQueuedBatches = 64;
  static constexpr size_t kMaxQueuedRows = 256 * 1024;
  size_t queued_rows_ = 0;
  std::unique_ptr<TraceWriter> writer_;
  int64_t max_db_bytes_ = 0;
  mutable std::mutex mu_;
  std::condition_variable cv_, idle_cv_;
  std::deque<model::Batch> queue_;
  bool busy_ = false, stop_ = false;
  std::string error_;
  std::thread thread_;
};

// default_db_path: read_only_trace.h (readers find traces there too).

}  // namespace causeway::store
