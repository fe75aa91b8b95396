// SPDX-License-Identifier: Apache-2.0
// The library-call record is shared with bpf/libcall.bpf.c byte for byte: a
// change to include/causeway/events.h that moves a field fails the build
// here. Every other family checks its own record in its header
// (include/causeway/model/).
#include <cstddef>

#include "causeway/events.h"

static_assert(sizeof(cw_header) == 32);
static_assert(offsetof(cw_call_event, dur_ns) == 32);
static_assert(offsetof(cw_call_event, args) == 56);
static_assert(offsetof(cw_call_event, stack) == 104);
static_assert(offsetof(cw_call_event, deref) == 136);
static_assert(offsetof(cw_call_event, stack_hash) == 216);
static_assert(offsetof(cw_call_event, last_launch_ts) == 224);
static_assert(sizeof(cw_call_event) == 240);
