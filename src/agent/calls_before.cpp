// SPDX-License-Identifier: Apache-2.0
#include "calls_before.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>

#include "causeway/common/op_table.h"
#include "causeway/common/time.h"
#include "causeway/consume/python/thread_walker.h"
#include "causeway/discover/libraries.h"
#include "causeway/discover/proc_maps.h"
#include "causeway/discover/stack_scan.h"

namespace causeway {

namespace {

constexpr size_t kStackBytes = 256 << 10;  // a stack's depth read: CUDA's and Python's frames sit well inside
constexpr int kSampleMs = 20;              // waiting for one sample of a running thread

// The thread's id in its own pid namespace (what CPython stored).
uint64_t tid_in_namespace(uint32_t pid, uint32_t tid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/status");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("NSpid:", 0) == 0) {
      auto last = line.find_last_of(" \t");
      return std::strtoull(line.c_str() + last + 1, nullptr, 10);
    }
  return tid;
}

// A thread sampled while it ran is inside a GPU call only if it runs the
// GPU libraries' code, or the C library's and the kernel's that they call
// (a poll loop): one running Python or framework code is between calls, and
// a return address on its stack is a stale one.
bool runs_call_code(const std::vector<discover::MappedRegion>& maps, uint64_t pc) {
  for (const auto& r : maps) {
    if (pc < r.start || pc >= r.end) continue;
    std::string_view name = r.path;
    if (auto slash = name.rfind('/'); slash != std::string_view::npos) name.remove_prefix(slash + 1);
    return discover::library_kind_of(r.path) || name == "[vdso]" || name.starts_with("libc.so") ||
           name.starts_with("libc-") || name.starts_with("libpthread") || name.starts_with("ld-linux");
  }
  return false;
}

}  // namespace

uint64_t python_stack_now(uint32_t pid, uint32_t tid, const discover::PythonRuntime& rt,
                          consume::StackResolver& resolver, model::Batch& b,
                          std::unique_ptr<consume::python::ProcessMemory>& mem) {
  if (!mem) mem = consume::python::open_process_memory(pid);
  if (!mem) return 0;
  auto e = std::make_unique<cw_pystack_event>();
  if (!consume::python::walk_python_thread(rt, *mem, tid_in_namespace(pid, tid), *e)) return 0;
  e->hdr.pid = pid;
  e->hdr.tid = tid;
  resolver.on_pystack(*e, b);
  return e->hash;
}

size_t CallsBeforeTrace::scan(uint32_t pid, const discover::PythonRuntime* rt, consume::StackResolver* resolver,
                              model::Batch& b, int64_t now_ns) {
  const auto code = discover::probed_code(pid);
  if (code.empty()) return 0;
  const auto maps = discover::read_proc_maps(pid);  // the process's, once for all its threads
  std::unique_ptr<consume::python::ProcessMemory> mem;
  size_t found = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    const uint32_t tid = uint32_t(std::strtoul(entry.path().filename().c_str(), nullptr, 10));
    if (!tid) continue;
    std::string why;
    auto snap = discover::snapshot_thread(pid, tid, kStackBytes, kSampleMs, &why);
    if (!snap) {
      spdlog::debug("pid {} thread {}: its stack was not read: {}", pid, tid, why);
      continue;
    }
    if (snap->running && !runs_call_code(maps, snap->pc)) continue;
    auto op = discover::call_on_stack(*snap, code);
    const OpSpec* spec = op ? find_op(*op) : nullptr;
    if (!spec) continue;
    Call c;
    c.pid = pid;
    c.tid = tid;
    c.op_id = *op;
    c.sp = snap->sp;
    c.running = snap->running;
    c.entered_ns = now_ns;
    // Asleep in it: it went to sleep when it last ran (a wait that wakes to
    // poll has run since: then only the look bounds it).
    if (!snap->running)
      if (auto ago = discover::last_ran_ns_ago(pid, tid)) c.entered_ns = now_ns - *ago, c.aged = true;
    if (rt && resolver)
      if (const uint64_t hash = python_stack_now(pid, tid, *rt, *resolver, b, mem))
        c.stack_id = resolver->stack_for(pid, hash);
    spdlog::info("pid {} thread {}: in {} since before the trace began{}", pid, tid, spec->name,
                 c.aged ? " (asleep in it for " + std::to_string((now_ns - c.entered_ns) / kNsPerMs) + " ms)" : "");
    calls_.push_back(c);
    found++;
  }
  return found;
}

void CallsBeforeTrace::recheck() {
  std::vector<Call> still;
  std::vector<discover::CodeRange> code;
  std::vector<discover::MappedRegion> maps;
  uint32_t code_pid = 0;  // whose code and maps are read (calls come grouped by process)
  for (const Call& c : calls_) {
    auto snap = discover::snapshot_thread(c.pid, c.tid, kStackBytes, kSampleMs);
    if (!snap) continue;  // gone
    if (!snap->running && snap->sp == c.sp) {  // asleep where it was
      still.push_back(c);
      continue;
    }
    if (code_pid != c.pid)
      code = discover::probed_code(c.pid), maps = discover::read_proc_maps(c.pid), code_pid = c.pid;
    if (snap->running && !runs_call_code(maps, snap->pc)) continue;  // between calls: it returned
    // Woken, or spinning: its call is still the one on its stack (a poll
    // loop inside it moves only the frames below).
    if (auto op = discover::call_on_stack(*snap, code); op && *op == c.op_id) still.push_back(c);
  }
  calls_ = std::move(still);
}

}  // namespace causeway
