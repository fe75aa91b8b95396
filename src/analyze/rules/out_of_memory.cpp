// SPDX-License-Identifier: Apache-2.0
// out_of_memory: allocations that failed for lack of device memory, with what
// the process held at that moment, by the Python line that allocated it.
#include "../rule_context.h"

#include <algorithm>

#include "causeway/common/time.h"

namespace causeway::analyze {

namespace {
std::string holders_words(const std::vector<HeldSite>& holders, size_t n) {
  std::string s;
  for (size_t i = 0; i < holders.size() && i < n; i++) {
    const auto& h = holders[i];
    s += (i ? "; " : "") + format_bytes(uint64_t(h.bytes)) + " at " +
         (h.where.empty() ? std::string("a call with no Python stack") : h.where) + " (" +
         std::to_string(h.allocations) + (h.allocations == 1 ? " allocation)" : " allocations)");
  }
  return s;
}
}  // namespace

std::vector<CausalChain> rule_out_of_memory(const RuleContext& ctx) {
  std::vector<CausalChain> out;
  for (const ProcessMemory& p : ctx.memory) {
    if (p.failures.empty()) continue;
    const AllocFailure& f = p.failures.front();
    int64_t largest = 0;
    for (const auto& x : p.failures) largest = std::max(largest, x.asked);
    CausalChain c;
    c.severity = Severity::Critical;
    c.impact_ns = p.failures_out_of_memory;  // ranks among failures; no time estimate
    c.symptom.pid = p.pid;
    c.symptom.comm = p.comm;
    c.symptom.tid = f.tid;
    c.symptom.op = f.op;
    c.symptom.calls = p.failures_out_of_memory;
    c.symptom.first_ts_ns = f.ts_ns;
    c.symptom.last_ts_ns = p.failures.back().ts_ns;
    c.symptom.summary = std::to_string(p.failures_out_of_memory) + " failed out of memory, asking " +
                        format_bytes(uint64_t(f.asked)) + " while holding " + format_bytes(uint64_t(f.held));
    c.evidence.push_back(
        {std::to_string(p.failures_out_of_memory) + " allocation" + (p.failures_out_of_memory == 1 ? "" : "s") +
             " failed out of memory; the first (" + f.op + ", at " + format_wall_time(f.ts_ns) + ") asked for " +
             format_bytes(uint64_t(f.asked)) + (largest > f.asked ? ", the largest " + format_bytes(uint64_t(largest)) : ""),
         {{"failed", p.failures_out_of_memory}, {"first_ts_ns", f.ts_ns}, {"asked", f.asked}, {"largest_asked", largest},
          {"error", f.ret}}});
    nlohmann::json holders = nlohmann::json::array();
    for (const auto& h : f.holders)
      holders.push_back({{"bytes", h.bytes}, {"allocations", h.allocations}, {"stack_id", h.stack_id}, {"where", h.where}});
    c.evidence.push_back({"at that moment the process held " + format_bytes(uint64_t(f.held)) +
                              " of device memory it allocated while traced: " + holders_words(f.holders, 3),
                          {{"held", f.held}, {"holders", holders}}});
    // The tensors in that memory, by line, when the allocator was traced: what
    // to free; the rest of the pool was reserved and free (its cache).
    if (p.tensors.traced) {
      nlohmann::json th = nlohmann::json::array();
      for (const auto& h : f.tensor_holders)
        th.push_back({{"bytes", h.bytes}, {"allocations", h.allocations}, {"stack_id", h.stack_id}, {"where", h.where}});
      const int64_t cached = std::max<int64_t>(0, f.held - f.tensor_held);
      const double cached_share = f.held ? double(cached) / double(f.held) : 0;
      c.evidence.push_back({"its tensors held " + format_bytes(uint64_t(f.tensor_held)) + ": " +
                                holders_words(f.tensor_holders, 3) + "; " + format_bytes(uint64_t(cached)) +
                                " of the pool was reserved but free (" + fixed1(100 * cached_share) + "%)",
                            {{"tensor_held", f.tensor_held}, {"tensor_holders", th}, {"reserved_free", cached},
                             {"windowed", p.tensors.windowed}}});
      // Would giving the pool's free blocks back have made room? Only the
      // GPU's size says (NVML at that second).
      if (f.gpu_used && f.gpu_total) {
        const int64_t room = std::max<int64_t>(0, *f.gpu_total - *f.gpu_used) + cached;
        const bool helps = cached > 0 && room >= f.asked;
        c.evidence.push_back(
            {helps ? "the GPU's free memory and the pool's free blocks together (" + format_bytes(uint64_t(room)) +
                         ") would have held the request: expandable_segments (or empty_cache() before the step) "
                         "would have made room"
                   : "even with the pool's free blocks returned, " + format_bytes(uint64_t(room)) + " is less than " +
                         format_bytes(uint64_t(f.asked)) + ": the tensors fill the GPU, and neither "
                         "expandable_segments nor empty_cache() would have made room",
             {{"expandable_segments_would_help", helps}, {"room", room}}});
      } else {
        c.evidence.push_back({"whether returning the pool's free blocks would have made room needs the GPU's size "
                              "(no NVML sample at that second)",
                              {{"expandable_segments_would_help", nullptr}}});
      }
    }
    // PyTorch's caching allocator, refused, frees its cache and asks again.
    const AllocFailure& last = p.failures.back();
    if (p.failures.size() > 1 && last.frees_before > 0)
      c.evidence.push_back({"then it freed " + std::to_string(last.frees_before) + " blocks (" +
                                format_bytes(uint64_t(last.freed_before)) + ", its cache) and asked again for " +
                                format_bytes(uint64_t(last.asked)) + ": refused again, holding " +
                                format_bytes(uint64_t(last.held)),
                            {{"frees_before_retry", last.frees_before}, {"freed_before_retry", last.freed_before},
                             {"held_at_retry", last.held}}});
    bool fragmented = false;
    if (f.gpu_used && f.gpu_total) {
      const int64_t free_b = *f.gpu_total - *f.gpu_used;
      fragmented = free_b >= f.asked;
      std::string words = "NVML: " + format_bytes(uint64_t(*f.gpu_used)) + " of " + format_bytes(uint64_t(*f.gpu_total)) +
                          " in use on the GPU at that second";
      if (f.process_used) words += ", " + format_bytes(uint64_t(*f.process_used)) + " by this process";
      if (f.process_used && *f.gpu_used - *f.process_used > *f.gpu_total / 10)
        words += "; other processes held " + format_bytes(uint64_t(*f.gpu_used - *f.process_used));
      if (fragmented)
        words += "; " + format_bytes(uint64_t(free_b)) + " was free, more than asked: the free memory is fragmented "
                 "(or was taken and released around the request)";
      c.evidence.push_back({words, {{"gpu_used", *f.gpu_used}, {"gpu_total", *f.gpu_total},
                                    {"process_used", f.process_used ? nlohmann::json(*f.process_used) : nlohmann::json()},
                                    {"fragmented", fragmented}}});
    }
    c.frame = ctx.top_frame("SELECT " + std::to_string(f.stack_id) + " AS stack_id");
    if (!c.frame) c.no_frame_reason = "the failing allocation has no Python stack (traced with --no-stacks, or not Python)";
    const auto& named = p.tensors.traced && !f.tensor_holders.empty() ? f.tensor_holders : f.holders;
    const std::string top = named.empty() || named[0].where.empty() ? std::string()
                                                                   : " The largest holder is " + named[0].where + ".";
    c.recommendation =
        "Hold less at the failing step." + top +
        " Free what is kept across steps (del, .detach() values kept for logging, no lists of tensors that "
        "keep their graph), a smaller batch, activation checkpointing, or mixed precision" +
        std::string(fragmented ? "; against fragmentation PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" : "") + ".";
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace causeway::analyze
