/* SPDX-License-Identifier: GPL-2.0-only */
/* CPython frame capture at the moment of a call (DESIGN.md §6). */
#ifndef CAUSEWAY_PYSTACK_BPF_H
#define CAUSEWAY_PYSTACK_BPF_H

/* Returns 1 when a CW_EV_PYSTACK record for this call was emitted. */
static __always_inline int cw_capture_pystack(struct pt_regs *ctx, __u32 tgid, __u32 tid, __u64 ts)
{
	return 0;
}

#endif
