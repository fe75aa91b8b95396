// SPDX-License-Identifier: GPL-2.0-only
/*
 * Library calls: one generic entry/return uprobe pair serves every traced API
 * function (CUDA runtime and driver, NCCL, HIP, verbs). The attach cookie says
 * which op the probe is on and what to copy (see CW_COOKIE_* in events.h);
 * decoding arguments into bytes, dims and names happens in user space from the
 * op table, so adding a function is a table row, not BPF code.
 *
 * Hot path (measured in docs/performance.md): one timestamp, the six argument
 * registers, an optional small user read, one per-thread map slot at entry;
 * one ring-buffer record submitted with BPF_RB_NO_WAKEUP at return. The
 * consumer drains on a timer, so no record ever wakes it.
 */
#include "common.bpf.h"
#include <bpf/usdt.bpf.h>  /* its <linux/errno.h> is bpf/linux/errno.h */
#include "causeway/model/launches.h"
#include "causeway/model/op_counts.h"
#include "causeway/model/stacks.h"
#include "causeway/model/cpu_samples.h"

/* Launch-class calls faster than this are counted in op_stats but not
 * recorded (0 = record all). */
const volatile __u64 launch_min_ns = 0;
/* Launch-class calls at least this slow get a Python stack. */
const volatile __u64 pystack_launch_min_ns = 1000000;
/* --launch-sampling N: aggregate launches in launch_agg and record one in N
 * of each key as a row (plus every slow one); 0 = record every launch. */
const volatile __u32 launch_sample_every = 0;
/* The sampled launch rows get their stack too: the line a launch-bound loop
 * launches from (one walk per N launches; known stacks cost only the walk). */
const volatile __u8 pystack_sampled_launches = 1;

/* Per-thread in-flight calls. LRU so that threads that die mid-call never
 * leak a slot; no delete on the hot path. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 32768);
	__type(key, __u32);     /* tid */
	__type(value, struct cw_thread_calls);
} inflight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cw_thread_calls);
} zero_calls SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CW_MAX_OPS);
	__type(key, __u32);
	__type(value, struct cw_op_stats);
} op_stats SEC(".maps");

/* A plain hash with atomic adds, not a per-CPU one: a key is one process's
 * kernel, launched from one or a few threads, and per-CPU values of 288
 * bytes would cost MBs per key on a 128-CPU host. Preallocated, so an insert
 * never allocates in the probe. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct cw_launch_key);
	__type(value, struct cw_launch_agg);
} launch_agg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cw_launch_agg);
} zero_agg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20);   /* resized by user space before load */
} libcall_events SEC(".maps");

/* The next number of each communicator's collectives (and each send/recv
 * direction and peer) per process (CW_COOKIE_SEQ_*). A plain hash, not an
 * LRU: an evicted counter would restart a live communicator's numbering.
 * User space deletes an exited process's keys. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct cw_seq_key);
	__type(value, __u64);
} coll_seq SEC(".maps");

/* Each process's launches so far and when the latest returned (ktime), for
 * the records of the calls that may wait for the GPU: host work after that
 * launch and before a wait that still waited ran while the GPU worked on
 * what was queued before, unless what was queued after it (the count says
 * how much) could have taken the wait. Most launches are counted here and
 * never recorded: only here is it known where they lie. An array slot per
 * tgid modulo its size, no hash on a launch's path: processes that share a
 * slot mix their launches (explain bounds what it hides by NVML's busy share
 * where it has one, and hides nothing after a launch where it has none). */
#define CW_LAUNCH_SLOTS 4096
struct cw_launch_mark {
	__u64 ts;
	__u64 count;
};
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CW_LAUNCH_SLOTS);
	__type(key, __u32);
	__type(value, struct cw_launch_mark);
} last_launch SEC(".maps");

/* after the ring buffer: the Python stack records go into it */
#include "pystack.bpf.h"

/* A frame left behind by a thread that died or longjmp'd out of a call. */
#define CW_STALE_NS (600ULL * 1000000000ULL)

/* Bumped by user space each time it detaches the CW_COOKIE_DUTY probes: a
 * call entered before then never sees its return. */
volatile __u32 launch_gen = 0;
/* Set by user space before it detaches them, cleared once it has attached
 * them again: their entries do nothing meanwhile (the links go side by side,
 * a return probe may go before its entry probe, and a frame pushed then
 * would never be popped), and an entry handler already running when it was
 * set pushes a frame of the new generation, whose return is gone too. */
volatile __u32 duty_off = 0;
/* Set by user space when the trace stops, before its last drain: no call
 * is entered, counted or recorded from then on, so the counters it reads
 * next hold exactly the calls whose records it drained (a process traced
 * by --pid goes on calling). */
volatile __u32 stopped = 0;

/* Frames of duty-cycled calls whose probes were detached mid-call: dropped,
 * so that the thread's next call is not taken for a nested one. */
static __always_inline __u32 drop_orphans(struct cw_thread_calls *tc, __u32 d)
{
	for (int i = 0; i < 2; i++) {
		if (d == 0 || d > CW_MAX_NEST)
			break;
		struct cw_frame *top = &tc->fr[(d - 1) & (CW_MAX_NEST - 1)];

		if (!(top->cookie & CW_COOKIE_DUTY) || (top->gen == (__u16)launch_gen && !duty_off))
			break;
		d--;
	}
	return d;
}

#if defined(__TARGET_ARCH_x86)
#define CW_RET_POP 8            /* `ret` pops the return address the call pushed */
#else
#define CW_RET_POP 0            /* the return address is in a register */
#endif

/* Return sites of CW_COOKIE_RETSITE calls, per process: 0 once told to user
 * space, 1 once it attached the return-site probe there. */
struct cw_retsite_key {
	__u32 tgid;
	__u32 _pad;
	__u64 addr;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct cw_retsite_key);
	__type(value, __u8);
} ret_sites SEC(".maps");

/* CW_COOKIE_RETSITE frames whose call is over without its return site
 * firing, found at the thread's next call: the thread is at or above the
 * frame's entry stack pointer (a live caller's frame is always above its
 * callees'), or the slot of the frame's return address holds something else
 * now, or the next call is of the same op (the allocator never calls itself).
 * Thrown out of (the return site was probed): a failed call. Returned before
 * the probe was attached there: lost, counted as a drop. */
static __always_inline __u32 drop_unreturned(struct cw_thread_calls *tc, __u32 d, __u32 tgid,
					     __u64 sp, __u64 cookie)
{
	for (int i = 0; i < 2; i++) {
		if (d == 0 || d > CW_MAX_NEST)
			break;
		struct cw_frame *top = &tc->fr[(d - 1) & (CW_MAX_NEST - 1)];
		__u64 slot = 0;

		if (!(top->cookie & CW_COOKIE_RETSITE))
			break;
		if (top->sp > sp && (top->cookie & CW_COOKIE_OP_MASK) != (cookie & CW_COOKIE_OP_MASK)) {
#if defined(__TARGET_ARCH_x86)
			if (!bpf_probe_read_user(&slot, sizeof(slot), (void *)top->sp) &&
			    slot == top->ret_addr)
				break;
#else
			break;
#endif
		}
		struct cw_retsite_key k = {.tgid = tgid, .addr = top->ret_addr};
		__u8 *attached = bpf_map_lookup_elem(&ret_sites, &k);

		/* Entered before the site's probe was attached, and over: it
		 * returned unseen (the probe may have come since, before this
		 * call looked: a race with user space that once went uncounted). */
		if (attached && *attached && !top->site_unprobed) {
			__u32 op = top->cookie & CW_COOKIE_OP_MASK;
			struct cw_op_stats *st = bpf_map_lookup_elem(&op_stats, &op);

			if (st) {
				st->calls++;
				st->errors++;
			}
		} else {
			cw_count_drop(CW_DROP_RETSITE);
		}
		d--;
	}
	return d;
}

/* FNV-1a over an argument passed by value on the stack (ncclUniqueId): the
 * same communicator gets the same hash on every rank. Rare calls only. Not
 * inlined: its buffer stays off the entry probe's frame, which calls the
 * stack walk (the frames of a call chain share 512 bytes). */
static __noinline __u64 hash_user_bytes(const __u8 *p)
{
	__u8 buf[CW_HASH_BYTES];
	__u64 h = 0xcbf29ce484222325ULL;

	if (bpf_probe_read_user(buf, sizeof(buf), p))
		return 0;
	for (int i = 0; i < CW_HASH_BYTES; i++) {
		h ^= buf[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* The argument at index i of a frame (0..5 registers, 6.. stack words), 0
 * when it was not read. */
static __always_inline __u64 frame_arg(const struct cw_frame *f, __u32 i)
{
	if (i < 6)
		return f->args[i & 7];
	i -= 6;
	if (i < CW_STACK_WORDS && (f->flags & CW_CALL_HAS_STACK))
		return f->stack[i & (CW_STACK_WORDS - 1)];
	return 0;
}

/* Numbers a collective or send/recv at its entry (CW_COOKIE_SEQ_*): aux =
 * its number + 1, or 0 when the counter could not be had (map full: the
 * call is then not matched across ranks, rather than matched wrongly). */
static __always_inline __u64 number_collective(const struct cw_frame *f, __u64 cookie, __u32 tgid)
{
	__u32 ci = (cookie & CW_COOKIE_SEQ_MASK) >> CW_COOKIE_SEQ_SHIFT;
	__u32 pi = (cookie & CW_COOKIE_PEER_MASK) >> CW_COOKIE_PEER_SHIFT;
	struct cw_seq_key k = {};
	__u64 zero = 0, *n;

	k.comm = frame_arg(f, ci - 1);
	k.tgid = tgid;
	k.peer = -1;
	if (pi) {
		k.peer = (__s32)frame_arg(f, pi - 1);
		k.op = cookie & CW_COOKIE_OP_MASK;
	}
	n = bpf_map_lookup_elem(&coll_seq, &k);
	if (!n) {
		bpf_map_update_elem(&coll_seq, &k, &zero, BPF_NOEXIST);
		n = bpf_map_lookup_elem(&coll_seq, &k);
		if (!n)
			return 0;
	}
	return __sync_fetch_and_add(n, 1) + 1;
}

static __always_inline __u32 log2_u64(__u64 v)
{
	__u32 r, s;

	s = (v > 0xffffffffULL) << 5; v >>= s; r = s;
	s = (v > 0xffff) << 4; v >>= s; r |= s;
	s = (v > 0xff) << 3; v >>= s; r |= s;
	s = (v > 0xf) << 2; v >>= s; r |= s;
	s = (v > 0x3) << 1; v >>= s; r |= s;
	return r | (__u32)(v >> 1);
}

/* Counts one launch in launch_agg. Returns 1 when it should also be
 * recorded (slow, or the sampled one in N), 0 when counting is enough, -1
 * when it could not be counted (map full): then it is recorded as a plain,
 * unaggregated row so no launch goes uncounted. */
static __always_inline int aggregate_launch(__u32 tgid, __u32 op, __u64 kernel, __u64 dur,
					    int err)
{
	struct cw_launch_key k = { .pid = tgid, .op = (__u16)op, ._pad = 0, .kernel = kernel };
	struct cw_launch_agg *a = bpf_map_lookup_elem(&launch_agg, &k);
	__u32 zero = 0, b;
	__u64 n;

	if (!a) {
		struct cw_launch_agg *z = bpf_map_lookup_elem(&zero_agg, &zero);

		if (!z)
			return -1;
		bpf_map_update_elem(&launch_agg, &k, z, BPF_NOEXIST);
		a = bpf_map_lookup_elem(&launch_agg, &k);
		if (!a)
			return -1;
	}
	__sync_fetch_and_add(&a->calls, 1);
	__sync_fetch_and_add(&a->total_ns, dur);
	if (err)
		__sync_fetch_and_add(&a->errors, 1);
	b = log2_u64(dur);
	if (b >= CW_HIST_BUCKETS)
		b = CW_HIST_BUCKETS - 1;
	__sync_fetch_and_add(&a->hist[b], 1);
	/* Slow, or the first failure of this kernel (the one that names it
	 * in a failures diagnosis; later ones are counted in errors): a row. */
	if (dur >= CW_LAUNCH_KEEP_NS || (err && a->errors == 1))
		return 1;
	/* Sampling reads the count back without a fetch: two threads racing on
	 * one key may shift which call is sampled, never what is counted. */
	n = a->calls;
	return (n - 1) % launch_sample_every == 0;
}

/* Who a process is, sent at its first traced call (the command line is read
 * now: the process may be gone by the time user space looks). */
static __always_inline void emit_identity(__u32 tgid, __u32 tid)
{
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	struct cw_proc_event *e = bpf_ringbuf_reserve(&libcall_events, sizeof(*e), 0);

	if (!e) {
		cw_count_drop(CW_DROP_LIBCALL);
		return;
	}
	cw_fill_header(&e->hdr, CW_EV_PROC_IDENTITY, bpf_ktime_get_ns(), tgid, tid);
	e->ppid = BPF_CORE_READ(t, real_parent, tgid);
	e->exit_code = 0;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	e->filename[0] = 0;
	e->_pad = 0;
	cw_read_args(e);
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
}

/* When each CPU last woke the consumer (cw_submit_flags). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} woke_at SEC(".maps");

/* The ring's size, set before load (one helper call less per record); 0:
 * asked of the ring (a skeleton loaded as it is, in the tests). */
const volatile __u64 ring_bytes = 0;

static __always_inline __u64 cw_ring_size(void)
{
	return ring_bytes ? ring_bytes : bpf_ringbuf_query(&libcall_events, BPF_RB_RING_SIZE);
}

/* Records go without a wakeup: the consumer drains every 50 ms. Past a
 * quarter of the ring it is woken at once, at most once a millisecond per
 * CPU: a flood of fast calls (730k a second on the 2-core CI machine) fills
 * the ring to the shedding mark before the next timed drain. `avail`: the
 * ring's unconsumed bytes. */
static __always_inline __u64 cw_submit_flags(__u64 avail, __u64 now)
{
	__u32 zero = 0;
	__u64 *last;

	if (avail <= cw_ring_size() / 4)
		return BPF_RB_NO_WAKEUP;
	last = bpf_map_lookup_elem(&woke_at, &zero);
	if (!last || now - *last < 1000000)
		return BPF_RB_NO_WAKEUP;
	*last = now;
	return BPF_RB_FORCE_WAKEUP;
}

/* Overload: the ring is more than CW_SHED_FILL/16 full (not yet drained). */
static __always_inline int ring_filling(__u64 avail)
{
	return avail > cw_ring_size() / 16 * CW_SHED_FILL;
}

static __always_inline struct cw_thread_calls *thread_calls(__u32 tid)
{
	struct cw_thread_calls *tc = bpf_map_lookup_elem(&inflight, &tid);
	__u32 zero = 0;

	if (tc)
		return tc;
	tc = bpf_map_lookup_elem(&zero_calls, &zero);
	if (!tc)
		return NULL;
	bpf_map_update_elem(&inflight, &tid, tc, BPF_NOEXIST);
	return bpf_map_lookup_elem(&inflight, &tid);
}

/* A call's record, from its frame f at depth d (already popped): counted
 * in op_stats and, unless folded or shed, one ring record. */
static __always_inline int finish_call(struct pt_regs *ctx, struct cw_thread_calls *tc,
				       struct cw_frame *f, __u32 d, __u32 tgid, __u32 tid,
				       __u64 now, __s64 ret)
{
	struct cw_call_event *e;
	struct cw_op_stats *st;
	struct cw_launch_mark *mark;
	__u64 dur = now - f->ts, cookie = f->cookie, avail;
	__u32 op = cookie & CW_COOKIE_OP_MASK, launch_slot;
	__u16 agg_flag = 0;
	int err, outer_transparent = 0;

	if (op >= CW_MAX_OPS)
		return 0;
	err = cookie & CW_COOKIE_VOID ? 0 : cookie & CW_COOKIE_RET_PTR ? ret == 0 : (__u32)ret != 0;
	st = bpf_map_lookup_elem(&op_stats, &op);
	if (st) {
		st->calls++;
		st->total_ns += dur;
		if (err)
			st->errors++;
	}
	/* The same operation seen again one layer down (cudaLaunchKernel ->
	 * cuLaunchKernel): counted, not recorded twice. Naming calls always
	 * go through: they map handles to kernel names. A transparent frame
	 * below (a framework's allocation) nests nothing: what it calls is the
	 * outermost library call. */
	if (d > 0 && (tc->fr[(d - 1) & (CW_MAX_NEST - 1)].cookie & CW_COOKIE_TRANSPARENT))
		outer_transparent = 1;
	if (d > 0 && !outer_transparent && !(cookie & CW_COOKIE_NAMING)) {
		if (st)
			st->nested++;
		return 0;
	}
	/* Its process's launch mark: bumped by a launch, carried by every record. */
	launch_slot = tgid % CW_LAUNCH_SLOTS;
	mark = bpf_map_lookup_elem(&last_launch, &launch_slot);
	if (cookie & CW_COOKIE_LAUNCH) {
		int sampled = 0;

		if (mark) {
			__sync_fetch_and_add(&mark->count, 1);
			if (mark->ts < now)
				mark->ts = now;
		}

		if (launch_sample_every) {
			int keep = aggregate_launch(tgid, op,
						    f->args[cookie & CW_COOKIE_KERNEL_ARG1 ? 1 : 0],
						    dur, err);

			if (keep == 0)
				return 0;
			if (keep > 0)
				agg_flag = CW_CALL_AGGREGATED;
			sampled = keep > 0 && pystack_sampled_launches;
		} else if (dur < launch_min_ns) {
			return 0;
		}
		/* A slow launch, or a sampled one, gets its Python stack now:
		 * the interpreter is still inside the same call. */
		if (dur >= pystack_launch_min_ns || sampled) {
			f->stack_hash = cw_capture_pystack(ctx, tgid, tid, f->ts, 0);
			if (f->stack_hash)
				f->flags |= CW_CALL_HAS_PYSTACK;
		}
	}
	/* Overload sheds in a planned order: rows of fast calls first (their
	 * calls stay counted here and in launch_agg); slow calls, new stacks,
	 * code objects and naming calls go on until the ring is truly full. */
	avail = bpf_ringbuf_query(&libcall_events, BPF_RB_AVAIL_DATA);
	/* A numbered collective is never shed: it is what ranks are matched by. */
	if (dur < CW_LAUNCH_KEEP_NS && !(cookie & (CW_COOKIE_NAMING | CW_COOKIE_SEQ_MASK)) &&
	    ring_filling(avail)) {
		if (st)
			st->shed++;
		cw_count_drop(CW_DROP_SHED);
		return 0;
	}

	e = bpf_ringbuf_reserve(&libcall_events, sizeof(*e), 0);
	if (!e) {
		if (st)
			st->dropped++;
		cw_count_drop(CW_DROP_LIBCALL);
		return 0;
	}
	cw_fill_header(&e->hdr, CW_EV_CALL, f->ts, tgid, tid);
	e->dur_ns = dur;
	e->ret = ret;
	e->op = op;
	e->flags = f->flags | agg_flag | (d > 0 && !outer_transparent ? CW_CALL_NESTED : 0);
	e->depth = d;
	__builtin_memcpy(e->args, f->args, sizeof(e->args));
	__builtin_memcpy(e->stack, f->stack, sizeof(e->stack));
	__builtin_memcpy(e->deref, f->deref, sizeof(e->deref));
	e->out_value = 0;
	e->aux = f->aux;
	e->stack_hash = f->stack_hash;
	e->last_launch_ts = mark ? mark->ts : 0;
	e->launch_count = mark ? mark->count : 0;
	if (cookie & CW_COOKIE_OUT0)
		bpf_probe_read_user(&e->out_value, sizeof(e->out_value), (void *)f->args[0]);
	else if (cookie & CW_COOKIE_OUT1)
		bpf_probe_read_user(&e->out_value, sizeof(e->out_value), (void *)f->args[1]);
	bpf_ringbuf_submit(e, cw_submit_flags(avail, now));
	return 0;
}

SEC("uprobe")
int cw_call_entry(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;
	__u64 cookie = bpf_get_attach_cookie(ctx);
	struct cw_thread_calls *tc;
	struct cw_frame *f;
	__u32 d;
	__u64 now;

	if (stopped || !cw_cgroup_ok())
		return 0;
	if (filter_tgids) {
		if (!cw_tgid_traced(tgid))
			return 0;
	} else if (!cw_tgid_traced(tgid)) {
		__u8 one = 1;

		/* First call of a new process: trace its host context too,
		 * and say who it is while it certainly still exists. */
		if (!bpf_map_update_elem(&traced_tgids, &tgid, &one, BPF_NOEXIST))
			emit_identity(tgid, tid);
	}
	/* The clock before duty_off: a call that passes it began before user
	 * space set it, so inside the window that ends then. (After the
	 * filters: an untraced process's call reads no clock.) */
	now = bpf_ktime_get_ns();
	if ((cookie & CW_COOKIE_DUTY) && duty_off)
		return 0;

	tc = thread_calls(tid);
	if (!tc)
		return 0;
	d = drop_orphans(tc, tc->depth);
	if (d > 0 && d <= CW_MAX_NEST && now - tc->fr[d - 1].ts > CW_STALE_NS)
		d = 0;
	d = drop_unreturned(tc, d, tgid, PT_REGS_SP(ctx), cookie);
	if (d >= CW_MAX_NEST) {
		cw_count_drop(CW_DROP_NEST);
		return 0;
	}
	/* An opaque copy: the compiler cannot drop the mask the verifier needs. */
	cw_barrier_var(d);
	f = &tc->fr[d & (CW_MAX_NEST - 1)];
	f->ts = now;
	f->cookie = cookie;
	f->flags = 0;
	f->gen = (__u16)launch_gen;
	f->site_unprobed = 0;
	f->args[0] = PT_REGS_PARM1(ctx);
	f->args[1] = PT_REGS_PARM2(ctx);
	f->args[2] = PT_REGS_PARM3(ctx);
	f->args[3] = PT_REGS_PARM4(ctx);
	f->args[4] = PT_REGS_PARM5(ctx);
	f->args[5] = PT_REGS_PARM6(ctx);
	if (cookie & CW_COOKIE_STACK_ARGS) {
		/* x86-64 SysV: at entry sp points at the return address; the
		 * seventh argument onwards follow it. */
		if (!bpf_probe_read_user(f->stack, sizeof(f->stack),
					 (void *)(PT_REGS_SP(ctx) + 8)))
			f->flags |= CW_CALL_HAS_STACK;
	}
	{
		__u32 di = (cookie & CW_COOKIE_DEREF_MASK) >> CW_COOKIE_DEREF_SHIFT;

		__u32 idx = di - 1;

		if (di >= 1 && idx < 6 &&
		    !bpf_probe_read_user(f->deref, sizeof(f->deref), (void *)f->args[idx]))
			f->flags |= CW_CALL_HAS_DEREF;
	}
	f->aux = 0;
	if (cookie & CW_COOKIE_HASH_STACK)
		f->aux = hash_user_bytes((const __u8 *)(PT_REGS_SP(ctx) + 8));
	/* Numbered at entry, outermost only (ncclBcast enters ncclBroadcast:
	 * one collective), so a lost record or another return order never
	 * shifts a later number. */
	if ((cookie & CW_COOKIE_SEQ_MASK) &&
	    (d == 0 || (d == 1 && (tc->fr[0].cookie & CW_COOKIE_TRANSPARENT))))
		f->aux = number_collective(f, cookie, tgid);
	if (cookie & CW_COOKIE_SEQ_RESET) {
		struct cw_seq_key k = {.comm = f->args[0], .tgid = tgid, .peer = -1};

		bpf_map_delete_elem(&coll_seq, &k);
	}
	f->stack_hash = 0;
	f->sp = PT_REGS_SP(ctx);
	f->ret_addr = 0;
	if (cookie & (CW_COOKIE_RARE | CW_COOKIE_RETSITE)) {
#if defined(__TARGET_ARCH_x86)
		/* At entry sp points at the return address. */
		bpf_probe_read_user(&f->ret_addr, sizeof(f->ret_addr), (void *)PT_REGS_SP(ctx));
#else
		f->ret_addr = PT_REGS_RET(ctx);
#endif
	}
	if (cookie & CW_COOKIE_RETSITE) {
		struct cw_retsite_key k = {.tgid = tgid, .addr = f->ret_addr};
		__u8 zero8 = 0, *probed = bpf_map_lookup_elem(&ret_sites, &k);

		f->site_unprobed = !(probed && *probed);

		/* A site not seen in this process: user space probes it (the
		 * calls from it until then return unseen, counted as drops). */
		if (!bpf_map_update_elem(&ret_sites, &k, &zero8, BPF_NOEXIST)) {
			struct cw_retsite_event *r =
				bpf_ringbuf_reserve(&libcall_events, sizeof(*r), 0);

			if (r) {
				cw_fill_header(&r->hdr, CW_EV_RETSITE, now, tgid, tid);
				r->addr = f->ret_addr;
				r->op = cookie & CW_COOKIE_OP_MASK;
				bpf_ringbuf_submit(r, BPF_RB_FORCE_WAKEUP);
			} else {
				bpf_map_delete_elem(&ret_sites, &k);
			}
		}
	}
	/* A nested call (cuMemAlloc inside cudaMalloc) is not recorded: its
	 * stack would be walked and then thrown away. Inside a transparent
	 * frame (a tensor allocation growing the pool) it is outermost. */
	if ((cookie & CW_COOKIE_RARE) &&
	    (d == 0 || (d == 1 && (tc->fr[0].cookie & CW_COOKIE_TRANSPARENT)))) {
		f->stack_hash = cw_capture_pystack_site(ctx, ((__u64)tgid << 32) | tid, now, f->ret_addr, 0);
		if (f->stack_hash)
			f->flags |= CW_CALL_HAS_PYSTACK;
	}
	/* Recorded now: nothing to wait for at its return (the frames it
	 * found over still go). */
	if (cookie & CW_COOKIE_ENTRY_ONLY) {
		tc->depth = d;
		return finish_call(ctx, tc, f, d, tgid, tid, now, 0);
	}
	tc->depth = d + 1;
	return 0;
}

SEC("uretprobe")
int cw_call_return(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;
	struct cw_thread_calls *tc = bpf_map_lookup_elem(&inflight, &tid);
	__u32 d;

	if (!tc || stopped)
		return 0;
	d = tc->depth;
	/* An orphan above this call's own frame (its probes were detached
	 * while it ran), or a frame an exception left behind, is not this
	 * call: drop it first. */
	if ((bpf_get_attach_cookie(ctx) & CW_COOKIE_OP_MASK) != 0 && d > 0 && d <= CW_MAX_NEST &&
	    (tc->fr[(d - 1) & (CW_MAX_NEST - 1)].cookie & CW_COOKIE_OP_MASK) !=
		    (bpf_get_attach_cookie(ctx) & CW_COOKIE_OP_MASK))
		d = drop_unreturned(tc, drop_orphans(tc, d), tgid, PT_REGS_SP(ctx),
				    bpf_get_attach_cookie(ctx));
	if (d == 0 || d > CW_MAX_NEST)
		return 0;
	d -= 1;
	tc->depth = d;
	return finish_call(ctx, tc, &tc->fr[d & (CW_MAX_NEST - 1)], d, tgid, tid, bpf_ktime_get_ns(),
			   PT_REGS_RC(ctx));
}

/* The return of a CW_COOKIE_RETSITE call: a plain uprobe on the instruction
 * after a call to it, which anything else may jump to as well, so only the
 * thread's top frame of this op, left with its stack pointer just above the
 * frame's entry (the return address popped), is this call's return. */
SEC("uprobe")
int cw_call_retsite(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;
	struct cw_thread_calls *tc = bpf_map_lookup_elem(&inflight, &tid);
	struct cw_frame *f;
	__u32 d;

	if (!tc || stopped)
		return 0;
	d = tc->depth;
	if (d == 0 || d > CW_MAX_NEST)
		return 0;
	d -= 1;
	f = &tc->fr[d & (CW_MAX_NEST - 1)];
	if (!(f->cookie & CW_COOKIE_RETSITE) ||
	    (f->cookie & CW_COOKIE_OP_MASK) != (bpf_get_attach_cookie(ctx) & CW_COOKIE_OP_MASK) ||
	    PT_REGS_SP(ctx) != f->sp + CW_RET_POP)
		return 0;
	tc->depth = d;
	return finish_call(ctx, tc, f, d, tgid, tid, bpf_ktime_get_ns(), 0);
}

/* ---- A framework's own tracepoints (USDT): PyTorch's caching allocator
 * marks each tensor's allocation (pytorch:malloc ptr device size stream, once
 * the block is handed out) and free (pytorch:free ptr). One record each, in
 * the layout of the allocator's methods (include/causeway/common/op_table.h:
 * ops 240/241), with the Python line of the allocation. The attach cookie is
 * the op's. Nothing waits for a return, so nothing breaks when it throws. */
static __always_inline int usdt_call(struct pt_regs *ctx, int alloc)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;
	__u64 cookie = bpf_usdt_cookie(ctx), now;
	__u32 op = cookie & CW_COOKIE_OP_MASK;
	struct cw_op_stats *st;
	struct cw_call_event *e;
	long ptr = 0, device = 0, size = 0, stream = 0;
	__u64 stack_hash = 0;

	if (stopped || !cw_cgroup_ok() || op >= CW_MAX_OPS || ((cookie & CW_COOKIE_DUTY) && duty_off))
		return 0;
	if (!cw_tgid_traced(tgid)) {
		__u8 one = 1;

		if (filter_tgids)
			return 0;
		if (!bpf_map_update_elem(&traced_tgids, &tgid, &one, BPF_NOEXIST))
			emit_identity(tgid, tid);
	}
	now = bpf_ktime_get_ns();
	bpf_usdt_arg(ctx, 0, &ptr);
	if (alloc) {
		bpf_usdt_arg(ctx, 1, &device);
		bpf_usdt_arg(ctx, 2, &size);
		bpf_usdt_arg(ctx, 3, &stream);
		stack_hash = cw_capture_pystack_site(ctx, id, now, PT_REGS_IP(ctx), CW_STACK_PY_ONLY);
	}
	st = bpf_map_lookup_elem(&op_stats, &op);
	if (st)
		st->calls++;
	e = bpf_ringbuf_reserve(&libcall_events, sizeof(*e), 0);
	if (!e) {
		if (st)
			st->dropped++;
		cw_count_drop(CW_DROP_LIBCALL);
		return 0;
	}
	__builtin_memset(e, 0, sizeof(*e));
	cw_fill_header(&e->hdr, CW_EV_CALL, now, tgid, tid);
	e->op = op;
	e->flags = stack_hash ? CW_CALL_HAS_PYSTACK : 0;
	e->stack_hash = stack_hash;
	if (alloc) {
		/* NativeCachingAllocator::malloc(this, void **devPtr, device, size, stream) */
		e->args[2] = device;
		e->args[3] = size;
		e->args[4] = stream;
		e->out_value = ptr;
	} else {
		e->args[0] = ptr;  /* local_raw_delete(void *ptr) */
	}
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
	return 0;
}

SEC("usdt")
int cw_torch_malloc(struct pt_regs *ctx) { return usdt_call(ctx, 1); }

SEC("usdt")
int cw_torch_free(struct pt_regs *ctx) { return usdt_call(ctx, 0); }

/* ---- CPU samples of traced Python threads (include/causeway/model/cpu_samples.h)
 * A cpu-clock perf event on every CPU runs this for whatever is on the CPU;
 * only threads of traced Python processes are sampled: their Python stack
 * (sent once per process) and whether they are inside a traced call. */
SEC("perf_event")
int cw_cpu_sample(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;
	struct cw_thread_calls *tc;
	struct cw_cpu_sample_event *e;
	__u64 now, hash;

	if (!tgid || !cw_tgid_traced(tgid) || !bpf_map_lookup_elem(&py_procs, &tgid))
		return 0;
	now = bpf_ktime_get_ns();
	hash = 0;
	if (cw_walk_into_scratch(tgid, tid, CW_SLOT_SAMPLE))
		hash = cw_send_pystack(tgid, tid, now, CW_SLOT_SAMPLE);
	e = bpf_ringbuf_reserve(&libcall_events, sizeof(*e), 0);
	if (!e) {
		cw_count_drop(CW_DROP_SAMPLE);
		return 0;
	}
	cw_fill_header(&e->hdr, CW_EV_CPU_SAMPLE, now, tgid, tid);
	e->stack_hash = hash;
	tc = bpf_map_lookup_elem(&inflight, &tid);
	e->in_call = tc && drop_orphans(tc, tc->depth) > 0;
	e->_pad = 0;
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
	return 0;
}

/* ---- Where a traced Python thread goes to sleep (offcpu_events.stack_id)
 * Its Python stack at the switch, when it sleeps (not when preempted): the
 * line that slept (time.sleep), waited for a lock, the GIL, a queue, or
 * the disk (fsync). The switch runs in the sleeping thread's context, so
 * its memory is current's. At most one walk per thread per
 * wait_stack_every_ns: a thread that hands the GIL back and forth sleeps
 * thousands of times a second, and the long sleeps that matter come after
 * long runs. */
const volatile __u64 wait_stack_every_ns = 2000000;

SEC("tp_btf/sched_switch")
int BPF_PROG(cw_wait_stack, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;
	struct cw_wait_stack *last, w;
	__u64 now;

	if (preempt || prev_state == 0 || !tgid || !cw_tgid_traced(tgid) || !bpf_map_lookup_elem(&py_procs, &tgid))
		return 0;
	now = bpf_ktime_get_ns();
	last = bpf_map_lookup_elem(&wait_stacks, &tid);
	if (last && now - last->ts < wait_stack_every_ns)
		return 0;
	w.ts = now;
	w.hash = 0;
	if (cw_walk_into_scratch(tgid, tid, CW_SLOT_WAIT))
		w.hash = cw_send_pystack(tgid, tid, now, CW_SLOT_WAIT);
	bpf_map_update_elem(&wait_stacks, &tid, &w, BPF_ANY);
	return 0;
}
