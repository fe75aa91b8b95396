// SPDX-License-Identifier: GPL-2.0-only
/*
 * Host context of traced processes: off-CPU intervals (sched_switch /
 * sched_waking), block requests, TCP retransmits, process lifetimes and direct
 * reclaim. tp_btf everywhere: typed arguments, CO-RE field reads, no
 * tracepoint-format parsing.
 */
#include "common.bpf.h"
#include "causeway/model/block_io.h"
#include "causeway/model/offcpu.h"
#include "causeway/model/reclaims.h"
#include "causeway/model/tcp_retransmits.h"
#include "causeway/model/threads.h"

/* Off-CPU intervals shorter than this are not recorded (a traced thread that
 * blocks on every CUDA sync would otherwise flood the ring). */
const volatile __u64 offcpu_min_ns = 20000;
/* Block requests of untraced processes are recorded only when this slow. */
const volatile __u64 io_slow_ns = 5000000;
/* Reclaim episodes of untraced tasks are recorded only when this slow. */
const volatile __u64 reclaim_slow_ns = 1000000;

/* --comm: a process that execs one of these names is traced from its first
 * instruction (user space would learn of it too late for its first calls). */
#define CW_MAX_COMMS 8
const volatile char filter_comms[CW_MAX_COMMS][CW_COMM_LEN] = {};
const volatile __u32 n_filter_comms = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} host_events SEC(".maps");

/* struct cw_offcpu_start: include/causeway/model/offcpu.h (user space reads
 * it when the trace stops: a thread still off-CPU then) */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 32768);
	__type(key, __u32);     /* tid */
	__type(value, struct cw_offcpu_start);
} offcpu_starts SEC(".maps");

struct waking {
	__u64 waker;            /* tgid << 32 | tid */
	__u64 ts;               /* when it was woken */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 32768);
	__type(key, __u32);     /* tid of the woken task */
	__type(value, struct waking);
} wakers SEC(".maps");

struct io_start {
	__u64 ts;
	__u32 pid;
	__u32 tid;
	__u64 cgroup_id;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);     /* struct request * */
	__type(value, struct io_start);
} io_starts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);     /* tid */
	__type(value, __u64);
} reclaim_starts SEC(".maps");

static __always_inline __u32 state_class(unsigned int prev_state)
{
	if (prev_state == 0)
		return CW_STATE_RUNNING;
	if (prev_state & 1)
		return CW_STATE_SLEEPING;
	if (prev_state & 2)
		return CW_STATE_DISK;
	return CW_STATE_OTHER;
}

#define CW_SYS_FUTEX 202        /* x86-64 */
/* struct _gil_runtime_state, 3.10 to 3.14: interval, last_holder, locked. */
#define CW_GIL_LAST_HOLDER 8
#define CW_GIL_LOCKED 16

static __always_inline __u64 read_user_u64(__u64 addr)
{
	__u64 v = 0;

	if (!addr || bpf_probe_read_user(&v, sizeof(v), (void *)addr))
		return 0;
	return v;
}

/* What a thread going to sleep waits in: the system call it entered (its
 * saved user registers) and that call's first argument; a futex inside the
 * Python interpreter lock is a wait for the GIL. The switch runs in the
 * sleeping thread's own context, so its memory is current's. */
static __always_inline void wait_of(struct task_struct *t, struct cw_offcpu_start *s)
{
	s->syscall = -1;
	s->wait = CW_WAIT_UNKNOWN;
	s->wait_arg = 0;
	s->holder_tid = 0;
#if defined(__TARGET_ARCH_x86)
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(t);
	struct cw_py_proc *pp;
	__u32 tgid;
	__u64 gil;

	if (!regs)
		return;
	s->syscall = (__s32)BPF_CORE_READ(regs, orig_ax);
	s->wait_arg = BPF_CORE_READ(regs, di);
	if (s->syscall != CW_SYS_FUTEX)
		return;
	tgid = BPF_CORE_READ(t, tgid);
	pp = bpf_map_lookup_elem(&py_procs, &tgid);
	if (!pp || !pp->gil_size)
		return;
	if (pp->gil_flags & CW_PY_GIL_VIA_INTERP)
		gil = read_user_u64(read_user_u64(pp->runtime + pp->rt_interp_head) + pp->gil_off);
	else
		gil = pp->runtime + pp->gil_off;
	if (!gil || s->wait_arg < gil || s->wait_arg >= gil + pp->gil_size)
		return;
	s->wait = CW_WAIT_GIL;
	/* Who holds it: last_holder (a thread state) while locked is set; its
	 * native thread id (3.11+; 3.10 keeps a pthread_t there). */
	if (!(pp->flags & CW_PY_MATCH_PTHREAD) && (__u32)read_user_u64(gil + CW_GIL_LOCKED))
		s->holder_tid = (__u32)read_user_u64(read_user_u64(gil + CW_GIL_LAST_HOLDER) + pp->ts_thread_id);
#endif
}

static __always_inline int task_traced(struct task_struct *t)
{
	__u32 tgid = BPF_CORE_READ(t, tgid);

	return tgid && cw_tgid_traced(tgid);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(cw_sched_switch, bool preempt, struct task_struct *prev,
	     struct task_struct *next, unsigned int prev_state)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 next_tid = BPF_CORE_READ(next, pid);

	if (task_traced(prev)) {
		struct cw_offcpu_start s = {};
		__u32 tid = BPF_CORE_READ(prev, pid);

		s.ts = now;
		s.state = preempt ? CW_STATE_RUNNING : state_class(prev_state);
		s.by_pid = BPF_CORE_READ(next, tgid);
		BPF_CORE_READ_STR_INTO(&s.by_comm, next, comm);
		/* Asleep or in uninterruptible I/O: what it waits in (a futex,
		 * the interpreter lock, a read, an fsync). */
		if (s.state == CW_STATE_SLEEPING || s.state == CW_STATE_DISK)
			wait_of(prev, &s);
		else
			s.syscall = -1;
		bpf_map_update_elem(&offcpu_starts, &tid, &s, BPF_ANY);
	}
	if (task_traced(next)) {
		struct cw_offcpu_start *s = bpf_map_lookup_elem(&offcpu_starts, &next_tid);
		struct cw_offcpu_event *e;
		struct cw_wait_stack *ws;
		struct waking *w;

		if (!s)
			return 0;
		if (now - s->ts < offcpu_min_ns) {
			bpf_map_delete_elem(&offcpu_starts, &next_tid);
			return 0;
		}
		e = bpf_ringbuf_reserve(&host_events, sizeof(*e), 0);
		if (!e) {
			cw_count_drop(CW_DROP_HOST);
			bpf_map_delete_elem(&offcpu_starts, &next_tid);
			return 0;
		}
		e->hdr.type = CW_EV_OFFCPU;
		e->hdr.cpu = bpf_get_smp_processor_id();
		e->hdr.ts_ns = s->ts;
		e->hdr.pid = BPF_CORE_READ(next, tgid);
		e->hdr.tid = next_tid;
		e->hdr.cgroup_id = 0;
		e->dur_ns = now - s->ts;
		e->state = s->state;
		e->by_pid = s->by_pid;
		e->syscall = s->syscall;
		e->wait = s->wait;
		e->wait_arg = s->wait_arg;
		e->holder_tid = s->holder_tid;
		__builtin_memcpy(e->by_comm, s->by_comm, CW_COMM_LEN);
		e->runq_ns = 0;
		/* The stack the libcall skeleton took at this switch-out, if it took one. */
		ws = bpf_map_lookup_elem(&wait_stacks, &next_tid);
		e->stack_hash = ws && ws->ts + CW_WAIT_STACK_SLACK_NS >= s->ts && ws->ts <= s->ts + CW_WAIT_STACK_SLACK_NS ?
				ws->hash : 0;
		w = bpf_map_lookup_elem(&wakers, &next_tid);
		if (w) {
			e->waker_pid = w->waker >> 32;
			e->waker_tid = (__u32)w->waker;
			/* Woken while off: from then on it waited for a CPU, behind
			 * the task it now replaces. */
			if (w->ts >= s->ts && now > w->ts) {
				__u64 q = now - w->ts;

				e->runq_ns = q > 0xffffffffULL ? 0xffffffffU : (__u32)q;
				if (s->state != CW_STATE_RUNNING) {
					e->by_pid = BPF_CORE_READ(prev, tgid);
					BPF_CORE_READ_STR_INTO(&e->by_comm, prev, comm);
				}
			}
			bpf_map_delete_elem(&wakers, &next_tid);
		} else {
			e->waker_pid = 0;
			e->waker_tid = 0;
		}
		bpf_map_delete_elem(&offcpu_starts, &next_tid);
		bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
	}
	return 0;
}

/* Whether the tracepoint fired on the current task's kernel stack: the
 * address of its arguments (the context, which the kernel's tracepoint
 * call keeps on the stack it runs on; a program's own frame may be a
 * private per-CPU stack) against the task's stack (the vmalloc'd area's
 * pages where the kernel keeps them; else x86-64's 16 KiB). */
static __always_inline bool on_task_stack(struct task_struct *t, void *ctx)
{
	__u64 here = 0, base = (__u64)BPF_CORE_READ(t, stack);
	__u64 size = 16384;

	/* As a number (the verifier allows no arithmetic on a context pointer). */
	bpf_probe_read_kernel(&here, sizeof(here), &ctx);
	if (bpf_core_field_exists(t->stack_vm_area)) {
		__u64 pages = BPF_CORE_READ(t, stack_vm_area, nr_pages);

		if (pages)
			size = pages << 12;
	}
	return here - base < size;
}

/* A wake-up from an interrupt (a device's completion, a timer) runs on top
 * of whatever task the CPU was running: that task woke no one. x86-64 runs
 * hard interrupts and softirqs (also those a system call runs as it
 * re-enables them) on the CPU's IRQ stack, off the task's: nothing run
 * there is taken as the task's, wherever it landed (a timer firing while a
 * busy task is in a system call of its own). Its cost: a send on loopback
 * TCP wakes the receiver from the softirq its own system call runs, and has
 * no waker either (an unknown waker, never a wrong one). Otherwise a user
 * task wakes another from a system call; entered any other way (an
 * exception on its user code: orig_ax is -1) it is not the waker. */
static __always_inline bool woken_by_interrupt(void *ctx)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct pt_regs *regs;

	if (!on_task_stack(t, ctx))
		return true;
	if (BPF_CORE_READ(t, flags) & 0x00200000)  /* PF_KTHREAD: no user entry */
		return false;
	regs = (struct pt_regs *)bpf_task_pt_regs(t);
	return regs && (long)BPF_CORE_READ(regs, orig_ax) < 0;
}

/* sched_waking runs in the waker's context; sched_wakeup of a wake-up
 * queued to another CPU (ttwu_queue: CPUs that share no cache, or an idle
 * target) runs on that CPU, where the current task is not the waker. */
SEC("tp_btf/sched_waking")
int BPF_PROG(cw_sched_waking, struct task_struct *p)
{
	struct waking w;
	__u32 tid;

	if (!task_traced(p))
		return 0;
	tid = BPF_CORE_READ(p, pid);
	w.waker = woken_by_interrupt(ctx) ? 0 : bpf_get_current_pid_tgid();
	w.ts = bpf_ktime_get_ns();
	bpf_map_update_elem(&wakers, &tid, &w, BPF_ANY);
	return 0;
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(cw_block_rq_issue, struct request *rq)
{
	__u64 key = (__u64)rq;
	__u64 id = bpf_get_current_pid_tgid();
	struct io_start s = {
		.ts = bpf_ktime_get_ns(),
		.pid = id >> 32,
		.tid = (__u32)id,
		.cgroup_id = bpf_get_current_cgroup_id(),
	};

	bpf_map_update_elem(&io_starts, &key, &s, BPF_ANY);
	return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(cw_block_rq_complete, struct request *rq, blk_status_t error, unsigned int nr_bytes)
{
	__u64 key = (__u64)rq;
	struct io_start *s = bpf_map_lookup_elem(&io_starts, &key);
	struct cw_block_io_event *e;
	struct gendisk *disk;
	__u64 now, dur;
	__u32 opf;

	if (!s)
		return 0;
	now = bpf_ktime_get_ns();
	dur = now - s->ts;
	if (!cw_tgid_traced(s->pid) && dur < io_slow_ns) {
		bpf_map_delete_elem(&io_starts, &key);
		return 0;
	}
	e = bpf_ringbuf_reserve(&host_events, sizeof(*e), 0);
	if (!e) {
		cw_count_drop(CW_DROP_HOST);
		bpf_map_delete_elem(&io_starts, &key);
		return 0;
	}
	e->hdr.type = CW_EV_BLOCK_IO;
	e->hdr.cpu = bpf_get_smp_processor_id();
	e->hdr.ts_ns = s->ts;
	e->hdr.pid = s->pid;
	e->hdr.tid = s->tid;
	e->hdr.cgroup_id = s->cgroup_id;
	e->dur_ns = dur;
	e->sector = BPF_CORE_READ(rq, __sector);
	disk = BPF_CORE_READ(rq, q, disk);
	e->dev = ((__u32)BPF_CORE_READ(disk, major) << 20) | (__u32)BPF_CORE_READ(disk, first_minor);
	e->bytes = nr_bytes ? nr_bytes : BPF_CORE_READ(rq, __data_len);
	opf = BPF_CORE_READ(rq, cmd_flags) & 0xff;
	e->op = opf == 0 ? 0 : opf == 1 ? 1 : opf == 2 ? 2 : opf == 3 ? 3 : 4;
	e->_pad = 0;
	bpf_map_delete_elem(&io_starts, &key);
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
	return 0;
}

SEC("tp_btf/tcp_retransmit_skb")
int BPF_PROG(cw_tcp_retransmit_skb, const struct sock *sk)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct cw_tcp_retrans_event *e;
	__u16 family = BPF_CORE_READ(sk, __sk_common.skc_family);

	e = bpf_ringbuf_reserve(&host_events, sizeof(*e), 0);
	if (!e) {
		cw_count_drop(CW_DROP_HOST);
		return 0;
	}
	cw_fill_header(&e->hdr, CW_EV_TCP_RETRANS, bpf_ktime_get_ns(), id >> 32, (__u32)id);
	e->family = family;
	e->sport = BPF_CORE_READ(sk, __sk_common.skc_num);
	e->dport = __builtin_bswap16(BPF_CORE_READ(sk, __sk_common.skc_dport));
	e->state = BPF_CORE_READ(sk, __sk_common.skc_state);
	__builtin_memset(e->saddr, 0, sizeof(e->saddr));
	__builtin_memset(e->daddr, 0, sizeof(e->daddr));
	if (family == 2 /* AF_INET */) {
		BPF_CORE_READ_INTO(e->saddr, sk, __sk_common.skc_rcv_saddr);
		BPF_CORE_READ_INTO(e->daddr, sk, __sk_common.skc_daddr);
	} else {
		BPF_CORE_READ_INTO(e->saddr, sk, __sk_common.skc_v6_rcv_saddr);
		BPF_CORE_READ_INTO(e->daddr, sk, __sk_common.skc_v6_daddr);
	}
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
	return 0;
}

static __always_inline void emit_proc(__u32 type, struct task_struct *t, __u32 ppid,
				      __s32 code, const char *filename, __u64 rb_flags)
{
	struct cw_proc_event *e = bpf_ringbuf_reserve(&host_events, sizeof(*e), 0);

	if (!e) {
		cw_count_drop(CW_DROP_HOST);
		return;
	}
	e->hdr.type = type;
	e->hdr.cpu = bpf_get_smp_processor_id();
	e->hdr.ts_ns = bpf_ktime_get_ns();
	e->hdr.pid = BPF_CORE_READ(t, tgid);
	e->hdr.tid = BPF_CORE_READ(t, pid);
	e->hdr.cgroup_id = bpf_get_current_cgroup_id();
	e->ppid = ppid;
	e->exit_code = code;
	BPF_CORE_READ_STR_INTO(&e->comm, t, comm);
	e->filename[0] = 0;
	e->args_len = 0;
	e->_pad = 0;
	if (filename) {
		bpf_probe_read_kernel_str(e->filename, sizeof(e->filename), filename);
		/* exec: current is the new image, its arguments are in place */
		cw_read_args(e);
	}
	bpf_ringbuf_submit(e, rb_flags);
}

/* Every exec is reported: user space rescans the new image's maps for GPU
 * libraries (discovery of processes that start after the trace began). */
static __always_inline int comm_matches(const char *comm, int idx)
{
	for (int i = 0; i < CW_COMM_LEN; i++) {
		if (comm[i] != filter_comms[idx][i])
			return 0;
		if (!comm[i])
			return 1;
	}
	return 1;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(cw_process_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	if (n_filter_comms) {
		char comm[CW_COMM_LEN];
		__u32 tgid = BPF_CORE_READ(p, tgid);
		__u8 one = 1;

		BPF_CORE_READ_STR_INTO(&comm, p, comm);
		for (int i = 0; i < CW_MAX_COMMS; i++) {
			if (i >= n_filter_comms)
				break;
			if (comm_matches(comm, i)) {
				bpf_map_update_elem(&traced_tgids, &tgid, &one, BPF_ANY);
				break;
			}
		}
	}
	/* The one record that wakes the consumer: execs are rare, and a new
	 * process must be registered (libraries, Python runtime) before its
	 * first calls, not at the next 50 ms drain. */
	emit_proc(CW_EV_PROC_EXEC, p, BPF_CORE_READ(p, real_parent, tgid), 0,
		  BPF_CORE_READ(bprm, filename), BPF_RB_FORCE_WAKEUP);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(cw_process_exit, struct task_struct *p)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);

	/* Only the group leader's exit ends a process. */
	if (BPF_CORE_READ(p, pid) != tgid || !cw_tgid_traced(tgid))
		return 0;
	emit_proc(CW_EV_PROC_EXIT, p, BPF_CORE_READ(p, real_parent, tgid),
		  BPF_CORE_READ(p, exit_code) >> 8, NULL, BPF_RB_NO_WAKEUP);
	return 0;
}

/* A thread of a traced process got a name (threads family). */
static __always_inline void emit_thread(struct task_struct *t, __u32 what)
{
	struct cw_thread_event *e = bpf_ringbuf_reserve(&host_events, sizeof(*e), 0);

	if (!e) {
		cw_count_drop(CW_DROP_HOST);
		return;
	}
	e->hdr.type = CW_EV_THREAD;
	e->hdr.cpu = bpf_get_smp_processor_id();
	e->hdr.ts_ns = bpf_ktime_get_ns();
	e->hdr.pid = BPF_CORE_READ(t, tgid);
	e->hdr.tid = BPF_CORE_READ(t, pid);
	e->hdr.cgroup_id = 0;
	BPF_CORE_READ_STR_INTO(&e->comm, t, comm);
	e->what = what;
	e->_pad = 0;
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
}

/* A traced parent's children (dataloader workers) are traced from birth;
 * its new threads are named. */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(cw_process_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = BPF_CORE_READ(parent, tgid);
	__u32 ctgid = BPF_CORE_READ(child, tgid);
	__u8 one = 1;

	if (!cw_tgid_traced(ptgid))
		return 0;
	if (ctgid == ptgid) {
		emit_thread(child, CW_THREAD_CREATED);
		return 0;
	}
	bpf_map_update_elem(&traced_tgids, &ctgid, &one, BPF_ANY);
	emit_proc(CW_EV_PROC_FORK, child, ptgid, 0, NULL, BPF_RB_NO_WAKEUP);
	return 0;
}

SEC("tp_btf/mm_vmscan_direct_reclaim_begin")
int BPF_PROG(cw_reclaim_begin)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 ts = bpf_ktime_get_ns();

	bpf_map_update_elem(&reclaim_starts, &tid, &ts, BPF_ANY);
	return 0;
}

SEC("tp_btf/mm_vmscan_direct_reclaim_end")
int BPF_PROG(cw_reclaim_end, unsigned long nr_reclaimed)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id, tgid = id >> 32;
	__u64 *ts = bpf_map_lookup_elem(&reclaim_starts, &tid);
	struct cw_reclaim_event *e;
	__u64 start, dur;

	if (!ts)
		return 0;
	start = *ts;
	bpf_map_delete_elem(&reclaim_starts, &tid);
	dur = bpf_ktime_get_ns() - start;
	if (!cw_tgid_traced(tgid) && dur < reclaim_slow_ns)
		return 0;
	e = bpf_ringbuf_reserve(&host_events, sizeof(*e), 0);
	if (!e) {
		cw_count_drop(CW_DROP_HOST);
		return 0;
	}
	cw_fill_header(&e->hdr, CW_EV_RECLAIM, start, tgid, tid);
	e->dur_ns = dur;
	e->nr_reclaimed = nr_reclaimed;
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
	return 0;
}

/* A thread of a traced process renamed itself: the new name (the tracepoint
 * fires before task->comm is written). */
SEC("tp_btf/task_rename")
int BPF_PROG(cw_task_rename, struct task_struct *task, const char *comm)
{
	struct cw_thread_event *e;

	if (!task_traced(task))
		return 0;
	e = bpf_ringbuf_reserve(&host_events, sizeof(*e), 0);
	if (!e) {
		cw_count_drop(CW_DROP_HOST);
		return 0;
	}
	e->hdr.type = CW_EV_THREAD;
	e->hdr.cpu = bpf_get_smp_processor_id();
	e->hdr.ts_ns = bpf_ktime_get_ns();
	e->hdr.pid = BPF_CORE_READ(task, tgid);
	e->hdr.tid = BPF_CORE_READ(task, pid);
	e->hdr.cgroup_id = 0;
	bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), comm);
	e->what = CW_THREAD_RENAMED;
	e->_pad = 0;
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
	return 0;
}
