// SPDX-License-Identifier: Apache-2.0
#pragma once
// GPU memory per process, replayed from the allocations and frees of a trace:
// what is held, by which call site (the Python line), over time; which
// allocations failed and what was held when they did. A failed allocation
// allocates nothing; a free subtracts what its own allocation added (matched
// by address, or by handle for cuMemCreate/cuMemRelease).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace causeway::analyze {

// Memory held by one call site (the allocating call's stack).
struct HeldSite {
  int64_t stack_id = -1;       // -1: no stack captured
  int64_t bytes = 0;
  int64_t allocations = 0;
  std::string where;           // "train.py:57 (step)": the innermost user Python frame, "" when none
  std::vector<int64_t> over_time;  // held at each of kMemorySlices + 1 boundaries of the window
};

struct AllocFailure {
  int64_t ts_ns = 0;
  uint32_t tid = 0;
  std::string op;
  int64_t ret = 0;
  int64_t asked = 0;           // bytes asked for
  int64_t stack_id = -1;
  std::string where;
  int64_t held = 0;            // device memory the process held at that moment (traced)
  std::vector<HeldSite> holders;   // largest first, at most 5
  int64_t frees_before = 0, freed_before = 0;  // frees in the second before (count, bytes)
  // With the framework's allocator traced: what its tensors held then, by
  // line (the segments above are its pool), largest first, at most 5.
  int64_t tensor_held = 0;
  std::vector<HeldSite> tensor_holders;
  // NVML at the nearest sample of that second, when sampled.
  std::optional<int64_t> gpu_used, gpu_total, process_used;
};

constexpr int kMemorySlices = 8;

struct ProcessMemory {
  int64_t session_id = 0;
  uint32_t pid = 0;
  std::string comm;
  // In the window. Device memory (device and managed); pinned host memory is
  // counted apart.
  int64_t allocations = 0, frees = 0, failed = 0;
  int64_t allocated = 0, freed = 0;   // bytes
  int64_t host_allocated = 0;         // pinned host memory allocated (not GPU memory)
  int64_t unmatched_frees = 0;        // frees of memory allocated before the trace (or never seen)
  // Frees after the last GPU work of a process that exited in the window:
  // its teardown, set aside (what it held stays held).
  int64_t exit_frees = 0, exit_freed = 0;
  int64_t held_from = 0, held_to = 0; // held at the window's start and end
  int64_t peak = 0, peak_ts_ns = 0;
  std::vector<int64_t> held_over_time;         // total at each of kMemorySlices + 1 boundaries
  std::vector<int64_t> boundaries_ns;          // those boundaries
  std::vector<bool> slice_calls;               // per slice between them: whether a call of this level fell in it
  std::vector<std::pair<int64_t, int64_t>> timeline;  // (ts, held) after changes, at most ~200 points (peaks kept)
  std::vector<HeldSite> held_by_site;          // at the window's end (or `at`), largest first
  std::vector<AllocFailure> failures;          // out-of-memory failures, in time order (at most 20)
  int64_t failures_out_of_memory = 0;
  std::optional<int64_t> gpu_total;            // NVML: the device's memory
  std::optional<int64_t> nvml_process_max;     // NVML: the most this process was seen using
  // The framework's allocator (PyTorch's caching allocator, where its calls
  // were traced): memory handed to tensors, by the line that asked for it,
  // replayed the same way. The fields above are then what its pool reserved
  // from the driver; reserved - allocated sits in the pool unused.
  struct Tensors {
    bool traced = false;
    // Traced in launch windows only (trace --launch-duty): a tensor whose
    // free fell outside a window still counts as held; exact with `always`.
    bool windowed = false;
    int64_t allocations = 0, frees = 0, allocated = 0, freed = 0;
    int64_t held_from = 0, held_to = 0, peak = 0, peak_ts_ns = 0;
    int64_t exit_frees = 0, exit_freed = 0;             // set aside as above
    std::vector<int64_t> held_over_time;                // at the same boundaries
    // Per slice between those boundaries: whether the allocator's calls were
    // seen in it (windowed: a slice between windows shows no growth, which
    // says nothing); all true when not windowed.
    std::vector<bool> slice_seen;
    std::vector<std::pair<int64_t, int64_t>> timeline;  // (ts, allocated)
    std::vector<HeldSite> held_by_site;                 // largest first
  } tensors;
};

}  // namespace causeway::analyze
