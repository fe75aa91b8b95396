/* SPDX-License-Identifier: GPL-2.0-only */
/* Maps and helpers shared by causeway's BPF programs. */
#ifndef CAUSEWAY_COMMON_BPF_H
#define CAUSEWAY_COMMON_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "causeway/events.h"
#include "causeway/model/drops.h"
#include "causeway/model/offcpu.h"
#include "causeway/model/processes.h"
#include "causeway/model/stacks.h"

char LICENSE[] SEC("license") = "GPL";

/* libbpf 1.1 (Debian 12) has no PT_REGS_PARM6. */
#ifndef PT_REGS_PARM6
#if defined(__TARGET_ARCH_x86)
#define PT_REGS_PARM6(x) ((x)->r9)
#elif defined(__TARGET_ARCH_arm64)
#define PT_REGS_PARM6(x) (((const struct user_pt_regs *)(x))->regs[5])
#endif
#endif

/* 0: every process that calls a traced library is traced (and auto-added to
 * traced_tgids for the host probes); 1: only tgids user space put in
 * traced_tgids (--pid/--comm). Set before load so the verifier prunes. */
const volatile __u32 filter_tgids = 0;
/* --cgroup: only tasks in this cgroup (id), 0 = any. */
const volatile __u64 target_cgroup = 0;

/* Shared between the libcall and host skeletons (user space reuses the fd). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);     /* tgid */
	__type(value, __u8);
} traced_tgids SEC(".maps");

/* Each traced Python process's interpreter layout (user space fills it,
 * src/attach/python_process.cpp): the stack walker's offsets, and where the
 * interpreter lock is. Shared between the skeletons like traced_tgids. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);     /* tgid */
	__type(value, struct cw_py_proc);
} py_procs SEC(".maps");

/* The Python stack each traced Python thread last went to sleep in, taken
 * by the libcall skeleton at the switch and read by the host skeleton's
 * off-CPU record when the thread runs again (shared like traced_tgids). */
/* struct cw_wait_stack: include/causeway/model/offcpu.h */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);     /* tid */
	__type(value, struct cw_wait_stack);
} wait_stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CW_DROP_MAX);
	__type(key, __u32);
	__type(value, __u64);
} drops SEC(".maps");

static __always_inline void cw_count_drop(__u32 source)
{
	__u64 *v = bpf_map_lookup_elem(&drops, &source);

	if (v)
		*v += 1;
}

static __always_inline int cw_cgroup_ok(void)
{
	if (!target_cgroup)
		return 1;
	return bpf_get_current_cgroup_id() == target_cgroup;
}

static __always_inline int cw_tgid_traced(__u32 tgid)
{
	return bpf_map_lookup_elem(&traced_tgids, &tgid) != NULL;
}

static __always_inline void cw_fill_header(struct cw_header *h, __u32 type, __u64 ts,
					   __u32 tgid, __u32 tid)
{
	h->type = type;
	h->cpu = bpf_get_smp_processor_id();
	h->ts_ns = ts;
	h->pid = tgid;
	h->tid = tid;
	h->cgroup_id = bpf_get_current_cgroup_id();
}

/* The command line of the current process (its arguments as the kernel
 * keeps them, NUL-separated), cut at CW_ARGS_LEN: read at exec and at a
 * process's first traced call, so that it is known after the process exits. */
static __always_inline void cw_read_args(struct cw_proc_event *e)
{
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	__u64 start = BPF_CORE_READ(t, mm, arg_start);
	__u64 end = BPF_CORE_READ(t, mm, arg_end);
	__u64 n = end > start ? end - start : 0;

	if (n > CW_ARGS_LEN)
		n = CW_ARGS_LEN;
	e->args_len = 0;
	if (n && !bpf_probe_read_user(e->args, n, (void *)start))
		e->args_len = n;
}

#endif
