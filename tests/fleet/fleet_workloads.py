"""What a GPU fleet's nodes do, through the stand-in libcuda (workloads/lib/
cuda.c) and the real libnccl, for tests/fleet/signals_e2e.py: each mode is
one process, trouble or its clean twin, running for SECONDS.

usage: fleet_workloads.py MODE SECONDS LIBCUDA [LIBNCCL|LIBC10] [ARGS]
  rank COMM RANK NRANKS STYLE  one rank of communicator COMM (a name: its
       ncclUniqueId is derived from it, so every rank's hash is the same):
       each step an all-reduce, then a synchronisation. STYLE waiter: the
       GPU keeps it waiting (run with CW_FAKE_SYNC_MS=80); straggler: its
       host burns 80 ms before the step (CW_FAKE_SYNC_MS=1); even: both
       halves, as every rank of a balanced job (CW_FAKE_SYNC_MS=40)
  hang       one synchronisation that does not return (CW_FAKE_SYNC_BLOCK=1
             and CW_FAKE_SYNC_MS past SECONDS)
  syncs      short synchronisations, each returning (CW_FAKE_SYNC_MS=20)
  leak RATE  RATE device allocations a second, each filled by a copy and
             never freed
  churn RATE the same, each freed
  tensors N  N 64 MiB tensors through the stand-in PyTorch allocator, held
"""
import ctypes
import sys
import time

mode, seconds, lib_cuda = sys.argv[1], float(sys.argv[2]), sys.argv[3]
cuda = ctypes.CDLL(lib_cuda)
cuda.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_ulonglong), ctypes.c_size_t]
cuda.cuMemFree_v2.argtypes = [ctypes.c_ulonglong]
end = time.monotonic() + seconds
MiB = 1 << 20


def burn(ms):
    until = time.monotonic() + ms / 1000
    x = 0
    while time.monotonic() < until:
        x += 1


def every(rate, step):
    period, n = 1.0 / rate, 0
    start = time.monotonic()
    while time.monotonic() < end:
        step()
        n += 1
        time.sleep(max(0.0, start + n * period - time.monotonic()))
    return n


if mode == "rank":
    lib_nccl, comm_name, rank, nranks, style = sys.argv[4], sys.argv[5], int(sys.argv[6]), int(sys.argv[7]), sys.argv[8]

    class UniqueId(ctypes.Structure):
        _fields_ = [("internal", ctypes.c_char * 128)]

    nccl = ctypes.CDLL(lib_nccl)
    uid = UniqueId(comm_name.encode().ljust(128, b"\0")[:128])
    # Without a GPU the init fails and leaves the handle as it was: a zeroed
    # stand-in that NCCL then rejects in each collective's argument checks,
    # after the probes have read every argument (workloads/nccl_calls.c).
    fake = ctypes.create_string_buffer(1 << 20)
    comm = ctypes.c_void_p(ctypes.addressof(fake))
    nccl.ncclCommInitRank(ctypes.byref(comm), nranks, uid, rank)
    comm = ctypes.c_void_p(ctypes.addressof(fake))
    allreduce = nccl.ncclAllReduce
    allreduce.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_void_p, ctypes.c_void_p]
    steps = 0
    while time.monotonic() < end:
        if style == "straggler":
            burn(80)
        elif style == "even":
            burn(40)
        allreduce(0x1000, 0x2000, 1 << 20, 7, 0, comm, 0x5678)
        cuda.cuCtxSynchronize()
        steps += 1
    print(f"rank {rank}: {steps} steps")
elif mode == "hang":
    print("hang: synchronising", flush=True)
    cuda.cuCtxSynchronize()
elif mode == "syncs":
    n = 0
    while time.monotonic() < end:
        cuda.cuCtxSynchronize()
        time.sleep(0.05)
        n += 1
    print(f"syncs: {n}")
elif mode in ("leak", "churn"):
    ptr = ctypes.c_ulonglong()
    page = ctypes.create_string_buffer(4096)
    cuda.cuMemcpyHtoD_v2.argtypes = [ctypes.c_ulonglong, ctypes.c_void_p, ctypes.c_size_t]

    def step():
        cuda.cuMemAlloc_v2(ctypes.byref(ptr), MiB)
        cuda.cuMemcpyHtoD_v2(ptr.value, page, 4096)
        if mode == "churn":
            cuda.cuMemFree_v2(ptr.value)

    print(f"{mode}: {every(float(sys.argv[4]), step)} allocations")
elif mode == "tensors":
    c10 = ctypes.CDLL(sys.argv[4])
    c10.cw_c10_alloc.restype = ctypes.c_void_p
    c10.cw_c10_alloc.argtypes = [ctypes.c_ulong]
    if c10.cw_c10_init(lib_cuda.encode()) != 0:
        sys.exit("fleet_workloads.py: the stand-in allocator found no libcuda")
    held = [c10.cw_c10_alloc(64 * MiB) for _ in range(int(sys.argv[5]))]
    print(f"tensors: {len(held)} held", flush=True)
    time.sleep(max(0.0, end - time.monotonic()))
else:
    sys.exit(f"fleet_workloads.py: unknown mode {mode} (rank, hang, syncs, leak, churn, tensors)")
