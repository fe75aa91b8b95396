"""Calls cudaStreamSynchronize through ctypes as fast as one Python thread can,
from a stack DEPTH frames deep: the top-speed flood of calls that each carry a
Python stack (tests/e2e/lost_records_e2e.cpp). Without a GPU every call returns
an error (35) at once, and the uprobes still fire.

usage: py_sync_flood.py CALLS DEPTH [--delay SECONDS] [path/to/libcudart.so]
Prints "CALLS calls in S s (R calls/s)". Do not move the `# CALL:` line: the
test finds it by its marker.
"""
import ctypes
import sys
import time

args = sys.argv[1:]
delay = 0.2
if "--delay" in args:
    i = args.index("--delay")
    delay = float(args[i + 1])
    del args[i:i + 2]
calls, depth = int(args[0]), int(args[1])
cudart = ctypes.CDLL(args[2] if len(args) > 2 else "/usr/local/cuda/lib64/libcudart.so.13")
sync = cudart.cudaStreamSynchronize
sync.argtypes = [ctypes.c_void_p]


def deep(n):
    if n > 0:
        return deep(n - 1)  # CALL: recurse
    t0 = time.perf_counter()
    for _ in range(calls):
        sync(None)  # CALL: sync
    return time.perf_counter() - t0


sys.setrecursionlimit(depth + 100)
# `causeway trace -- cmd` registers a new Python process a few ms after exec.
time.sleep(delay)
took = deep(depth)
print(f"{calls} calls in {took:.3f} s ({calls / took:.0f} calls/s)", flush=True)
