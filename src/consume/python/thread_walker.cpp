// SPDX-License-Identifier: Apache-2.0
#include "causeway/consume/python/thread_walker.h"

namespace causeway::consume::python {

namespace {

constexpr int kMaxThreads = 4096;  // thread states looked at (the kernel's CW_PY_MAX_THREADS order)
constexpr int kMaxWalk = 256;      // frames walked, shims included

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v;
  h *= 0x9e3779b97f4a7c15ULL;
  return h ^ (h >> 29);
}

}  // namespace

bool walk_python_thread(const discover::PythonRuntime& rt, ProcessMemory& mem, uint64_t thread_id,
                        cw_pystack_event& e) {
  const cw_py_proc& p = rt.bpf;
  if (p.flags & CW_PY_MATCH_PTHREAD) return false;
  auto ptr = [&](uint64_t addr) {
    uint64_t v = 0;
    return addr && mem.read(addr, &v, sizeof(v)) ? v : 0;
  };
  uint64_t ts = ptr(ptr(p.runtime + p.rt_interp_head) + p.is_threads_head), found = 0;
  for (int i = 0; ts && i < kMaxThreads && !found; i++, ts = ptr(ts + p.ts_next))
    if (ptr(ts + p.ts_thread_id) == thread_id) found = ts;
  if (!found) return false;
  uint64_t frame = ptr(found + p.ts_frame);
  if (p.cframe_frame != CW_PY_NO_FIELD) frame = ptr(frame + p.cframe_frame);
  uint32_t n = 0, mask = 0;
  for (int i = 0; frame && i < kMaxWalk && n < CW_PY_MAX_FRAMES; i++) {
    const uint64_t here = frame;
    frame = ptr(here + p.fr_previous);
    if (p.fr_owner != CW_PY_NO_FIELD) {
      uint8_t owner = 0;
      mem.read(here + p.fr_owner, &owner, 1);
      if (owner >= p.owner_shim) {  // a C-stack shim: the frame inside it began an eval-loop invocation
        if (n > 0) mask |= 1u << (n - 1);
        continue;
      }
    }
    uint64_t code = ptr(here + p.fr_code);
    if (p.flags & CW_PY_TAGGED_CODE) code &= ~7ULL;
    if (!code) break;
    e.code[n] = code;
    if (p.flags & CW_PY_LASTI_INDEX) {
      int32_t lasti = -1;
      mem.read(here + p.fr_instr, &lasti, sizeof(lasti));
      e.lasti[n] = lasti < 0 ? 0xffffffffu : uint32_t(lasti) * 2;
      mask |= 1u << n;
    } else {
      e.lasti[n] = uint32_t(ptr(here + p.fr_instr) - code - p.co_adaptive);
      if (p.fr_is_entry != CW_PY_NO_FIELD) {
        uint8_t entry = 0;
        mem.read(here + p.fr_is_entry, &entry, 1);
        if (entry) mask |= 1u << n;
      }
    }
    uint32_t first = 0;
    mem.read(code + p.co_firstlineno, &first, sizeof(first));
    e.firstlineno[n] = first;
    n++;
  }
  if (n == 0) return false;
  mask |= 1u << (n - 1);  // the outermost frame closes an eval-loop invocation
  e.nframes = n;
  e.entry_mask = mask;
  e.native_n = 0;
  e.nmodules = 0;
  e.py_version = uint32_t(rt.major << 8 | rt.minor);
  // Seeded apart from the kernel's hashes (bpf/pystack.bpf.h cw_stack_hash).
  uint64_t h = mix(0x5eed0f5c4a11ULL, rt.pid);
  h = mix(h, (uint64_t(n) << 32) | mask);
  for (uint32_t i = 0; i < n; i++) h = mix(mix(h, e.code[i]), e.lasti[i]);
  e.hash = h ? h : 1;
  return true;
}

}  // namespace causeway::consume::python
