// SPDX-License-Identifier: Apache-2.0
#pragma once
// The input of fuzz_py_frames, shared with make_fuzz_seeds: a PyFramesHeader,
// then debug_len bytes read as the runtime's _Py_DebugOffsets (3.13+), then
// the traced process's memory, mapped from kImageBase on. The code pointers
// in the header and the object pointers inside the image point into it.
#include <cstdint>

#include "causeway/model/stacks.h"

namespace causeway::fuzz {

struct PyFramesHeader {
  uint8_t minor;      // Python 3.(10 + minor % 6): 3.15 checks the refusal
  uint8_t unused;
  uint16_t debug_len;
  uint32_t tid;
  uint64_t ts_ns;
  // The CW_EV_PYSTACK record's fields, as raw as the ring gives them.
  uint32_t nframes;
  uint32_t entry_mask;
  uint64_t code[CW_PY_MAX_FRAMES];
  uint32_t lasti[CW_PY_MAX_FRAMES];
  uint32_t firstlineno[CW_PY_MAX_FRAMES];
};

constexpr uint64_t kImageBase = 0x10000;
// &PyCode_Type, &PyUnicode_Type, &PyBytes_Type in the fake process.
constexpr uint64_t kCodeType = 0x7000'1000, kStrType = 0x7000'2000, kBytesType = 0x7000'3000;

}  // namespace causeway::fuzz
