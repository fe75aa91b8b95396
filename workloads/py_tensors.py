"""Tensors through a caching allocator: the stand-in libc10_cuda.so (PyTorch's
allocator's methods, workloads/lib/c10_cuda.cpp) over the stand-in libcuda,
called from known lines. Tests find the lines by the `# CALL:` markers.

usage: py_tensors.py LIBC10 LIBCUDA MODE STEPS
  leak  each step keeps one 64 MiB tensor (appended to a list) and makes a
        64 MiB temporary it frees: the kept tensor takes the block the last
        temporary freed, so the temporary is the call that grows the pool;
        after the last step every kept tensor is freed, as an interpreter
        frees them at exit
  oom   holds 3 x 256 MiB of weights, frees a 256 MiB activation to the
        pool, then asks for 600 MiB (run with CW_FAKE_MEM_MB=1200): the pool
        cannot grow and the allocator throws (as the real one does), caught
        as torch.cuda.OutOfMemoryError would be; then frees one weight
  hold  keeps STEPS 64 MiB tensors, frees one, and stays 4 s (for a scrape)
Before any, one 1 MiB tensor made and freed: the first allocation through
a call site returns before causeway probes that return site (the one
allocation the drops count).
"""
import ctypes
import sys
import time

lib_c10, lib_cuda, mode, steps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
cuda = ctypes.CDLL(lib_cuda)
c10 = ctypes.CDLL(lib_c10)
c10.cw_c10_alloc.restype = ctypes.c_void_p
c10.cw_c10_alloc.argtypes = [ctypes.c_ulong]
c10.cw_c10_free.argtypes = [ctypes.c_void_p]
if c10.cw_c10_init(lib_cuda.encode()) != 0:
    sys.exit("no libcuda")
alloc, free = c10.cw_c10_alloc, c10.cw_c10_free
MiB = 1 << 20


def leak():
    kept = []
    for _ in range(steps):
        kept.append(alloc(64 * MiB))  # CALL: keep
        tmp = alloc(64 * MiB)  # CALL: temp
        free(tmp)
        cuda.cuCtxSynchronize()
        time.sleep(0.02)
    for p in kept:
        free(p)  # CALL: exit


def oom():
    weights = [alloc(256 * MiB) for _ in range(3)]  # CALL: weights
    act = alloc(256 * MiB)  # CALL: activation
    free(act)
    time.sleep(0.05)
    big = alloc(600 * MiB)  # CALL: big
    print("big:", big, flush=True)
    free(weights.pop())


def hold():
    kept = [alloc(64 * MiB) for _ in range(steps)]  # CALL: hold
    free(kept.pop())
    print("held", flush=True)
    time.sleep(4)


time.sleep(0.2)  # `trace -- cmd` registers a new Python process a few ms after exec
free(alloc(MiB))  # CALL: first
time.sleep(0.1)
{"leak": leak, "oom": oom, "hold": hold}[mode]()
