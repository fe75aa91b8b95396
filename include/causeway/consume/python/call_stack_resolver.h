// SPDX-License-Identifier: Apache-2.0
#pragma once
// The StackResolver of trace: pairs each CW_EV_PYSTACK record with its call
// record (same tid, same entry timestamp), decodes the Python frames and the
// native stack, interleaves them where the eval loop appears, and gives each
// distinct stack one id (store::Batch::stacks, table stack_frames).
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
using PyGroup = std::vector<store::StackFrame>;

// Native frames with each _PyEval_EvalFrameDefault replaced by the next
// group of Python frames; groups left over (the native walk stopped early)
// follow at the outer end. Frame 0 innermost.
store::Stack interleave(const store::Stack& native, const std::vector<PyGroup>& groups);

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
  // open_python: how a process's runtime and memory are found; empty = from
  // proc_root (find_python_runtime, /proc/PID/mem). Unit tests and the frame
  // fuzzer pass fake process memory here.
  CallStackResolver(const StackOptions& opts, std::string proc_root = "/proc",
                    PythonProcessOpener open_python = {});
  void on_pystack(const cw_pystack_event& e) override;
  std::optional<int64_t> stack_for_call(const cw_call_event& e, store::Batch& batch) override;
  void forget_process(uint32_t pid) override;

  static constexpr size_t kMaxPending = 8192;

 private:
  struct PyProcess {
    std::optional<discover::PythonRuntime> rt;
    std::unique_ptr<ProcessMemory> mem;
    std::unique_ptr<CodeDecoder> decoder;
  };
  PyProcess& python_of(uint32_t pid);
  std::vector<PyGroup> python_groups(const cw_pystack_event& e);

  StackOptions opts_;
  std::string proc_root_;
  PythonProcessOpener open_python_;
  std::map<std::pair<uint32_t, uint64_t>, cw_pystack_event> pending_;  // (tid, entry ts)
  std::unordered_map<uint32_t, PyProcess> py_;
  NativeSymbolizer native_;
  std::unordered_map<std::string, int64_t> ids_;  // stack content -> id
  int64_t next_id_;
};

}  // namespace causeway::consume::python
