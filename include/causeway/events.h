/* SPDX-License-Identifier: (GPL-2.0-only OR Apache-2.0) */
/*
 * The kernel <-> user-space ABI of causeway that all probe families share:
 * the common record header and the library-call record of
 * bpf/libcall.bpf.c. Each other record family's struct is in its own header,
 * include/causeway/model/<family>.h (C for the BPF programs, and the family's
 * C++ declaration). No other copy of these structs exists.
 *
 * Rules: fixed-size records, naturally aligned, no pointers dereferenced in
 * user space (addresses are opaque numbers), times are CLOCK_MONOTONIC ns
 * (bpf_ktime_get_ns); the consumer converts them to wall-clock.
 */
#ifndef CAUSEWAY_EVENTS_H
#define CAUSEWAY_EVENTS_H

#ifndef __VMLINUX_H__
#include <linux/types.h> /* __u8 .. __s64, as the kernel defines them */
#endif

#define CW_COMM_LEN 16
#define CW_MAX_OPS 256          /* op ids are < CW_MAX_OPS; see src/common/op_table.cpp */
#define CW_PY_MAX_FRAMES 24     /* Python frames captured per call */
#define CW_MAX_NEST 4           /* traced calls nested on one thread */

/* Record types (cw_header.type). The library-call record is defined here;
 * every other family defines its record and its type number in its own
 * header, include/causeway/model/<family>.h (docs/architecture.md). Numbers
 * are unique: the build checks (include/causeway/model/registry.h). */
#define CW_EV_CALL 1            /* a traced library call (cuda/nccl/hip/verbs) */
#define CW_EV_RETSITE 14        /* a CW_COOKIE_RETSITE call came from a return site not seen before */

/* Common header of every record. */
struct cw_header {
	__u32 type;             /* CW_EV_* */
	__u32 cpu;
	__u64 ts_ns;            /* monotonic; for intervals, the start */
	__u32 pid;              /* tgid */
	__u32 tid;
	__u64 cgroup_id;
};

/*
 * Attach cookie of a library-call uprobe: what the generic programs in
 * bpf/libcall.bpf.c need to know about the function they are attached to.
 * One generic entry/return pair serves every API function; the per-function
 * knowledge (which argument is a size, a dim3, a config struct) lives in the
 * user-space op table and is decoded from the raw arguments.
 */
#define CW_COOKIE_OP_MASK     0xffffULL
#define CW_COOKIE_STACK_ARGS  (1ULL << 16)  /* copy CW_STACK_WORDS words above the return address */
#define CW_COOKIE_DEREF_SHIFT 17            /* 3 bits: 1 + index of an argument to read CW_DEREF_BYTES from */
#define CW_COOKIE_DEREF_MASK  (7ULL << CW_COOKIE_DEREF_SHIFT)
#define CW_COOKIE_LAUNCH      (1ULL << 20)  /* launch class: Python stack only when slow */
#define CW_COOKIE_RARE        (1ULL << 21)  /* rare call: Python stack always */
#define CW_COOKIE_NAMING      (1ULL << 22)  /* registration/lookup call: never folded as nested */
#define CW_COOKIE_OUT0        (1ULL << 23)  /* read *(u64 *)arg0 at return (out-parameter) */
#define CW_COOKIE_RET_PTR     (1ULL << 24)  /* returns a pointer: NULL is the error */
#define CW_COOKIE_HASH_STACK  (1ULL << 25)  /* aux = FNV-1a 64 of CW_HASH_BYTES at the first stack argument
                                               (an ncclUniqueId passed by value) */
#define CW_COOKIE_KERNEL_ARG1 (1ULL << 26)  /* launch: the kernel handle is arg1 (the Ex variants), else arg0 */
#define CW_COOKIE_DUTY        (1ULL << 27)  /* called once per launch: probed only in the launch windows
                                               * of `trace --launch-duty` (attach/detach) */
#define CW_COOKIE_OUT1        (1ULL << 28)  /* read *(u64 *)arg1 at return (a C++ method's out-parameter) */
#define CW_COOKIE_TRANSPARENT (1ULL << 29)  /* a framework call (a tensor's allocation): the library calls
                                               inside it are not nested in it, but recorded as outermost */
#define CW_COOKIE_VOID        (1ULL << 30)  /* returns nothing: never counted as failed */
/* A C++ method that may throw (the caching allocator's malloc throws
 * OutOfMemoryError through itself): a uretprobe would put its trampoline in
 * the unwinder's path and turn a caught exception into std::terminate. Its
 * return is seen by a plain uprobe at its caller's return site instead,
 * attached by user space the first time a call comes from that site
 * (CW_EV_RETSITE); an exception leaves the frame behind, dropped at the
 * thread's next call. */
#define CW_COOKIE_RETSITE     (1ULL << 31)
/* Recorded at entry, no return probe (a C++ method that may throw and whose
 * return says nothing: the allocator's free). */
#define CW_COOKIE_ENTRY_ONLY  (1ULL << 32)
/* A collective or point-to-point call numbered where it is made: at entry,
 * per (process, communicator) for collectives and per (process,
 * communicator, op, peer) for send/recv, in the `coll_seq` map; the number
 * travels in aux (number + 1; 0: not numbered). NCCL requires every rank to
 * issue a communicator's collectives in the same order, so the n-th entry
 * is the n-th collective on every rank, whatever records are lost later.
 * SEQ: 1 + index of the communicator argument (0..5 registers, 6.. stack
 * words); PEER: 1 + register index of the peer. */
#define CW_COOKIE_SEQ_SHIFT   33
#define CW_COOKIE_SEQ_MASK    (0xfULL << CW_COOKIE_SEQ_SHIFT)
#define CW_COOKIE_PEER_SHIFT  37
#define CW_COOKIE_PEER_MASK   (0x7ULL << CW_COOKIE_PEER_SHIFT)
/* Destroys the communicator in arg0: its collective numbering restarts (a
 * later init may reuse the handle). */
#define CW_COOKIE_SEQ_RESET   (1ULL << 40)
#define CW_HASH_BYTES 128

#define CW_STACK_WORDS 4
#define CW_DEREF_BYTES 64

/* call flags */
#define CW_CALL_HAS_DEREF   (1u << 0)
#define CW_CALL_HAS_STACK   (1u << 1)
#define CW_CALL_HAS_PYSTACK (1u << 2)
#define CW_CALL_NESTED      (1u << 3)  /* issued from inside another traced call on this thread */
#define CW_CALL_AGGREGATED  (1u << 4)  /* a launch also counted in launch_agg (--launch-sampling):
                                          recorded because it was slow or sampled */

struct cw_call_event {
	struct cw_header hdr;   /* ts_ns = entry time */
	__u64 dur_ns;
	__s64 ret;              /* raw return register */
	__u16 op;               /* op id (cookie) */
	__u16 flags;            /* CW_CALL_* */
	__u32 depth;            /* nesting depth on this thread, 0 = outermost */
	__u64 args[6];          /* rdi rsi rdx rcx r8 r9 at entry */
	__u64 stack[CW_STACK_WORDS]; /* arguments 7.. passed on the stack */
	__u8 deref[CW_DEREF_BYTES];  /* bytes read at one pointer argument at entry */
	__u64 out_value;        /* *(u64 *)args[0] at return when CW_COOKIE_OUT0 (cudaMalloc ptr) */
	__u64 aux;              /* family-specific value computed in BPF (e.g. an id hash), 0 if none */
	__u64 stack_hash;       /* with CW_CALL_HAS_PYSTACK: the stack's identity (cw_pystack_event.hash) */
	__u64 last_launch_ts;   /* the process's latest launch return (ktime) when this call returned;
				   0: none probed yet (bpf/libcall.bpf.c map last_launch) */
	__u64 launch_count;     /* the process's launches probed by then */
};

/* The first call of a CW_COOKIE_RETSITE op from a return address, per
 * process: user space attaches the op's return-site probe there. */
struct cw_retsite_event {
	struct cw_header hdr;
	__u64 addr;             /* the return address, in the process */
	__u16 op;
	__u16 _pad[3];
};

/* A call between its entry and return probes (bpf/libcall.bpf.c keeps one
 * per nesting level per thread in the `inflight` map). User space reads it
 * to find calls that have not returned: a hung collective or sync. */
struct cw_frame {
	__u64 ts;               /* entry, ktime */
	__u64 cookie;           /* op id and CW_COOKIE_* flags */
	__u64 args[6];
	__u64 stack[CW_STACK_WORDS];
	__u8 deref[CW_DEREF_BYTES];
	__u64 aux;
	__u64 stack_hash;       /* with CW_CALL_HAS_PYSTACK: captured at entry (rare calls) */
	__u64 sp;               /* stack pointer at entry (CW_COOKIE_RETSITE: its return is
	                         * the return site reached with sp just above it) */
	__u64 ret_addr;         /* CW_COOKIE_RETSITE: the return address */
	__u16 flags;
	__u16 gen;              /* launch_gen at entry: a CW_COOKIE_DUTY frame of an older
	                         * generation lost its return when its probes were detached */
	__u16 site_unprobed;    /* CW_COOKIE_RETSITE: its return site had no probe yet at entry */
	__u16 _pad;
};

/* Key of the per-communicator collective numbering (CW_COOKIE_SEQ_*). */
struct cw_seq_key {
	__u64 comm;             /* the ncclComm_t handle */
	__u32 tgid;
	__s32 peer;             /* send/recv: the peer rank; -1 for collectives */
	__u32 op;               /* send/recv: the op id (a direction); 0 for collectives */
	__u32 _pad;
};

struct cw_thread_calls {
	__u32 depth;            /* frames 0..depth-1 are live */
	__u32 _pad;
	struct cw_frame fr[CW_MAX_NEST];
};

#endif /* CAUSEWAY_EVENTS_H */
