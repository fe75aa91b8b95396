// SPDX-License-Identifier: Apache-2.0
#pragma once
// The TEMP tables explain builds once per run on its read-only connection
// (src/analyze/rule_context.h says what each holds: baseline, slow, firsts,
// gpu_slots), and the reads of the whole-file summary. explain computes the
// values; the tables and their SQL are the store's.
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "causeway/store/sqlite.h"
#include "causeway/store/window.h"

namespace causeway::store {

// The first and last ts_ns over the tables whose rows are the traced
// processes' activity (the model's bounds_window); none in an empty file.
std::optional<std::pair<int64_t, int64_t>> activity_bounds(Connection& db);

using CallKey = std::tuple<int64_t, int64_t, int64_t>;  // pid, op_id, kernel_id (-1: none)

// Drops the tables of an earlier explain on this connection and creates
// `baseline` with the launches counted in the kernel (--launch-sampling):
// their percentiles from the log2 buckets (linear inside the bucket holding
// the rank), max from the kept rows, since those rows are a biased sample.
void create_launch_baselines(Connection& db, const Window& w);
// The keys `baseline` holds.
std::set<CallKey> baseline_keys(Connection& db);

// Each recorded call in the window that has a baseline: CUDA/HIP calls but
// a framework's tensor allocations (memory.cpp's level), then NCCL calls.
struct BaselineCall {
  CallKey key;
  int64_t dur_ns = 0, ts_ns = 0;
  std::optional<int64_t> stack_id;
  int64_t flags = 0;
  bool cuda = false;  // false: NCCL, which has baselines only
};
void each_baseline_call(Connection& db, const Window& w, const std::function<void(const BaselineCall&)>& f);

struct BaselineRow {
  CallKey key;
  int64_t count = 0, p50 = 0, p95 = 0, p99 = 0, max_ns = 0, total_ns = 0;
};
struct FirstCall {
  CallKey key;
  int64_t ts_ns = 0, dur_ns = 0;
  std::optional<int64_t> stack_id;
};
struct GpuSlot {
  int64_t b = 0;  // ts_ns / 100 ms
  int64_t pid = 0, n = 0;
};
// Creates `firsts` and `gpu_slots` with these rows and adds the recorded
// calls' rows to `baseline`, in one transaction, then indexes `baseline`.
void write_call_tables(Connection& db, const std::vector<FirstCall>& firsts, const std::vector<GpuSlot>& slots,
                       const std::vector<BaselineRow>& baselines);

// Creates `slow`: calls in the window at least `factor` x their baseline's
// p50 and `min_excess_ns` above it, of baselines with `min_calls` or more.
void create_slow_table(Connection& db, const Window& w, int factor, int64_t min_excess_ns, int64_t min_calls);

// The whole-file summary.
int64_t rows_in_window(Connection& db, const std::string& table, const Window& w);
// The rows of a record family's table (include/causeway/model/) in the window.
template <typename Family>
int64_t rows_in_window(Connection& db, const Window& w) {
  return rows_in_window(db, std::string(Family::kTable.name), w);
}
std::vector<std::pair<int64_t, int64_t>> baseline_calls_by_op(Connection& db);  // (op_id, calls)
int64_t baseline_processes(Connection& db);
int64_t slow_call_count(Connection& db);
// The (pid, op_id, kernel_id) groups of slow calls by their excess over p50, most first.
std::vector<CallKey> slowest_groups(Connection& db, int limit);
// Records lost or shed, per drop source (sources with none left out).
std::vector<std::pair<std::string, int64_t>> drops_by_source(Connection& db);
// Calls dropped as counted per op (op_counts.dropped), all ops together.
int64_t op_counts_dropped(Connection& db);

// One (pid, op[, kernel]) as `baseline` and `slow` hold it; over kernels
// when no kernel is given: counts add up, percentiles are the largest.
struct BaselineOf {
  int64_t calls = 0, p50 = 0, p99 = 0, max_ns = 0, total_ns = 0;
};
BaselineOf baseline_of(Connection& db, uint32_t pid, int64_t op_id, std::optional<int64_t> kernel_id);
struct SlowOf {
  int64_t calls = 0, total_ns = 0;
  double mean_ratio = 0;  // slow call over its p50, on average
  int64_t first_ts_ns = 0, last_ts_ns = 0;
};
SlowOf slow_of(Connection& db, uint32_t pid, int64_t op_id, std::optional<int64_t> kernel_id);
// The op's own p50 in the process (0: none); the mean p50 of the ops of its
// class there, weighed by calls (0: none).
int64_t baseline_p50(Connection& db, uint32_t pid, int64_t op_id);
int64_t baseline_class_p50(Connection& db, uint32_t pid, const std::string& class_op_ids);

// Slow calls per process, by their excess over p50, most first.
struct SlowByProcess {
  uint32_t pid = 0;
  int64_t calls = 0, excess_ns = 0;
};
std::vector<SlowByProcess> slow_by_process(Connection& db);
// The op of the process's slow calls with the most excess (0: none).
int64_t slowest_op(Connection& db, uint32_t pid);

}  // namespace causeway::store
