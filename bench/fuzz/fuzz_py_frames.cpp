// SPDX-License-Identifier: Apache-2.0
// Random frame memory -> the user-space half of the Python walker: a
// CW_EV_PYSTACK record (code object pointers, instruction offsets, eval-loop
// boundaries) resolved by CallStackResolver (the resolver `trace` uses)
// against fake process memory, through CodeDecoder (code, str and bytes
// objects, both line-table formats), after python_layout_for has read the
// layout from fuzzed _Py_DebugOffsets (3.13+). Input: py_frames_input.h.
// A kernel copy of a code object (CW_EV_PYCODE) made of the same bytes goes
// through its validation first. Beyond "no crash": a frame comes only from an
// object that validated (line > 0, bounded strings), the same frames under
// another hash get the same stack id, and a hash never sent gets no stack.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "causeway/consume/python/call_stack_resolver.h"
#include "causeway/consume/python/code_decoder.h"
#include "causeway/discover/python_runtime.h"
#include "py_frames_input.h"

namespace {

using causeway::consume::python::CodeDecoder;
using causeway::fuzz::kImageBase;

// The image as the process's only mapping; reads outside it fail, as
// /proc/PID/mem reads of unmapped memory do. Reads the fuzzer's buffer in
// place, so ASan sees any read this check lets past the end.
class ImageMemory final : public causeway::consume::python::ProcessMemory {
 public:
  ImageMemory(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool read(uint64_t addr, void* buf, size_t n) override {
    if (addr < kImageBase) return false;
    uint64_t off = addr - kImageBase;
    if (off > size_ || size_ - off < n) return false;
    std::memcpy(buf, data_ + off, n);
    return true;
  }

 private:
  const uint8_t* data_;
  size_t size_;
};

[[noreturn]] void fail(const std::string& why) {
  std::fprintf(stderr, "fuzz_py_frames: %s\n", why.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  causeway::fuzz::PyFramesHeader h;
  if (size < sizeof h) return 0;
  std::memcpy(&h, data, sizeof h);
  data += sizeof h;
  size -= sizeof h;
  const size_t debug_len = std::min<size_t>(h.debug_len, size);
  const uint8_t* debug = data;
  data += debug_len;
  size -= debug_len;

  causeway::discover::PythonRuntime rt;
  const int minor = 10 + h.minor % 6;
  std::string why;
  if (!causeway::discover::python_layout_for(3, minor, debug_len ? debug : nullptr, debug_len, rt,
                                             &why))
    return 0;
  rt.code_type = causeway::fuzz::kCodeType;
  rt.unicode_type = causeway::fuzz::kStrType;
  rt.bytes_type = causeway::fuzz::kBytesType;

  constexpr uint32_t kPid = 4242;
  causeway::consume::StackOptions opts;
  opts.native = false;  // native frames need a real /proc: the ELF fuzzer covers their symbols
  causeway::consume::python::CallStackResolver resolver(
      opts, "/nonexistent", [&](uint32_t pid) {
        if (pid != kPid) fail("the resolver asked for a process no record named");
        causeway::consume::python::PythonProcessAccess a;
        a.rt = rt;
        a.mem = std::make_unique<ImageMemory>(data, size);
        return a;
      });

  // The stack's hash: any non-zero value (the kernel's never is 0).
  const uint64_t hash = h.ts_ns ? h.ts_ns : 1, other_hash = hash + 1 ? hash + 1 : 2;
  cw_pystack_event e;
  std::memset(&e, 0, sizeof e);
  e.hdr.type = CW_EV_PYSTACK;
  e.hdr.pid = kPid;
  e.hdr.tid = h.tid;
  e.hdr.ts_ns = h.ts_ns;
  e.nframes = h.nframes;
  e.py_version = 3u << 8 | uint32_t(minor);
  std::memcpy(e.code, h.code, sizeof e.code);
  std::memcpy(e.lasti, h.lasti, sizeof e.lasti);
  std::memcpy(e.firstlineno, h.firstlineno, sizeof e.firstlineno);
  e.entry_mask = h.entry_mask;
  e.hash = hash;

  // A kernel copy of a code object made of the image's first bytes: garbage
  // must fail validation, never decode past its buffers.
  cw_pycode_event copy;
  std::memset(&copy, 0, sizeof copy);
  std::memcpy(&copy, data, std::min(size, sizeof copy));
  copy.hdr.type = CW_EV_PYCODE;
  copy.hdr.pid = kPid;
  resolver.on_pycode(copy);

  cw_call_event call;
  std::memset(&call, 0, sizeof call);
  call.hdr.type = CW_EV_CALL;
  call.hdr.pid = kPid;
  call.hdr.tid = h.tid;
  call.hdr.ts_ns = h.ts_ns;
  call.flags = CW_CALL_HAS_PYSTACK;
  call.stack_hash = hash;

  causeway::model::Batch batch;
  resolver.on_pystack(e, batch);
  const auto id = resolver.stack_for_call(call, batch);
  const auto stacks = causeway::model::stacks_in(batch);
  if (id) {
    if (stacks.size() != 1 || stacks[0].first != *id)
      fail("a new stack id without exactly its frames in the batch");
    const auto& frames = stacks[0].second;
    if (frames.empty() || frames.size() > std::min<uint32_t>(h.nframes, CW_PY_MAX_FRAMES))
      fail("more Python frames than the record holds");
    for (const auto& f : frames) {
      if (f.kind != "python") fail("a non-Python frame with native stacks off");
      if (f.line && *f.line <= 0) fail("a frame with line " + std::to_string(*f.line));
      if (f.func.size() > CodeDecoder::kMaxString * 4 + 3 || f.file.size() > CodeDecoder::kMaxString * 4 + 3)
        fail("a name longer than the cap");
    }
  } else if (!stacks.empty()) {
    fail("a stack in the batch for a call that has none");
  }
  // The same frames walked on another thread (another hash): the same id,
  // nothing written again.
  cw_pystack_event other = e;
  other.hdr.tid = h.tid + 1;
  other.hash = other_hash;
  const size_t stacks_before = causeway::model::stacks_in(batch).size();
  resolver.on_pystack(other, batch);
  cw_call_event on_other = call;
  on_other.hdr.tid = other.hdr.tid;
  on_other.stack_hash = other_hash;
  if (resolver.stack_for_call(on_other, batch) != id) fail("the same frames got another stack id");
  if (causeway::model::stacks_in(batch).size() != stacks_before) fail("a known stack was written again");
  cw_call_event unknown = call;
  unknown.stack_hash = other_hash + 1 ? other_hash + 1 : 3;
  if (unknown.stack_hash != hash && resolver.stack_for_call(unknown, batch))
    fail("a call with a hash never sent got a stack");
  resolver.forget_process(kPid);
  return 0;
}
