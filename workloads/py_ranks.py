"""Ranks of a data-parallel job over the stand-in libnccl and libcuda
(workloads/lib/nccl.c, cuda.c), each rank its own process, in lockstep as
real loops are: every step computes, enqueues an all-reduce (which returns at
once, as NCCL's do), and synchronises on an event behind it, which waits until every
rank's all-reduce has arrived on its "GPU": each step dispatches (2 ms of
host work), queues GPU_MS (40 ms) of GPU work, enqueues the all-reduce and
waits for an event behind it, so a healthy step is GPU-bound. tests/e2e/ranks_e2e.cpp traces them.

usage: py_ranks.py MODE NRANKS STEPS LIBNCCL LIBCUDA

clean:     every rank computes WORK_MS (2 ms) before its all-reduce.
skew:      once its GPU work is queued, the last rank computes SKEW_MS
           (15 ms) before it enqueues its all-reduce, the others 15 ms after
           theirs (before their sync): enqueues 15 ms apart while every GPU
           is still busy, and nobody waits for anybody (a DDP job's skew
           between enqueues, which is not a straggler).
straggler: the last rank prepares its batch for LATE_MS (30 ms) before it
           dispatches its step: its GPU starts late, and the others wait for
           it in their syncs.
hang:      at step HANG_AT (5) the last rank waits on a threading.Event that
           is never set, before its all-reduce; the others block in their
           sync; the launcher waits until killed.
The `# CALL:` lines are where the tests expect the diagnosis to point.
"""
import ctypes
import os
import sys
import threading
import time

WORK_MS = 2.0
GPU_MS = 40.0
SKEW_MS = 15.0
LATE_MS = 30.0
HANG_AT = 5


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


def forward(ms):
    end = time.perf_counter() + ms / 1e3
    n = 0
    while time.perf_counter() < end: n += 1  # CALL: work
    return n


def prepare_batch(ms):
    end = time.perf_counter() + ms / 1e3
    n = 0
    while time.perf_counter() < end: n += 1  # CALL: straggler
    return n


def rank_main(mode, rank, nranks, steps, uid, nccl_path, cuda_path):
    nccl = ctypes.CDLL(nccl_path, mode=ctypes.RTLD_GLOBAL)
    cuda = ctypes.CDLL(cuda_path)
    comm = ctypes.c_void_p()
    rc = nccl.ncclCommInitRank(ctypes.byref(comm), nranks, uid, rank)
    if rc != 0:
        print(f"rank {rank}: ncclCommInitRank failed: {rc}", flush=True)
        os._exit(1)
    stream = ctypes.c_void_p(0x5000 + rank)
    event = ctypes.c_void_p(0x6000 + rank)  # recorded behind the all-reduce
    buf = ctypes.c_void_p(0x10000000)
    last = rank == nranks - 1
    stop = threading.Event()
    for step in range(steps):
        if mode == "straggler" and last:
            prepare_batch(LATE_MS)
        if mode == "hang" and last and step == HANG_AT:
            stop.wait()  # CALL: hang
        forward(WORK_MS)
        nccl.cwFakeGpuWork(int(GPU_MS * 1000))  # the step's kernels, queued
        if mode == "skew" and last:
            forward(SKEW_MS)
        nccl.ncclAllReduce(buf, buf, ctypes.c_size_t(1 << 20), 7, 0, comm, stream)  # CALL: allreduce
        if mode == "skew" and not last:
            forward(SKEW_MS)
        cuda.cuEventSynchronize(event)  # CALL: sync
    nccl.ncclCommDestroy(comm)


def main():
    mode, nranks, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    nccl_path, cuda_path = sys.argv[4], sys.argv[5]
    uid = UniqueId()
    name = f"cwfake-nccl-ranks-{os.getpid()}"
    uid.internal = name.encode()
    children = []
    for rank in range(nranks):
        pid = os.fork()
        if pid == 0:
            try:
                rank_main(mode, rank, nranks, steps, uid, nccl_path, cuda_path)
            finally:
                os._exit(0)
        children.append(pid)
    status = 0
    for pid in children:
        _, st = os.waitpid(pid, 0)
        status |= st
    try:
        os.unlink("/dev/shm/" + name)
    except FileNotFoundError:
        pass
    sys.exit(1 if status else 0)


if __name__ == "__main__":
    main()
