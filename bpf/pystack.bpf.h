/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * CPython frame capture at the moment of a call (DESIGN.md §6, docs/python.md).
 *
 * Included by libcall.bpf.c after its ring buffer. For a rare call (or a slow
 * launch, at return) this emits one cw_pystack_event before the call record:
 * the (code object, instruction offset) pairs of the calling thread's Python
 * frames and the native user stack. Names, files and lines are resolved in
 * user space from the code objects, cached per code object.
 *
 * Safety: every read is a bpf_probe_read_user that may fail (then the walk
 * stops), every loop has a constant bound, and nothing read here is trusted by
 * user space: a code object that does not validate there is dropped.
 */
#ifndef CAUSEWAY_PYSTACK_BPF_H
#define CAUSEWAY_PYSTACK_BPF_H

/* Python frames and native stacks on rare calls; user space may turn either off. */
const volatile __u8 pystack_python = 1;
const volatile __u8 pystack_native = 1;

/* Threads of one interpreter searched for the calling thread's state. */
#define CW_PY_MAX_THREADS 64
/* Frames walked (shim frames are walked but not stored). */
#define CW_PY_MAX_WALK 40

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);     /* tgid */
	__type(value, struct cw_py_proc);
} py_procs SEC(".maps");

/* The record is built here, then copied into the ring buffer: the walk runs
 * in bpf_loop callbacks, which cannot hold a ring-buffer reservation. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cw_pystack_event);
} py_scratch SEC(".maps");

/* Walk state shared with the bpf_loop callbacks. bpf_loop keeps verification
 * to one pass over each loop body (a plain loop of this shape exceeds the
 * verifier's budget: every iteration differs in the frame index). */
struct cw_py_walk {
	struct cw_py_proc p;    /* a copy: scalars only */
	__u64 key;              /* the thread id CPython stored for this thread */
	__u64 cur;              /* current thread state / frame */
	__u64 found;
	__u32 n;                /* frames stored */
	__u32 mask;             /* entry_mask being built */
};

static __always_inline __u64 cw_py_read_ptr(__u64 addr)
{
	__u64 v = 0;

	if (!addr || bpf_probe_read_user(&v, sizeof(v), (void *)addr))
		return 0;
	return v;
}

/* The id CPython stored for this thread: the tid as the process sees it
 * (its pid namespace), or pthread_self() for 3.10 (the x86-64 TCB address,
 * which is the fs base). */
static __always_inline __u64 cw_py_thread_key(const struct cw_py_proc *pp, __u32 tid)
{
	if (pp->flags & CW_PY_MATCH_PTHREAD) {
#if defined(__TARGET_ARCH_x86)
		struct task_struct *t = (struct task_struct *)bpf_get_current_task();

		return BPF_CORE_READ(t, thread.fsbase);
#else
		return 0;
#endif
	}
	if (pp->pidns_ino) {
		struct bpf_pidns_info ns = {};

		if (bpf_get_ns_current_pid_tgid(pp->pidns_dev, pp->pidns_ino, &ns, sizeof(ns)))
			return 0;
		return ns.pid;
	}
	return tid;
}

static long cw_py_thread_step(__u32 i, void *arg)
{
	struct cw_py_walk *w = arg;

	if (!w->cur)
		return 1;
	if (cw_py_read_ptr(w->cur + w->p.ts_thread_id) == w->key) {
		w->found = w->cur;
		return 1;
	}
	w->cur = cw_py_read_ptr(w->cur + w->p.ts_next);
	return 0;
}

static long cw_py_frame_step(__u32 i, void *arg)
{
	struct cw_py_walk *w = arg;
	struct cw_pystack_event *e;
	__u32 zero = 0, n = w->n;
	__u64 frame = w->cur, code;
	__u8 owner = 0, is_entry = 0;

	if (!frame)
		return 1;
	w->cur = cw_py_read_ptr(frame + w->p.fr_previous);
	if (w->p.fr_owner != CW_PY_NO_FIELD) {
		bpf_probe_read_user(&owner, 1, (void *)(frame + w->p.fr_owner));
		if (owner >= w->p.owner_shim) {
			/* A C-stack shim: the Python frame inside it was the
			 * first one of its eval-loop invocation. */
			if (n > 0 && n <= CW_PY_MAX_FRAMES)
				w->mask |= 1u << (n - 1);
			return 0;
		}
	}
	e = bpf_map_lookup_elem(&py_scratch, &zero);
	if (!e || n >= CW_PY_MAX_FRAMES)
		return 1;
	code = cw_py_read_ptr(frame + w->p.fr_code);
	if (w->p.flags & CW_PY_TAGGED_CODE)
		code &= ~7ULL;
	if (!code)
		return 1;
	e->code[n] = code;
	if (w->p.flags & CW_PY_LASTI_INDEX) {
		__s32 lasti = -1;

		bpf_probe_read_user(&lasti, sizeof(lasti), (void *)(frame + w->p.fr_instr));
		e->lasti[n] = lasti < 0 ? 0xffffffffu : (__u32)lasti * 2;
		w->mask |= 1u << n;     /* 3.10: one eval call per frame */
	} else {
		__u64 instr = cw_py_read_ptr(frame + w->p.fr_instr);

		e->lasti[n] = (__u32)(instr - code - w->p.co_adaptive);
		if (w->p.fr_is_entry != CW_PY_NO_FIELD) {
			bpf_probe_read_user(&is_entry, 1, (void *)(frame + w->p.fr_is_entry));
			if (is_entry)
				w->mask |= 1u << n;
		}
	}
	w->n = n + 1;
	return 0;
}

/* Fills e->nframes, code, lasti and entry_mask (e is the scratch record). */
static __always_inline void cw_py_walk(const struct cw_py_proc *pp, __u32 tid,
				       struct cw_pystack_event *e)
{
	struct cw_py_walk w = {};
	__u64 interp;

	w.p = *pp;
	w.key = cw_py_thread_key(pp, tid);
	if (!w.key)
		return;
	interp = cw_py_read_ptr(pp->runtime + pp->rt_interp_head);
	if (!interp)
		return;
	w.cur = cw_py_read_ptr(interp + pp->is_threads_head);
	bpf_loop(CW_PY_MAX_THREADS, cw_py_thread_step, &w, 0);
	if (!w.found)
		return;
	w.cur = cw_py_read_ptr(w.found + pp->ts_frame);
	if (pp->cframe_frame != CW_PY_NO_FIELD)
		w.cur = cw_py_read_ptr(w.cur + pp->cframe_frame);
	bpf_loop(CW_PY_MAX_WALK, cw_py_frame_step, &w, 0);
	/* The outermost frame always closes an eval-loop invocation. */
	if (w.n > 0 && w.n <= CW_PY_MAX_FRAMES)
		w.mask |= 1u << (w.n - 1);
	e->nframes = w.n;
	e->entry_mask = w.mask;
}

/* Returns 1 when a CW_EV_PYSTACK record for this call was emitted. */
static __always_inline int cw_capture_pystack(struct pt_regs *ctx, __u32 tgid, __u32 tid, __u64 ts)
{
	struct cw_py_proc *pp = NULL;
	struct cw_pystack_event *e;
	__u32 zero = 0;
	long got;

	if (pystack_python)
		pp = bpf_map_lookup_elem(&py_procs, &tgid);
	if (!pp && !pystack_native)
		return 0;
	e = bpf_map_lookup_elem(&py_scratch, &zero);
	if (!e)
		return 0;
	cw_fill_header(&e->hdr, CW_EV_PYSTACK, ts, tgid, tid);
	e->nframes = 0;
	e->py_version = 0;
	e->entry_mask = 0;
	e->native_n = 0;
	if (pp) {
		e->py_version = pp->version;
		cw_py_walk(pp, tid, e);
	}
	if (pystack_native) {
		got = bpf_get_stack(ctx, e->native, sizeof(e->native), BPF_F_USER_STACK);
		if (got > 0)
			e->native_n = got / sizeof(__u64);
	}
	if (bpf_ringbuf_output(&libcall_events, e, sizeof(*e), BPF_RB_NO_WAKEUP)) {
		cw_count_drop(CW_DROP_PYSTACK);
		return 0;
	}
	return 1;
}

#endif
