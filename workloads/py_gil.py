"""A dispatcher thread starved of the interpreter lock by a sibling thread:
the main thread calls the real libcudart (through ctypes, which releases the
GIL around each call) at a known line, while a thread named `metrics`
serialises a large object in one long C call that holds the GIL throughout
(sorting, as metrics code does before writing percentiles). Without a GPU
every call fails quickly (35): the time goes to waiting for the lock. Tests
find the lines by the `# CALL:` markers.

usage: py_gil.py LIB SECONDS [MODE]
LIB: the real libcudart (calls fail without a GPU), or the stand-in
libcuda (build/workloads/lib/libcuda.so.1: calls succeed; run with
CW_FAKE_SYNC_MS=0)
MODE: gil (default) | lock: the sibling holds a threading.Lock the main
thread needs each step while it checksums a large buffer in a C call that
releases the GIL (hashlib): the main thread waits for the lock, not the GIL
| behind: as gil, but the main thread hands each step to a helper thread
(`worker`) and waits for it, as loss.backward() waits for the autograd
thread: the helper is the one starved of the GIL
"""
import hashlib
import os
import ctypes
import random
import sys
import threading
import time

lib, secs = sys.argv[1], float(sys.argv[2])
mode = sys.argv[3] if len(sys.argv) > 3 else "gil"
cudart = ctypes.CDLL(lib)
runtime = not os.path.basename(lib).startswith("libcuda.so")
alloc = cudart.cudaMalloc if runtime else cudart.cuMemAlloc_v2
sync = cudart.cudaDeviceSynchronize if runtime else cudart.cuCtxSynchronize
libc = ctypes.CDLL(None)
stop = False
shared = threading.Lock()
data = [random.random() for _ in range({"gil": 1_500_000, "behind": 50_000}.get(mode, 0))]
blob = bytes(48 << 20) if mode == "lock" else b""


def metrics():
    libc.prctl(15, b"metrics", 0, 0, 0)  # PR_SET_NAME
    while not stop:
        if mode != "lock":
            snapshot = sorted(data)  # CALL: gil_holder
        else:
            with shared:
                digest = hashlib.sha256(blob).digest()  # CALL: lock_holder
            time.sleep(0.002)


def step():
    ptr = ctypes.c_void_p()
    for _ in range(20):
        alloc(ctypes.byref(ptr), ctypes.c_size_t(4096))  # CALL: gil_dispatch
        sync()
    if mode == "lock":
        with shared:  # CALL: lock_wait
            pass


def worker(work, done):
    # Its share of the step without synchronising (as the autograd thread
    # launches the backward pass): the loop thread's sync marks the step.
    libc.prctl(15, b"worker", 0, 0, 0)
    ptr = ctypes.c_void_p()
    while work.get():
        for _ in range(2):
            alloc(ctypes.byref(ptr), ctypes.c_size_t(4096))  # CALL: behind_work
        done.put(1)


t = threading.Thread(target=metrics)
t.start()
if mode == "behind":
    import queue
    work, done = queue.Queue(), queue.Queue()
    w = threading.Thread(target=worker, args=(work, done))
    w.start()
end = time.time() + secs
n = 0
while time.time() < end:
    if mode == "behind":
        work.put(1)
        done.get()  # CALL: behind_wait
        sync()  # the step's own read-back, on the loop thread
    else:
        step()
    n += 1
stop = True
if mode == "behind":
    work.put(0)
    w.join()
t.join()
print(f"{mode}: {n} steps", flush=True)
