/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Stacks at the moment of a call: CPython frames and the native user stack
 * (docs/python.md). Included by libcall.bpf.c after its ring buffer.
 *
 * For a rare call (or a slow launch, at return) the calling thread's Python
 * frames ((code object, instruction offset) pairs) and its native stack are
 * captured and hashed. A stack is sent to user space once per process, the
 * first time it is seen (stack_seen), as a cw_pystack_event that also names
 * the file of every native frame (bpf_find_vma), and every code object in it
 * that was not sent before is copied (cw_pycode_event, code_seen). Calls
 * carry only the hash. So a loop that calls from the same line a million
 * times sends one stack, and a process that exits right after its call
 * leaves everything needed to name its frames.
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
/* Mappings looked up per new stack (bpf_find_vma): the modules plus a few
 * anonymous regions (JIT code). */
#define CW_MAX_VMA_LOOKUPS 12

/* py_procs (the walker's per-process offsets) is in common.bpf.h: the host
 * programs read the interpreter lock's place from it too. */

/* The record is built here, then copied into the ring buffer: the walk runs
 * in bpf_loop callbacks, which cannot hold a ring-buffer reservation. One
 * slot for the probes, one for the CPU sampler, one for a thread going to
 * sleep: a uprobe program runs with interrupts on (uprobe_multi does not
 * mark the CPU busy), so the sampler's timer interrupt, or a switch, can land
 * in the middle of a probe's walk on the same CPU. */
#define CW_SLOT_PROBE 0
#define CW_SLOT_SAMPLE 1
#define CW_SLOT_WAIT 2
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 3);
	__type(key, __u32);
	__type(value, struct cw_pystack_event);
} py_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 3);
	__type(key, __u32);
	__type(value, struct cw_pycode_event);
} pycode_scratch SEC(".maps");

/* Stacks and code objects already sent, per process. LRU: an evicted entry
 * is only sent again. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct cw_seen_key);
	__type(value, __u8);
} stack_seen SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct cw_seen_key);
	__type(value, __u8);
} code_seen SEC(".maps");

/* Each thread's PyThreadState, once found: checked by one read (its thread
 * id) instead of searching the interpreter's thread list on every capture. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);     /* tid */
	__type(value, __u64);
} py_tstates SEC(".maps");

/* Call sites already walked (cw_capture_pystack_site): a fingerprint of the
 * calling code (the native return address and the top Python frames) to the
 * stack it had. A loop that syncs from one line a million times walks its
 * stack one time in 64, not every time. A site whose walks disagree (two
 * paths that differ below the fingerprinted frames) is walked every time. */
#define CW_SITE_RECHECK 64
#define CW_SITE_AMBIGUOUS 1u
struct cw_site_key {
	__u32 pid;
	__u32 _pad;
	__u64 fp;
};
struct cw_site {
	__u64 stack;
	__u32 hits;
	__u32 flags;
};
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct cw_site_key);
	__type(value, struct cw_site);
} stack_sites SEC(".maps");

/* Walk state shared with the bpf_loop callbacks. bpf_loop keeps verification
 * to one pass over each loop body (a plain loop of this shape exceeds the
 * verifier's budget: every iteration differs in the frame index). */
struct cw_py_walk {
	const struct cw_py_proc *p;  /* py_procs' value (not a copy: the stack is short) */
	__u64 key;              /* the thread id CPython stored for this thread */
	__u64 cur;              /* current thread state / frame */
	__u64 found;
	__u32 n;                /* frames stored */
	__u32 mask;             /* entry_mask being built */
	__u32 slot;             /* CW_SLOT_* of the scratch record */
	__u32 _pad;
};

/* Keeps a bounds-checked index in the register the verifier saw checked
 * (clang may otherwise reuse an unchecked copy). */
#define cw_barrier_var(v) asm volatile("" : "+r"(v))

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
	if (cw_py_read_ptr(w->cur + w->p->ts_thread_id) == w->key) {
		w->found = w->cur;
		return 1;
	}
	w->cur = cw_py_read_ptr(w->cur + w->p->ts_next);
	return 0;
}

static long cw_py_frame_step(__u32 i, void *arg)
{
	struct cw_py_walk *w = arg;
	struct cw_pystack_event *e;
	__u32 slot = w->slot, n = w->n;
	__u64 frame = w->cur, code;
	__u8 owner = 0, is_entry = 0;

	if (!frame)
		return 1;
	w->cur = cw_py_read_ptr(frame + w->p->fr_previous);
	if (w->p->fr_owner != CW_PY_NO_FIELD) {
		bpf_probe_read_user(&owner, 1, (void *)(frame + w->p->fr_owner));
		if (owner >= w->p->owner_shim) {
			/* A C-stack shim: the Python frame inside it was the
			 * first one of its eval-loop invocation. */
			if (n > 0 && n <= CW_PY_MAX_FRAMES)
				w->mask |= 1u << (n - 1);
			return 0;
		}
	}
	e = bpf_map_lookup_elem(&py_scratch, &slot);
	if (!e || n >= CW_PY_MAX_FRAMES)
		return 1;
	code = cw_py_read_ptr(frame + w->p->fr_code);
	if (w->p->flags & CW_PY_TAGGED_CODE)
		code &= ~7ULL;
	if (!code)
		return 1;
	e->code[n] = code;
	if (w->p->flags & CW_PY_LASTI_INDEX) {
		__s32 lasti = -1;

		bpf_probe_read_user(&lasti, sizeof(lasti), (void *)(frame + w->p->fr_instr));
		e->lasti[n] = lasti < 0 ? 0xffffffffu : (__u32)lasti * 2;
		w->mask |= 1u << n;     /* 3.10: one eval call per frame */
	} else {
		__u64 instr = cw_py_read_ptr(frame + w->p->fr_instr);

		e->lasti[n] = (__u32)(instr - code - w->p->co_adaptive);
		if (w->p->fr_is_entry != CW_PY_NO_FIELD) {
			bpf_probe_read_user(&is_entry, 1, (void *)(frame + w->p->fr_is_entry));
			if (is_entry)
				w->mask |= 1u << n;
		}
	}
	w->n = n + 1;
	return 0;
}

/* The thread state found for this thread before, if it still is this
 * thread's (a tid reused, a thread state freed: the id no longer matches). */
static __always_inline __u64 cw_py_tstate(const struct cw_py_proc *pp, __u32 tid, __u64 key)
{
	__u64 *ts = bpf_map_lookup_elem(&py_tstates, &tid);

	if (ts && *ts && cw_py_read_ptr(*ts + pp->ts_thread_id) == key)
		return *ts;
	return 0;
}

/* Fills e->nframes, code, lasti and entry_mask (e is the scratch record of slot). */
static __always_inline void cw_py_walk(const struct cw_py_proc *pp, __u32 tid,
				       struct cw_pystack_event *e, __u32 slot)
{
	struct cw_py_walk w = {};
	__u64 interp;

	w.slot = slot;
	w.p = pp;
	w.key = cw_py_thread_key(pp, tid);
	if (!w.key)
		return;
	w.found = cw_py_tstate(pp, tid, w.key);
	if (!w.found) {
		interp = cw_py_read_ptr(pp->runtime + pp->rt_interp_head);
		if (!interp)
			return;
		w.cur = cw_py_read_ptr(interp + pp->is_threads_head);
		bpf_loop(CW_PY_MAX_THREADS, cw_py_thread_step, &w, 0);
		if (!w.found)
			return;
		bpf_map_update_elem(&py_tstates, &tid, &w.found, BPF_ANY);
	}
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

static __always_inline __u64 cw_mix(__u64 h, __u64 v)
{
	h ^= v;
	h *= 0x9e3779b97f4a7c15ULL;
	return h ^ (h >> 29);
}

struct cw_hash_walk {
	const struct cw_pystack_event *e;
	__u64 h;
};

static long cw_hash_py_step(__u32 i, void *arg)
{
	struct cw_hash_walk *w = arg;

	if (i >= w->e->nframes)
		return 1;
	cw_barrier_var(i);
	if (i >= CW_PY_MAX_FRAMES)
		return 1;
	w->h = cw_mix(cw_mix(w->h, w->e->code[i]), w->e->lasti[i]);
	return 0;
}

static long cw_hash_native_step(__u32 i, void *arg)
{
	struct cw_hash_walk *w = arg;

	if (i >= w->e->native_n)
		return 1;
	cw_barrier_var(i);
	if (i >= CW_NATIVE_MAX_FRAMES)
		return 1;
	w->h = cw_mix(w->h, w->e->native[i]);
	return 0;
}

/* Identity of the captured stack: the same frames at the same offsets in the
 * same process hash the same. Only the filled part of the scratch record is
 * read (the rest holds an earlier capture). Never 0 (0 means "no stack").
 * bpf_loop, not plain loops: one verification of each body. */
static __always_inline __u64 cw_stack_hash(const struct cw_pystack_event *e, __u32 tgid)
{
	struct cw_hash_walk w = { .e = e, .h = cw_mix(0xcbf29ce484222325ULL, tgid) };

	w.h = cw_mix(w.h, ((__u64)e->nframes << 32) | e->native_n);
	w.h = cw_mix(w.h, ((__u64)e->entry_mask << 32) | e->py_version);
	bpf_loop(CW_PY_MAX_FRAMES, cw_hash_py_step, &w, 0);
	bpf_loop(CW_NATIVE_MAX_FRAMES, cw_hash_native_step, &w, 0);
	return w.h ? w.h : 1;
}

/* ---- naming native frames: the file of each mapping (new stacks only) */

struct cw_vma_found {
	struct cw_native_module m;
	__u32 found;            /* 1: a file mapping, 2: anonymous */
};

static long cw_vma_cb(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	struct cw_vma_found *f = data;
	struct file *file = BPF_CORE_READ(vma, vm_file);
	const unsigned char *name;

	f->m.start = BPF_CORE_READ(vma, vm_start);
	f->m.end = BPF_CORE_READ(vma, vm_end);
	if (!file) {
		f->found = 2;
		return 0;
	}
	f->m.file_offset = BPF_CORE_READ(vma, vm_pgoff) << 12;
	f->m.ino = BPF_CORE_READ(file, f_inode, i_ino);
	f->m.dev = BPF_CORE_READ(file, f_inode, i_sb, s_dev);
	name = BPF_CORE_READ(file, f_path.dentry, d_name.name);
	bpf_probe_read_kernel_str(f->m.name, sizeof(f->m.name), name);
	f->found = 1;
	return 0;
}

/* The anonymous region found last (JIT code): frames in it need no lookup. */
struct cw_anon_range {
	__u64 start, end;
};

/* Names native frame i's mapping: a module already found in this stack, or
 * one bpf_find_vma lookup. Counters live in the scratch record (map memory):
 * the verifier tracks stack scalars precisely and would verify a loop body
 * once per counter value. Global: verified once, on its own. */
__noinline int cw_frame_module(struct cw_pystack_event *e, struct cw_anon_range *anon, __u32 i)
{
	struct cw_vma_found f = {};
	__u32 nm;
	__u64 addr;

	if (!e || !anon || i >= CW_NATIVE_MAX_FRAMES)
		return 0;
	/* A return address points after its call: look up the call itself. */
	addr = e->native[i] - (i > 0);
	e->module_of[i] = CW_NO_MODULE;
	nm = e->nmodules;
	for (int m = 0; m < CW_STACK_MAX_MODULES; m++) {
		if (m >= nm)
			break;
		if (addr >= e->modules[m].start && addr < e->modules[m].end) {
			e->module_of[i] = m;
			return 1;
		}
	}
	if (addr >= anon->start && addr < anon->end) {
		e->module_of[i] = CW_ANON_MODULE;
		return 0;
	}
	if (nm >= CW_STACK_MAX_MODULES || e->_pad >= CW_MAX_VMA_LOOKUPS)
		return 0;
	e->_pad++;      /* lookups so far */
	if (bpf_find_vma(bpf_get_current_task_btf(), addr, cw_vma_cb, &f, 0) || !f.found)
		return 0;
	if (f.found == 2) {
		anon->start = f.m.start;
		anon->end = f.m.end;
		e->module_of[i] = CW_ANON_MODULE;
		return 0;
	}
	e->modules[nm & (CW_STACK_MAX_MODULES - 1)] = f.m;
	e->module_of[i] = nm;
	e->nmodules = nm + 1;
	return 1;
}

struct cw_module_walk {
	struct cw_pystack_event *e;
	struct cw_anon_range anon;
};

static long cw_module_step(__u32 i, void *arg)
{
	struct cw_module_walk *w = arg;

	if (i >= w->e->native_n)
		return 1;
	cw_frame_module(w->e, &w->anon, i);
	return 0;
}

/* ---- copying code objects (new stacks only, each code object once) */

struct cw_code_walk {
	const struct cw_py_proc *p;
	struct cw_pystack_event *e;
	__u32 tgid;
	__u32 tid;
	__u64 ts;
	__u32 slot;
	__u32 _pad;
};

/* A str object's header and up to cap bytes of its characters (compact
 * strings only: the data follows the header). */
static __always_inline void cw_copy_str(const struct cw_py_proc *p, __u64 obj,
					struct cw_pyobj_str *s, __u8 *buf, __u32 cap)
{
	__u64 data, n;
	__u32 kind;

	s->type = cw_py_read_ptr(obj + p->ob_type);
	s->length = 0;
	s->state = 0;
	s->copied = 0;
	if (bpf_probe_read_user(&s->length, sizeof(s->length), (void *)(obj + p->str_length)) ||
	    bpf_probe_read_user(&s->state, sizeof(s->state), (void *)(obj + p->str_state)))
		return;
	kind = (s->state >> 2) & 7;
	if (s->length <= 0 || kind == 0)
		return;
	data = obj + ((s->state >> 6) & 1 ? p->str_ascii_data : p->str_compact_data);
	n = (__u64)s->length * kind;
	if (n > cap)
		n = cap;
	if (!bpf_probe_read_user(buf, n, (void *)data))
		s->copied = n;
}

/* Fills c from the code object at code (global: verified once, on its own). */
__noinline int cw_copy_code(struct cw_pycode_event *c, const struct cw_py_proc *p, __u64 code)
{
	__u64 obj, n;

	if (!c || !p)
		return 0;
	c->code = code;
	c->code_type = cw_py_read_ptr(code + p->ob_type);
	c->firstlineno = 0;
	bpf_probe_read_user(&c->firstlineno, sizeof(c->firstlineno),
			    (void *)(code + p->co_firstlineno));
	c->code_units = 0;
	c->bytecode_type = 0;
	if (p->co_code != CW_PY_NO_FIELD) {
		obj = cw_py_read_ptr(code + p->co_code);
		c->bytecode_type = cw_py_read_ptr(obj + p->ob_type);
		bpf_probe_read_user(&c->code_units, sizeof(c->code_units), (void *)(obj + p->var_size));
		/* unsigned: BPF has no signed division; a negative size fails validation */
		c->code_units = (__s64)((__u64)c->code_units >> 1);
	} else {
		bpf_probe_read_user(&c->code_units, sizeof(c->code_units), (void *)(code + p->var_size));
	}
	cw_copy_str(p, cw_py_read_ptr(code + p->co_name), &c->name, c->name_data, CW_PYCODE_NAME);
	cw_copy_str(p, cw_py_read_ptr(code + p->co_filename), &c->file, c->file_data, CW_PYCODE_FILE);
	obj = cw_py_read_ptr(code + p->co_linetable);
	c->table_type = cw_py_read_ptr(obj + p->ob_type);
	c->table_len = 0;
	c->table_copied = 0;
	bpf_probe_read_user(&c->table_len, sizeof(c->table_len), (void *)(obj + p->var_size));
	n = c->table_len > 0 ? (__u64)c->table_len : 0;
	if (n > CW_PYCODE_TABLE)
		n = CW_PYCODE_TABLE;
	if (!bpf_probe_read_user(c->table_data, n, (void *)(obj + p->bytes_sval)))
		c->table_copied = n;
	return 1;
}

static long cw_code_step(__u32 i, void *arg)
{
	struct cw_code_walk *w = arg;
	struct cw_seen_key k = { .pid = w->tgid };
	struct cw_pycode_event *c;
	__u32 slot = w->slot, first = 0;
	__u8 one = 1;
	__u64 code;

	if (i >= w->e->nframes)
		return 1;
	cw_barrier_var(i);
	if (i >= CW_PY_MAX_FRAMES)
		return 1;
	code = w->e->code[i];
	bpf_probe_read_user(&first, sizeof(first), (void *)(code + w->p->co_firstlineno));
	w->e->firstlineno[i] = first;
	k.id = cw_code_key(code, first);
	if (bpf_map_lookup_elem(&code_seen, &k))
		return 0;
	c = bpf_map_lookup_elem(&pycode_scratch, &slot);
	if (!c)
		return 1;
	cw_fill_header(&c->hdr, CW_EV_PYCODE, w->ts, w->tgid, w->tid);
	cw_copy_code(c, w->p, code);
	if (bpf_ringbuf_output(&libcall_events, c, sizeof(*c), BPF_RB_NO_WAKEUP)) {
		cw_count_drop(CW_DROP_PYCODE);
		return 0;
	}
	bpf_map_update_elem(&code_seen, &k, &one, BPF_ANY);
	return 0;
}

/*
 * Sends the stack in the scratch record (its Python frames and native_n
 * filled in by the caller) the first time this process has it, and returns
 * its hash (what a call or sample carries), or 0 when there is none or it
 * could not be sent. A stack this process sent before costs the hash alone.
 */
/* A global function: verified once on its own, not once per path of the
 * probe that calls it (measured: 35k instructions instead of 200k). */
__noinline __u64 cw_send_pystack(__u32 tgid, __u32 tid, __u64 ts, __u32 slot)
{
	struct cw_py_proc *pp = NULL;
	struct cw_pystack_event *e;
	struct cw_seen_key k = { .pid = tgid };
	__u8 one = 1;

	e = bpf_map_lookup_elem(&py_scratch, &slot);
	if (!e)
		return 0;
	if (!e->nframes && !e->native_n)
		return 0;
	if (pystack_python)
		pp = bpf_map_lookup_elem(&py_procs, &tgid);
	k.id = cw_stack_hash(e, tgid);
	if (bpf_map_lookup_elem(&stack_seen, &k))
		return k.id;

	/* First time: name the native frames' files, copy new code objects,
	 * then send the stack (after the code records: user space reads them
	 * first). */
	e->nmodules = 0;
	e->_pad = 0;
	if (e->native_n) {
		struct cw_module_walk mw = { .e = e };

		bpf_loop(CW_NATIVE_MAX_FRAMES, cw_module_step, &mw, 0);
	}
	if (pp && e->nframes) {
		struct cw_code_walk cw = { .p = pp, .e = e, .tgid = tgid, .tid = tid, .ts = ts, .slot = slot };

		bpf_loop(CW_PY_MAX_FRAMES, cw_code_step, &cw, 0);
	}
	cw_fill_header(&e->hdr, CW_EV_PYSTACK, ts, tgid, tid);
	e->hash = k.id;
	e->_pad = 0;
	if (bpf_ringbuf_output(&libcall_events, e, sizeof(*e), BPF_RB_NO_WAKEUP)) {
		cw_count_drop(CW_DROP_PYSTACK);
		return 0;
	}
	bpf_map_update_elem(&stack_seen, &k, &one, BPF_ANY);
	return k.id;
}

/* The scratch record with this thread's Python frames walked (none for a
 * process that is not Python, or with Python stacks off). */
static __always_inline struct cw_pystack_event *cw_walk_into_scratch(__u32 tgid, __u32 tid, __u32 slot)
{
	struct cw_py_proc *pp = NULL;
	struct cw_pystack_event *e;

	e = bpf_map_lookup_elem(&py_scratch, &slot);
	if (!e)
		return NULL;
	e->nframes = 0;
	e->py_version = 0;
	e->entry_mask = 0;
	e->native_n = 0;
	if (pystack_python)
		pp = bpf_map_lookup_elem(&py_procs, &tgid);
	if (pp) {
		e->py_version = pp->version;
		cw_py_walk(pp, tid, e, slot);
	}
	return e;
}

/* cw_capture_pystack's flags: where Python frames were found, no native
 * unwind (a USDT probe's callers: the framework's C++ between the line and
 * the probe differs call by call, and would split one line's stack into
 * many, each walked every time; a line is what its users act on). */
#define CW_STACK_PY_ONLY 1u

/*
 * Walks the calling thread's stack at a probed call into the probe's scratch
 * record: its Python frames and native stack. Returns 0 when there is none
 * to take. Apart from sending it (cw_capture_pystack): a probe's frames, the
 * site cache's, the walk's and the send's together stay within the 512
 * bytes the verifier allows a call chain (kernels without private stacks
 * for uprobes).
 */
__noinline int cw_walk_pystack(struct pt_regs *ctx, __u32 tgid, __u32 tid, __u32 flags)
{
	struct cw_pystack_event *e;
	long got;

	if (!pystack_native && !(pystack_python && bpf_map_lookup_elem(&py_procs, &tgid)))
		return 0;
	e = cw_walk_into_scratch(tgid, tid, CW_SLOT_PROBE);
	if (!e)
		return 0;
	if (pystack_native && !((flags & CW_STACK_PY_ONLY) && e->nframes)) {
		got = bpf_get_stack(ctx, e->native, sizeof(e->native), BPF_F_USER_STACK);
		if (got > 0)
			e->native_n = got / sizeof(__u64);
	}
	return 1;
}

/* Captures the calling thread's stack at a probed call. Returns its hash
 * (what the call record carries), or 0. */
static __always_inline __u64 cw_capture_pystack(struct pt_regs *ctx, __u32 tgid, __u32 tid, __u64 ts, __u32 flags)
{
	if (!cw_walk_pystack(ctx, tgid, tid, flags))
		return 0;
	return cw_send_pystack(tgid, tid, ts, CW_SLOT_PROBE);
}

/* The calling code's fingerprint: the native return address of the probed
 * call, the top frame's code object, and for the top CW_SITE_FRAMES Python
 * frames the frame's address and its instruction pointer (3.11+: an
 * address inside its code object, so code and line at once; 3.10: an index,
 * with the frame's code object): about ten reads, where a walk takes five a
 * frame, a native unwind and a hash over it all. Every Python frame would
 * tell every path apart, but costs half a walk (docs/performance.md §6);
 * paths that differ deeper are caught by the rechecks. */
#ifndef CW_SITE_FRAMES
#define CW_SITE_FRAMES 3
#endif
struct cw_site_walk {
	__u64 f, h;
	__u16 fr_previous, fr_instr, fr_code;
	__u8 with_code;
};

static long cw_site_step(__u32 i, void *arg)
{
	struct cw_site_walk *w = arg;

	if (!w->f)
		return 1;
	w->h = cw_mix(cw_mix(w->h, w->f), cw_py_read_ptr(w->f + w->fr_instr));
	if (w->with_code)
		w->h = cw_mix(w->h, cw_py_read_ptr(w->f + w->fr_code));
	w->f = cw_py_read_ptr(w->f + w->fr_previous);
	return 0;
}

static __always_inline __u64 cw_py_site(const struct cw_py_proc *pp, __u64 tstate, __u64 ret)
{
	struct cw_site_walk w = { .fr_previous = pp->fr_previous, .fr_instr = pp->fr_instr,
				  .fr_code = pp->fr_code, .with_code = !!(pp->flags & CW_PY_LASTI_INDEX) };

	w.f = cw_py_read_ptr(tstate + pp->ts_frame);
	if (pp->cframe_frame != CW_PY_NO_FIELD)
		w.f = cw_py_read_ptr(w.f + pp->cframe_frame);
	if (!w.f)
		return 0;
	w.h = cw_mix(cw_mix(0x84222325cbf29ce4ULL, ret), cw_py_read_ptr(w.f + pp->fr_code));
	bpf_loop(CW_SITE_FRAMES, cw_site_step, &w, 0);
	return w.h ? w.h : 1;
}

/* cw_capture_pystack for a call entered from `ret` (a rare call at entry):
 * a Python thread's known call site returns its stack's hash without a walk.
 * Its 1st, 2nd, 4th, ... 64th and then every 64th use walk anyway: a walk
 * that finds another stack marks the site ambiguous, walked from then on. */
/* A native caller's fingerprint: the probed call's return address and the
 * return addresses of the next CW_NATIVE_SITE_FRAMES frames up the frame
 * pointer chain (two reads a frame, where bpf_get_stack unwinds every frame
 * and the stack is hashed). Code built without frame pointers gives the
 * return address alone: paths that differ above it are caught by the
 * rechecks, as for Python sites. */
#ifndef CW_NATIVE_SITE_FRAMES
#define CW_NATIVE_SITE_FRAMES 2
#endif
#define CW_NATIVE_STACK_SPAN (8ULL << 20)   /* a thread's stack: 8 MiB by default */
static __always_inline __u64 cw_native_site(struct pt_regs *ctx, __u64 ret)
{
	__u64 h = cw_mix(0x6a09e667f3bcc909ULL, ret);
	__u64 fp = PT_REGS_FP(ctx), sp = PT_REGS_SP(ctx);

#pragma unroll
	for (int i = 0; i < CW_NATIVE_SITE_FRAMES; i++) {
		__u64 frame[2] = {};   /* the saved frame pointer, the return address */

		/* Only a frame pointer into the stack above sp, each caller's above
		 * the last: code built without frame pointers leaves anything in
		 * it, and a read that faults costs more than the walk it saves. */
		if (fp < sp || fp - sp > CW_NATIVE_STACK_SPAN || (fp & 7) ||
		    bpf_probe_read_user(frame, sizeof(frame), (void *)fp))
			break;
		h = cw_mix(h, frame[1]);
		sp = fp + 16;
		fp = frame[0];
	}
	return h ? h : 1;
}

/* The call site's key (sk->fp, 0 where it has none), and the stack its cache
 * says it has, or 0: walk it. Not inlined, as cw_site_store: the site's
 * reads stay off the frames of the walk's call chain. */
__noinline __u64 cw_site_cached(struct pt_regs *ctx, __u64 pid_tgid, __u64 ret, struct cw_site_key *sk)
{
	__u32 tgid = pid_tgid >> 32, tid = (__u32)pid_tgid;
	struct cw_py_proc *pp = NULL;
	struct cw_seen_key seen = { .pid = tgid };
	struct cw_site *site;
	__u64 key, tstate;
	__u32 hits;

	if (!sk)
		return 0;
	sk->pid = tgid;
	sk->fp = 0;
	if (pystack_python)
		pp = bpf_map_lookup_elem(&py_procs, &tgid);
	if (pp) {
		key = cw_py_thread_key(pp, tid);
		tstate = key ? cw_py_tstate(pp, tid, key) : 0;
		if (tstate)
			sk->fp = cw_py_site(pp, tstate, ret);
	} else if (pystack_native && ret) {
		/* A native process: its call sites are cached as Python's are. */
		sk->fp = cw_native_site(ctx, ret);
	}
	if (!sk->fp)
		return 0;
	site = bpf_map_lookup_elem(&stack_sites, sk);
	if (site && site->stack && !(site->flags & CW_SITE_AMBIGUOUS)) {
		hits = ++site->hits;
		seen.id = site->stack;
		/* Only a stack user space has: an evicted one is sent again. */
		if (hits & (hits - 1) && hits % CW_SITE_RECHECK && bpf_map_lookup_elem(&stack_seen, &seen))
			return site->stack;
	}
	return 0;
}

/* The stack a walk found at the site: a site seen with another is ambiguous,
 * walked every time from then on. */
__noinline int cw_site_store(const struct cw_site_key *sk, __u64 id)
{
	struct cw_site *site, fresh = {};

	if (!sk)
		return 0;
	site = bpf_map_lookup_elem(&stack_sites, sk);
	if (site) {
		if (site->stack && site->stack != id)
			site->flags |= CW_SITE_AMBIGUOUS;
		site->stack = id;
	} else {
		fresh.stack = id;
		bpf_map_update_elem(&stack_sites, sk, &fresh, BPF_ANY);
	}
	return 0;
}

static __always_inline __u64 cw_capture_pystack_site(struct pt_regs *ctx, __u64 pid_tgid, __u64 ts, __u64 ret,
						     __u32 flags)
{
	struct cw_site_key sk = {};
	__u64 id = cw_site_cached(ctx, pid_tgid, ret, &sk);

	if (id)
		return id;
	id = cw_capture_pystack(ctx, pid_tgid >> 32, (__u32)pid_tgid, ts, flags);
	if (id && sk.fp)
		cw_site_store(&sk, id);
	return id;
}

#endif
