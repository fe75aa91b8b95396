// SPDX-License-Identifier: Apache-2.0
#pragma once
// What explain answers with: ranked causal chains, symptom -> evidence ->
// root cause -> recommendation, each with the numbers behind it.
#include <nlohmann/json.hpp>

#include "causeway/analyze/account.h"
#include "causeway/analyze/critical_path.h"
#include "causeway/analyze/frame.h"
#include "causeway/analyze/memory.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace causeway::analyze {

// CRITICAL: the job fails or is about to (failing calls, out of memory, a
// faulty GPU, a hung collective); ranked above every performance chain.
enum class Severity { Low = 0, Medium = 1, High = 2, Critical = 3 };
std::string_view severity_name(Severity s);

// The analysed interval: [from_ns, to_ns), optionally one process.
struct Window {
  int64_t from_ns = 0;
  int64_t to_ns = 0;
  std::optional<uint32_t> pid;
  int64_t span_ns() const { return to_ns > from_ns ? to_ns - from_ns : 0; }
};

// Which calls were slow, and by how much, against their own baseline.
struct Symptom {
  uint32_t pid = 0;
  std::string comm;
  uint32_t tid = 0;           // chains on one thread's account: the thread
  std::string thread;         // ... and its name
  std::string op;
  std::string kernel;         // launches only
  int64_t calls = 0;          // calls of this op in the window
  int64_t slow_calls = 0;     // calls far above their baseline
  int64_t p50_ns = 0, p99_ns = 0, max_ns = 0;
  double slower_x = 0;        // mean slow call / baseline p50
  double wall_share = 0;      // slow calls' (else all calls') time / window
  int64_t first_ts_ns = 0, last_ts_ns = 0;  // of the slow calls
  // Chains whose symptom is not a call's latency (failures, memory): the
  // symptom in words, printed instead of the latency figures.
  std::string summary;
};

// One fact supporting a chain: a readable line (numbers first) and the same
// numbers for --json.
struct Evidence {
  std::string text;
  nlohmann::json data = nlohmann::json::object();
};

struct CausalChain {
  Severity severity = Severity::Low;
  std::string root_cause;     // stable snake_case id, e.g. cpu_contention
  Symptom symptom;
  std::vector<Evidence> evidence;
  std::string recommendation;
  std::optional<UserFrame> frame;
  std::string no_frame_reason;  // why there is no frame, when there is none
  int64_t impact_ns = 0;      // time the cause cost: ranks chains of one severity
  // What the rule measured and where it fires (an account rule: the part's
  // share of the judged time; 0 when the rule has no single share): the
  // margin share - threshold says how near the cut a chain is.
  double share = 0, threshold = 0;
  // A chain of another cause on the same process that was within the noise
  // of this one, ranked after it by specificity (engine.cpp): its root cause.
  std::string close_to;
};

// The data the answer rests on.
struct DataSummary {
  int64_t calls = 0;          // CUDA/HIP calls in the window
  int64_t nccl_calls = 0;
  int64_t offcpu_intervals = 0;
  int64_t io_requests = 0;
  int64_t tcp_retransmits = 0;
  int64_t reclaims = 0;
  int64_t processes = 0;      // distinct pids with calls
  int64_t slow_calls = 0;     // calls far above their own baseline, explained or not
  std::vector<Symptom> slowest;  // the (process, op, kernel) groups that lost the most, at most 10
  int64_t drops = 0;          // records lost (drops table + op_counts.dropped)
  std::map<std::string, int64_t> drops_by_source;
  int64_t shed = 0;           // rows of fast calls shed under overload (planned; calls counted)
  int64_t unprobed_returns = 0;  // tensor allocations returned through a call site not yet probed
  std::vector<std::string> rules_failed;  // "rule: why" for each rule that could not run on this file
  // No event at all in the file (a trace whose filters matched nothing):
  // how each session was taken, so the answer can name its filters.
  bool empty = false;
  std::vector<std::string> traced_by;
};

struct Explanation {
  std::string db_path;
  Window window;
  DataSummary data;
  std::vector<ThreadAccount> accounts;  // each dispatcher thread's time, busiest first
  std::vector<ProcessPath> paths;       // each process's critical path
  std::vector<ProcessMemory> memory;    // GPU memory per process, most held first
  std::vector<CausalChain> chains;      // most severe first
};

}  // namespace causeway::analyze
