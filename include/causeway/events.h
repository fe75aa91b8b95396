/* SPDX-License-Identifier: (GPL-2.0-only OR Apache-2.0) */
/*
 * The kernel <-> user-space ABI of causeway: every record a BPF program emits.
 * Included by the bpf/ programs (with vmlinux.h) and by the C++ consumer (which
 * static_asserts the sizes). No other copy of these structs exists.
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

enum cw_event_type {
	CW_EV_CALL = 1,         /* a traced library call (cuda/nccl/hip/verbs) */
	CW_EV_OFFCPU = 2,       /* a traced thread was off-CPU */
	CW_EV_BLOCK_IO = 3,     /* a block request completed */
	CW_EV_TCP_RETRANS = 4,  /* tcp_retransmit_skb */
	CW_EV_PROC_EXEC = 5,
	CW_EV_PROC_EXIT = 6,
	CW_EV_PROC_FORK = 7,
	CW_EV_RECLAIM = 8,      /* a direct reclaim episode (begin..end) */
	CW_EV_PYSTACK = 9,      /* a new stack (Python frames + native), first time it is seen */
	CW_EV_PYCODE = 10,      /* a Python code object's name, file and line table, first time seen */
	CW_EV_PROC_IDENTITY = 11, /* who a process is, at its first traced call (cw_proc_event) */
};

/* Common header of every record. */
struct cw_header {
	__u32 type;             /* enum cw_event_type */
	__u32 cpu;
	__u64 ts_ns;            /* monotonic; for intervals, the start */
	__u32 pid;              /* tgid */
	__u32 tid;
	__u64 cgroup_id;
};

/*
 * Attach cookie of a library-call uprobe: what the generic programs in
 * bpf/libcall.bpf.h need to know about the function they are attached to.
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
};

/*
 * A call's stack: its Python frames and its native user stack. Stacks are
 * deduplicated in the kernel: each (process, stack) is sent once, the first
 * time it is seen, as this record; every call made from it carries only its
 * hash (cw_call_event.stack_hash). Native frames come with the file they are
 * in (device, inode, file offset of the mapping), so that they can be named
 * after the process is gone. Frame 0 is the innermost.
 */
#define CW_NATIVE_MAX_FRAMES 64
#define CW_STACK_MAX_MODULES 8
#define CW_MODULE_NAME_LEN 48
#define CW_NO_MODULE 0xff       /* no mapping found for the frame (or lookups ran out) */
#define CW_ANON_MODULE 0xfe     /* an anonymous mapping (JIT code) */
struct cw_native_module {
	__u64 start;            /* the mapping: [start, end) in the process */
	__u64 end;
	__u64 file_offset;      /* file offset of start (vm_pgoff * page size) */
	__u64 ino;
	__u32 dev;              /* kernel dev_t of the file's filesystem: major << 20 | minor */
	__u32 _pad;
	char name[CW_MODULE_NAME_LEN]; /* the file's name, without its folder */
};

struct cw_pystack_event {
	struct cw_header hdr;   /* ts_ns = entry time of the call that first had it */
	__u32 nframes;
	__u32 py_version;       /* major << 8 | minor, 0 = not a known Python */
	__u64 code[CW_PY_MAX_FRAMES];   /* code object addresses */
	__u32 lasti[CW_PY_MAX_FRAMES];  /* instruction offset in bytes of each frame */
	__u32 entry_mask;       /* bit i: frame i is the outermost frame of one eval-loop
	                           invocation (where the native stack shows the eval function) */
	__u32 native_n;         /* addresses in native[] */
	__u64 native[CW_NATIVE_MAX_FRAMES]; /* user stack, frame-pointer walk, [0] = the probed pc */
	__u64 hash;             /* identity of (process, frames); never 0 */
	__u32 nmodules;
	__u32 _pad;
	__u8 module_of[CW_NATIVE_MAX_FRAMES]; /* native[i] lies in modules[module_of[i]],
	                                        or CW_ANON_MODULE, CW_NO_MODULE */
	struct cw_native_module modules[CW_STACK_MAX_MODULES];
};

/* Keys of the kernel's "already sent" sets (LRU hashes stack_seen and
 * code_seen). User space deletes a key when it cannot resolve what the key
 * stands for, so that the next call sends it again. */
struct cw_seen_key {
	__u32 pid;              /* tgid */
	__u32 _pad;
	__u64 id;               /* stack hash, or code object address */
};

/*
 * A Python code object, copied in the kernel the first time a stack of its
 * process holds it: a process that exits right after its call still has its
 * functions, files and lines. Nothing here is trusted: user space checks each
 * type pointer against the runtime's PyCode_Type / PyUnicode_Type /
 * PyBytes_Type and bounds every size, exactly as when it reads the process.
 */
#define CW_PYCODE_NAME 128
#define CW_PYCODE_FILE 256
#define CW_PYCODE_TABLE 2048
struct cw_pyobj_str {
	__u64 type;             /* ob_type */
	__s64 length;           /* characters */
	__u32 state;            /* PyASCIIObject.state bits (kind, compact, ascii) */
	__u32 copied;           /* bytes copied of the character data */
};

struct cw_pycode_event {
	struct cw_header hdr;   /* pid: the process; ts_ns: when it was first seen */
	__u64 code;             /* the code object's address */
	__u64 code_type;        /* its ob_type */
	__u64 bytecode_type;    /* 3.10: ob_type of co_code (a bytes object); else 0 */
	__s64 code_units;       /* size of the bytecode in 2-byte code units */
	__s32 firstlineno;
	__u32 table_copied;     /* bytes of table_data filled */
	__u64 table_type;       /* ob_type of co_linetable (bytes) */
	__s64 table_len;
	struct cw_pyobj_str name, file;
	__u8 name_data[CW_PYCODE_NAME];
	__u8 file_data[CW_PYCODE_FILE];
	__u8 table_data[CW_PYCODE_TABLE];
};

/*
 * Per traced Python process (BPF hash map py_procs, key tgid), filled by user
 * space (src/attach/python_process.cpp) from the runtime's _Py_DebugOffsets
 * (3.13+) or per-version tables (3.10-3.12). Offsets are in bytes.
 */
#define CW_PY_NO_FIELD 0xffff
#define CW_PY_LASTI_INDEX  (1u << 0)  /* fr_instr is an int instruction index (3.10 f_lasti) */
#define CW_PY_TAGGED_CODE  (1u << 1)  /* fr_code is a tagged _PyStackRef (3.14): mask low bits */
#define CW_PY_MATCH_PTHREAD (1u << 2) /* ts_thread_id is pthread_self(), not a tid (3.10) */
struct cw_py_proc {
	__u64 runtime;          /* address of _PyRuntime */
	__u64 pidns_dev;        /* the process's pid namespace when it is not ours, else 0 */
	__u64 pidns_ino;
	__u32 version;          /* major << 8 | minor */
	__u16 rt_interp_head;   /* _PyRuntimeState.interpreters.head */
	__u16 is_threads_head;  /* PyInterpreterState.threads.head (tstate_head in 3.10) */
	__u16 ts_next;
	__u16 ts_thread_id;     /* native_thread_id, or thread_id with CW_PY_MATCH_PTHREAD */
	__u16 ts_frame;         /* frame (3.10), cframe (3.11, 3.12), current_frame (3.13+) */
	__u16 cframe_frame;     /* _PyCFrame.current_frame, CW_PY_NO_FIELD without a cframe */
	__u16 fr_previous;      /* f_back (3.10), previous */
	__u16 fr_code;          /* f_code, f_executable */
	__u16 fr_instr;         /* f_lasti (3.10), prev_instr (3.11, 3.12), instr_ptr (3.13+) */
	__u16 fr_owner;         /* CW_PY_NO_FIELD in 3.10 */
	__u16 fr_is_entry;      /* 3.11 is_entry, else CW_PY_NO_FIELD */
	__u16 co_adaptive;      /* PyCodeObject.co_code_adaptive (3.11+) */
	__u8 owner_shim;        /* frames with owner >= this are C-stack/interpreter shims */
	__u8 flags;             /* CW_PY_* */
	__u16 _pad;
	/* Objects, for copying a code object the first time it is seen
	 * (cw_pycode_event); CW_PY_NO_FIELD where a version has no such field. */
	__u16 ob_type;          /* PyObject.ob_type */
	__u16 var_size;         /* PyVarObject.ob_size */
	__u16 co_name;          /* co_qualname (3.11+), co_name (3.10) */
	__u16 co_filename;
	__u16 co_firstlineno;
	__u16 co_linetable;
	__u16 co_code;          /* 3.10: co_code (bytes); 3.11+: CW_PY_NO_FIELD (ob_size counts units) */
	__u16 bytes_sval;       /* PyBytesObject.ob_sval */
	__u16 str_length;       /* PyASCIIObject.length */
	__u16 str_state;        /* PyASCIIObject.state */
	__u16 str_ascii_data;   /* sizeof(PyASCIIObject): compact ASCII data */
	__u16 str_compact_data; /* sizeof(PyCompactUnicodeObject): other compact data */
};

/* prev_state as recorded */
#define CW_STATE_RUNNING 0      /* preempted while runnable: CPU contention */
#define CW_STATE_SLEEPING 1     /* TASK_INTERRUPTIBLE: waiting (lock, futex, event) */
#define CW_STATE_DISK 2         /* TASK_UNINTERRUPTIBLE: usually I/O */
#define CW_STATE_OTHER 3

struct cw_offcpu_event {
	struct cw_header hdr;   /* pid/tid: the thread that was off-CPU; ts_ns = switch-out */
	__u64 dur_ns;
	__u32 state;            /* CW_STATE_* at switch-out */
	__u32 by_pid;           /* tgid of the task that ran instead (first one) */
	__u32 waker_pid;        /* tgid of the waker, 0 if none seen */
	__u32 waker_tid;
	char by_comm[CW_COMM_LEN];
};

struct cw_block_io_event {
	struct cw_header hdr;   /* pid = issuing process; ts_ns = issue */
	__u64 dur_ns;
	__u64 sector;
	__u32 dev;              /* major << 20 | minor (kernel dev_t) */
	__u32 bytes;
	__u32 op;               /* 0 read, 1 write, 2 flush, 3 discard, 4 other */
	__u32 _pad;
};

struct cw_tcp_retrans_event {
	struct cw_header hdr;
	__u16 family;           /* AF_INET / AF_INET6 */
	__u16 sport;
	__u16 dport;
	__u16 state;
	__u8 saddr[16];
	__u8 daddr[16];
};

#define CW_ARGS_LEN 256
struct cw_proc_event {
	struct cw_header hdr;   /* pid = the process; for fork, the child */
	__u32 ppid;
	__s32 exit_code;
	char comm[CW_COMM_LEN];
	char filename[64];      /* exec: the file; others: empty */
	__u32 args_len;         /* exec, identity: bytes in args */
	__u32 _pad;
	char args[CW_ARGS_LEN]; /* exec, identity: the command line, NUL-separated (cut at CW_ARGS_LEN) */
};

struct cw_reclaim_event {
	struct cw_header hdr;   /* ts_ns = begin */
	__u64 dur_ns;
	__u64 nr_reclaimed;
};

/* Exact per-op counters kept in a per-CPU array map indexed by op id, so that
 * counts stay right even when ring-buffer records are dropped. */
struct cw_op_stats {
	__u64 calls;
	__u64 errors;           /* ret != 0 */
	__u64 total_ns;
	__u64 nested;           /* calls folded into an outer traced call */
	__u64 dropped;          /* records that did not fit in the ring buffer */
	__u64 shed;             /* rows of fast calls not recorded because the ring was filling */
};

/*
 * In-kernel aggregation of launch-class calls (--launch-sampling N): every
 * outermost launch is counted here, per (process, op, kernel handle), with a
 * log2 latency histogram; only launches at least CW_LAUNCH_KEEP_NS slow, the
 * first of each key and one in N are also recorded as rows. User space reads
 * the map once a second and stores the deltas (launch_buckets).
 */
#define CW_HIST_BUCKETS 32      /* bucket b: [2^b, 2^(b+1)) ns; the last one is open */
#define CW_LAUNCH_KEEP_NS 100000ULL /* explain never calls a launch slow below 100 us
                                       (kSlowMinExcessNs): every one above is kept */
struct cw_launch_key {
	__u32 pid;              /* tgid */
	__u16 op;
	__u16 _pad;
	__u64 kernel;           /* host stub (runtime) or CUfunction/CUkernel (driver) */
};

struct cw_launch_agg {
	__u64 calls;
	__u64 errors;
	__u64 total_ns;
	__u64 hist[CW_HIST_BUCKETS];
};

/* Per-source drop counters (array map index). */
enum cw_drop_source {
	CW_DROP_LIBCALL = 0,
	CW_DROP_HOST = 1,
	CW_DROP_PYSTACK = 2,
	CW_DROP_NEST = 3,       /* nesting deeper than CW_MAX_NEST */
	CW_DROP_SHED = 4,       /* planned: rows of fast calls shed while the ring was over
	                           CW_SHED_FILL full; their calls stay counted in op_stats */
	CW_DROP_PYCODE = 5,     /* code object copies that did not fit (their frames are
	                           read from the process instead, while it lives) */
	CW_DROP_MAX = 6,
};

/* Overload: past this fill of the library-call ring (in 1/16ths), rows of
 * calls faster than CW_LAUNCH_KEEP_NS are shed before anything else is lost:
 * new stacks, code objects, slow calls, and the host ring (apart) are kept. */
#define CW_SHED_FILL 8

#endif /* CAUSEWAY_EVENTS_H */
