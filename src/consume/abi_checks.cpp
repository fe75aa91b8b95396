// SPDX-License-Identifier: Apache-2.0
// The event ABI is shared with the BPF programs byte for byte: any change to
// include/causeway/events.h that moves a field must fail the build here.
#include <cstddef>

#include "causeway/events.h"

static_assert(sizeof(cw_header) == 32);
static_assert(offsetof(cw_call_event, dur_ns) == 32);
static_assert(offsetof(cw_call_event, args) == 56);
static_assert(offsetof(cw_call_event, stack) == 104);
static_assert(offsetof(cw_call_event, deref) == 136);
static_assert(offsetof(cw_call_event, stack_hash) == 216);
static_assert(sizeof(cw_call_event) == 224);
static_assert(sizeof(cw_offcpu_event) == 72);
static_assert(sizeof(cw_block_io_event) == 64);
static_assert(sizeof(cw_tcp_retrans_event) == 72);
static_assert(offsetof(cw_proc_event, args) == 128);
static_assert(sizeof(cw_proc_event) == 384);
static_assert(sizeof(cw_reclaim_event) == 48);
static_assert(sizeof(cw_op_stats) == 48);
static_assert(offsetof(cw_pystack_event, code) == 40);
static_assert(offsetof(cw_pystack_event, entry_mask) == 328);
static_assert(offsetof(cw_pystack_event, native) == 336);
static_assert(offsetof(cw_pystack_event, hash) == 848);
static_assert(offsetof(cw_pystack_event, module_of) == 864);
static_assert(offsetof(cw_pystack_event, modules) == 928);
static_assert(sizeof(cw_native_module) == 88);
static_assert(sizeof(cw_pystack_event) == 1632);
static_assert(sizeof(cw_seen_key) == 16);
static_assert(offsetof(cw_pycode_event, name) == 88);
static_assert(offsetof(cw_pycode_event, name_data) == 136);
static_assert(sizeof(cw_pycode_event) == 136 + CW_PYCODE_NAME + CW_PYCODE_FILE + CW_PYCODE_TABLE);
static_assert(sizeof(cw_py_proc) == 80);  // the py_procs map value, filled from user space
