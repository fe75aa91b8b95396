// SPDX-License-Identifier: Apache-2.0
#pragma once
// The StackResolver of trace. The kernel sends each (process, stack) once,
// the first time it is seen (CW_EV_PYSTACK, with the code objects it holds
// that were not sent before, CW_EV_PYCODE); calls carry the stack's hash.
// A new stack is resolved at once: the Python frames from the code objects,
// the native ones from the files the kernel named, interleaved where the eval
// loop appears, and the result gets one id per distinct content
// (model::Batch::stacks, table stack_frames). A call's stack is then a lookup
// of its hash.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "causeway/consume/python/code_decoder.h"
#include "causeway/consume/python/native_symbolizer.h"
#include "causeway/consume/stack_resolver.h"

namespace causeway::consume::python {

// One Python eval-loop invocation's frames (innermost first); decoded frames only.
using PyGroup = std::vector<model::StackFrame>;

// Native frames with each _PyEval_EvalFrameDefault replaced by the next
// group of Python frames; groups left over (the native walk stopped early)
// follow at the outer end. Frame 0 innermost.
model::Stack interleave(const model::Stack& native, const std::vector<PyGroup>& groups);

// A process's CPython runtime and a reader of its memory; rt empty (why says
// why) when it is not a Python this decoder supports.
struct PythonProcessAccess {
  std::optional<discover::PythonRuntime> rt;
  std::unique_ptr<ProcessMemory> mem;
  std::string why;
};
using PythonProcessOpener = std::function<PythonProcessAccess(uint32_t pid)>;

class CallStackResolver final : public StackResolver {
 public:
  // open_python: how a process's runtime and memory are found when it was
  // not registered (add_python_process); empty = from proc_root
  // (find_python_runtime, /proc/PID/mem). Unit tests and the frame fuzzer
  // pass fake process memory here.
  CallStackResolver(const StackOptions& opts, std::string proc_root = "/proc",
                    PythonProcessOpener open_python = {});
  void on_pycode(const cw_pycode_event& e) override;
  void on_pystack(const cw_pystack_event& e, model::Batch& batch) override;
  std::optional<int64_t> stack_for_call(const cw_call_event& e, model::Batch& batch) override;
  std::optional<int64_t> stack_for(uint32_t pid, uint64_t hash) override;
  void add_python_process(const discover::PythonRuntime& rt) override;
  void remember_process(uint32_t pid) override { native_.remember_process(pid); }
  void remember_file(const std::string& path) override { native_.remember_file(path); }
  void forget_process(uint32_t pid) override;
  const StackCounters& counters() const override { return counters_; }

  // Stacks a process may have (a bound on one process's memory here).
  static constexpr size_t kMaxStacksPerProcess = 1 << 16;

 private:
  struct PyProcess {
    std::optional<discover::PythonRuntime> rt;
    std::unique_ptr<ProcessMemory> mem;  // null: the process could not be opened
    std::unique_ptr<CodeDecoder> decoder;
    std::unordered_map<uint64_t, int64_t> stacks;  // stack hash -> id
  };
  PyProcess& process(uint32_t pid);
  PyProcess& python_of(uint32_t pid);
  // Python frames; codes the decoder could not name go to `missing`.
  std::vector<PyGroup> python_groups(const cw_pystack_event& e, std::vector<uint64_t>& missing);
  void resend(bool code, uint32_t pid, uint64_t id);

  StackOptions opts_;
  std::string proc_root_;
  PythonProcessOpener open_python_;
  std::unordered_map<uint32_t, PyProcess> procs_;
  NativeSymbolizer native_;
  std::unordered_map<std::string, int64_t> ids_;  // stack content -> id
  int64_t next_id_;
  StackCounters counters_;
};

}  // namespace causeway::consume::python
