/* SPDX-License-Identifier: (GPL-2.0-only OR Apache-2.0) */
/*
 * Stacks of library calls (bpf/pystack.bpf.h): Python frames and native
 * frames, each (process, stack) sent once; decoded by
 * src/consume/python/call_stack_resolver.cpp into table stack_frames.
 */
#ifndef CAUSEWAY_MODEL_STACKS_H
#define CAUSEWAY_MODEL_STACKS_H

#include "causeway/events.h"

#define CW_EV_PYSTACK 9       /* a new stack, the first time it is seen */
#define CW_EV_PYCODE 10       /* a code object, the first time a stack holds it */

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
	__u32 firstlineno[CW_PY_MAX_FRAMES]; /* each code object's co_firstlineno, read with it: a
	                                        code object freed and another made at its address is
	                                        another code object (cw_code_key) */
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

/* A code object's identity in a process: its address and (the low 16 bits
 * of) its first line, so that a code object freed at import time and a
 * function's made later at the same address are told apart. */
static inline __u64 cw_code_key(__u64 addr, __u32 firstlineno)
{
	return addr ^ ((__u64)(firstlineno & 0xffff) << 48);
}

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
	/* The interpreter lock (struct _gil_runtime_state): a thread asleep on a
	 * futex inside it waits for the GIL (bpf/host.bpf.c). At runtime +
	 * gil_off (3.10, 3.11), or at the pointer found at interp + gil_off
	 * (CW_PY_GIL_VIA_INTERP: 3.12+, interp->ceval.gil). gil_size 0: unknown. */
	__u16 gil_off;
	__u16 gil_size;
	__u16 gil_flags;        /* CW_PY_GIL_* */
	__u16 _pad2;
};
#define CW_PY_GIL_VIA_INTERP (1u << 0)

#ifdef __cplusplus
#include <optional>
#include <string>
#include <vector>

#include "causeway/model/family.h"

namespace causeway::model {

struct StackFrame {
  std::string kind;  // python | native
  std::string func;
  std::string file;
  std::optional<int64_t> line;
  std::string module;
};
using Stack = std::vector<StackFrame>;  // [0] = innermost

// One frame of one stored stack (stack ids are unique across the sessions
// of a file: trace starts each session's at session_id << 32).
struct StackFrameRow {
  int64_t stack_id = 0;
  int64_t depth = 0;
  StackFrame frame;
};

struct StackFrames {
  using Row = StackFrameRow;
  static constexpr Column<Row> kColumns[] = {
      {"stack_id", SqlType::Integer, true, "the stack (`cuda_calls.stack_id`, `nccl_calls.stack_id`)",
       field<&Row::stack_id>},
      {"depth", SqlType::Integer, true, "0 = innermost", field<&Row::depth>},
      {"kind", SqlType::Text, true, "`python` or `native`",
       [](const Row& r) { return to_sql(r.frame.kind); }},
      {"func", SqlType::Text, false, "function (Python: `co_qualname`; native: demangled symbol)",
       [](const Row& r) { return to_sql(r.frame.func); }},
      {"file", SqlType::Text, false, "Python source file",
       [](const Row& r) { return to_sql(r.frame.file); }},
      {"line", SqlType::Integer, false, "Python line", [](const Row& r) { return to_sql(r.frame.line); }},
      {"module", SqlType::Text, false, "native: the mapped file",
       [](const Row& r) { return to_sql(r.frame.module); }},
  };
  static constexpr Table<Row> kTable{"stack_frames", "Stacks, one row per frame, each distinct stack once.",
                                     TableKind::Shared, kColumns, "OR IGNORE"};
};
static_assert(offsetof(cw_pystack_event, code) == 40);
static_assert(offsetof(cw_pystack_event, firstlineno) == 328);
static_assert(offsetof(cw_pystack_event, entry_mask) == 424);
static_assert(offsetof(cw_pystack_event, native) == 432);
static_assert(offsetof(cw_pystack_event, hash) == 944);
static_assert(offsetof(cw_pystack_event, module_of) == 960);
static_assert(offsetof(cw_pystack_event, modules) == 1024);
static_assert(sizeof(cw_native_module) == 88);
static_assert(sizeof(cw_pystack_event) == 1728);
static_assert(sizeof(cw_seen_key) == 16);
static_assert(offsetof(cw_pycode_event, name) == 88);
static_assert(offsetof(cw_pycode_event, name_data) == 136);
static_assert(sizeof(cw_pycode_event) == 136 + CW_PYCODE_NAME + CW_PYCODE_FILE + CW_PYCODE_TABLE);
static_assert(sizeof(cw_py_proc) == 88);  // the py_procs map value, filled from user space

}  // namespace causeway::model
CAUSEWAY_TABLE(StackFrames);
#endif /* __cplusplus */

#endif /* CAUSEWAY_MODEL_STACKS_H */
