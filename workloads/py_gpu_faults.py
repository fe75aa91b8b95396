"""GPU memory, failures and hangs through the stand-in libcuda (build/workloads/lib/
libcuda.so.1, see workloads/lib/cuda.c), called through ctypes from known
lines, so tests can assert the sites explain names. Tests find the lines by
the `# CALL:` markers, not by number.

usage: py_gpu_memory.py MODE STEPS LIBCUDA
  leak    each step keeps a 64 MiB buffer (never freed) and allocates and
          frees a 32 MiB scratch buffer; a 5 ms sync ends the step
  oom     holds 2 x 256 MiB weights and a 256 MiB cache, then asks for 600 MiB
          (run with CW_FAKE_MEM_MB=1024): it fails, the cache is freed, the
          retry fails too, and the script exits 1 like a CUDA OOM
  fault   STEPS good launches and syncs, then a launch of an out-of-bounds
          kernel (run with CW_FAKE_FAULT_LAUNCH=STEPS+1): its sync fails with
          an illegal address, and so does every call after it
  handles cuMemCreate 4 x 20 MiB, cuMemRelease 2 of them
  hang    STEPS short syncs, then a kernel launched whose name, as a JIT's
          (CuPy's RawKernel), was a temporary overwritten once its function
          was looked up, then a sync that does not return for CW_FAKE_SYNC_MS
          (run with CW_FAKE_SYNC_MS=3000 and `trace --hang-after 1s`)
  xid     STEPS good launches and syncs, then a launch of an out-of-bounds
          kernel, and the NVIDIA driver's kernel-log lines for its fault,
          written to KMSG (the FIFO `trace --kmsg` reads: no GPU here) with
          this process's pid, among lines that must not count; then it exits
          before any call fails, as a process killed by the fault would
  fault   (above) writes the same lines to KMSG when given one
usage with KMSG: py_gpu_faults.py MODE STEPS LIBCUDA KMSG
"""
import os
import ctypes
import sys
import time

mode, steps, lib = sys.argv[1], int(sys.argv[2]), sys.argv[3]
kmsg = sys.argv[4] if len(sys.argv) > 4 else None
cuda = ctypes.CDLL(lib)
MiB = 1 << 20


# Each allocation is called at its own line (no helper): the line is the site.
A = cuda.cuMemAlloc_v2


def out():
    return ctypes.c_ulonglong()


def size(n):
    return ctypes.c_size_t(n)


def free(d):
    return cuda.cuMemFree_v2(ctypes.c_ulonglong(d))


def sync():
    return cuda.cuCtxSynchronize()


def leak():
    kept = []
    for _ in range(steps):
        d = out()
        A(ctypes.byref(d), size(64 * MiB))  # CALL: leak
        kept.append(d.value)
        s = out()
        A(ctypes.byref(s), size(32 * MiB))  # CALL: scratch
        free(s.value)
        sync()
        time.sleep(0.03)


def load_weights():
    ws = [out(), out()]
    for w in ws:
        A(ctypes.byref(w), size(256 * MiB))  # CALL: weights
    return ws


def fill_cache():
    c = out()
    A(ctypes.byref(c), size(256 * MiB))  # CALL: cache
    return c


def forward(cache):
    d = out()
    rc = A(ctypes.byref(d), size(600 * MiB))  # CALL: ask
    if rc == 2:
        free(cache.value)  # the caching allocator gives back what it holds, and retries
        rc = A(ctypes.byref(d), size(600 * MiB))  # CALL: retry
    return rc


def oom():
    weights = load_weights()
    cache = fill_cache()
    time.sleep(0.05)
    if forward(cache) == 2:
        print("CUDA out of memory", file=sys.stderr)
        sys.exit(1)


def get_function(name):
    f = ctypes.c_void_p()
    cuda.cuModuleGetFunction(ctypes.byref(f), ctypes.c_void_p(1), name)
    return f


def launch(f):
    return cuda.cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, None, None, None)


def log_xid():
    """What the driver logs for an MMU fault (driver 580's words), as kernel
    records (facility 0) with this process's pid; and lines that must not
    count: another kernel message, a truncated XID, one written from user
    space (facility 1), and an XID naming a process that does not exist."""
    if not kmsg:
        return
    us = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
    pid = os.getpid()
    lines = [
        f"6,9001,{us},-;nvidia-modeset: Allocated GPU:0 (GPU-fake-0) @ PCI:0000:3b:00.0",
        f"3,9002,{us},-;NVRM: Xid (PCI:0000:3b:00): 31, pid={pid}, name=python3, channel 0x00000002, "
        "intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f12_34560000. "
        "Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_WRITE",
        f"4,9003,{us},-;NVRM: Xid (PCI:0000:3b:00): 13, Graphics SM Warp Exception on (GPC 1, TPC 4, SM 0): "
        "Out Of Range Address",
        f"3,9004,{us},-;NVRM: Xid (PCI:0000:3b",
        f"11,9005,{us},-;NVRM: Xid (PCI:0000:3b:00): 79, pid={pid}, name=python3, GPU has fallen off the bus.",
        f"3,9006,{us},-;NVRM: Xid (PCI:0000:3b:00): 43, pid=4194000, name=gone, Ch 00000008",
        "not a kernel record at all",
    ]
    with open(kmsg, "w") as f:
        f.write("\n".join(lines) + "\n")


def fault():
    good = get_function(b"_Z9good_kernPf")
    oob = get_function(b"_Z9oob_writePfi")
    for _ in range(steps):
        launch(good)
        sync()
    cuda.cuLaunchKernel(oob, 1, 1, 1, 32, 1, 1, 0, None, None, None)  # CALL: oob_launch
    rc = cuda.cuCtxSynchronize()  # CALL: fault_sync
    print("sync returned", rc)
    log_xid()
    for _ in range(3):
        A(ctypes.byref(out()), size(MiB))
        sync()


def xid():
    good = get_function(b"_Z9good_kernPf")
    for _ in range(steps):
        launch(good)
        sync()
    oob = get_function(b"_Z9oob_writePfi")  # CALL: xid_lookup
    cuda.cuLaunchKernel(oob, 1, 1, 1, 32, 1, 1, 0, None, None, None)  # CALL: xid_launch
    log_xid()
    time.sleep(1.5)  # the fault kills it before its next call


def handles():
    hs = []
    for _ in range(4):
        h = ctypes.c_ulonglong()
        cuda.cuMemCreate(ctypes.byref(h), ctypes.c_size_t(20 * MiB), None, ctypes.c_ulonglong(0))  # CALL: create
        hs.append(h.value)
    for h in hs[:2]:
        cuda.cuMemRelease(ctypes.c_ulonglong(h))


def hang():
    for _ in range(steps):
        cuda.cuStreamSynchronize(None)  # the loop's syncs: the baseline
    name = ctypes.create_string_buffer(b"spin_forever")
    f = get_function(name)
    ctypes.memset(name, ord("x"), 12)  # the temporary's memory, reused
    launch(f)
    cuda.cuCtxSynchronize()  # CALL: hang


{"leak": leak, "oom": oom, "fault": fault, "handles": handles, "hang": hang, "xid": xid}[mode]()
time.sleep(0.3)  # stay alive past one drain: kernel names resolve from the live process
