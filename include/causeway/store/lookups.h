// SPDX-License-Identifier: Apache-2.0
#pragma once
// The small lookups explain's rules make of a trace over and over: names
// (ops, kernels, processes, threads), what the file's schema has, the launch
// windows, a process's span, the GPU's busy share, a thread's CPU samples.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "causeway/store/sqlite.h"
#include "causeway/store/window.h"

namespace causeway::store {

// Every op the file names: (id, name).
std::vector<std::pair<int64_t, std::string>> op_names(Connection& db);
// A kernel's name; "" when the id is unknown.
std::string kernel_name(Connection& db, int64_t kernel_id);
// A process's command name in the latest session that saw it; "" when unknown.
std::string process_comm(Connection& db, uint32_t pid);
// The same in one session.
std::string process_comm(Connection& db, int64_t session, uint32_t pid);
// A thread's name at `at`: its latest name by then, else the first after (a
// thread of a job already running is named when its process is first
// traced); "" when it has none.
std::string thread_comm(Connection& db, int64_t session, uint32_t pid, uint32_t tid, int64_t at);
// The process started a second or more before the session that traced it.
bool started_before_trace(Connection& db, uint32_t pid);

// The processes of the agents that took the file's traces (sessions.agent_pid,
// schema 24; none in older files): causeway's own threads run beside the
// traced ones, and explain never names it as a neighbour.
std::set<uint32_t> tracer_pids(Connection& db);
// The same as an SQL list ("0" when none is known).
std::string tracer_pids_sql(Connection& db);

// The file's table has this column (traces of older schemas lack later ones).
bool has_column(Connection& db, const std::string& table, const std::string& column);
// The file has a table (or view) of this name.
bool has_table(Connection& db, const std::string& name);
// The file has a record family's table (include/causeway/model/; older
// schemas lack later families): `has_table<model::CgroupCpuSamples>(db)`.
template <typename Family>
bool has_table(Connection& db) {
  return has_table(db, std::string(Family::kTable.name));
}
// Off-CPU intervals carry the stack their thread went to sleep with (not in
// traces before schema 15).
bool offcpu_has_stacks(Connection& db);

// When launches were probed (trace --launch-duty), by session then time;
// trap_ns: none in traces before schema 20. Empty before schema 9.
struct LaunchWindowRow {
  int64_t session = 0, from_ns = 0, to_ns = 0;
  std::optional<int64_t> trap_ns;
};
std::vector<LaunchWindowRow> launch_windows(Connection& db);

// The longest dur_ns of an interval table's rows (offcpu_events, reclaims,
// io_requests, ...) in the window; 0 when none.
int64_t longest_interval_ns(Connection& db, const std::string& table, const Window& w);
// The longest off-CPU interval in the window by its state (CW_STATE_*): a
// join on one state's intervals is bounded by that state's longest, not by a
// thread asleep for the whole trace.
std::map<int, int64_t> longest_offcpu_by_state(Connection& db, const Window& w);
template <typename Family>
int64_t longest_interval_ns(Connection& db, const Window& w) {
  return longest_interval_ns(db, std::string(Family::kTable.name), w);
}
// A process's CUDA calls in the window: first start, last end; none without calls.
std::optional<std::pair<int64_t, int64_t>> cuda_call_span(Connection& db, const Window& w, uint32_t pid);

// NVML's utilisation readings near [from, to] (0..100), each the share of
// the driver's period that ended at ts_ns: the process's own SM share on its
// GPUs (process samples), or the busy share of the GPUs it was seen on, else
// of every GPU sampled. Readings up to 2 s either side come too: the first
// one inside covers time before `from`, and the one after `to` some of it.
struct UtilReading {
  int64_t ts_ns = 0;
  int gpu = 0;
  double util = 0;
};
std::vector<UtilReading> process_sm_readings(Connection& db, int64_t session, uint32_t pid, int64_t from, int64_t to);
std::vector<UtilReading> gpus_util_readings(Connection& db, int64_t session, uint32_t pid, int64_t from, int64_t to);

// A thread's on-CPU sample rows (per second, from ts_ns) in [from, to);
// only those outside traced calls when outside_calls. stack_id -1: none.
struct CpuSampleRow {
  int64_t ts_ns = 0, stack_id = -1, samples = 0;
};
void each_cpu_sample(Connection& db, int64_t session, uint32_t tid, int64_t from, int64_t to, bool outside_calls,
                     const std::function<void(const CpuSampleRow&)>& f);

// The innermost frame of the most frequent stack among those the SELECT
// `stack_ids_sql` yields (a column stack_id): a Python one, user code before
// library code; or, for a program with no Python, a native one of its own
// code (no traced API, runtime or GPU library, unnamed address). line 0: none.
struct TopFrame {
  std::string func, file;
  int64_t line = 0;
};
std::optional<TopFrame> top_python_frame(Connection& db, const std::string& stack_ids_sql);
std::optional<TopFrame> top_native_frame(Connection& db, const std::string& stack_ids_sql);

}  // namespace causeway::store
