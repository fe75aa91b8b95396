"""Calls the real libcudart through ctypes from known functions at known lines,
so that tests can assert the exact Python stack stored for each call.

Without a GPU every call returns an error (35, no driver) quickly, but the
uprobes fire with real arguments. Do not move lines: tests/e2e/python_stacks_e2e.cpp
finds the call sites by the `# CALL:` markers below, not by number.

usage: py_cuda_calls.py [--wait | --delay SECONDS] [--launch] [--exit-now] [path/to/libcudart.so]
  --wait:  print "ready" and wait for a line on stdin before calling (a test
           harness that registers the process with the walker itself).
  --delay: sleep first (`causeway trace -- cmd` registers a new Python process
           at its first maps rescan, a few ms after the exec).
  --launch: make one cudaLaunchKernel call instead (a launch gets its stack at
            return, and only when slow: trace it with --pystack-launch-min 0).
  --exit-now: leave right after the last call (os._exit: no interpreter
              teardown), before any tracer could read this process's memory.
"""
import ctypes
import os
import sys
import threading
import time

args = sys.argv[1:]
delay = 0.0
if "--delay" in args:
    i = args.index("--delay")
    delay = float(args[i + 1])
    del args[i:i + 2]
args = [a for a in args if a not in ("--wait", "--launch", "--exit-now")]
cudart = ctypes.CDLL(args[0] if args else "/usr/local/cuda/lib64/libcudart.so.13")


def alloc(nbytes):
    ptr = ctypes.c_void_p()
    return cudart.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(nbytes))  # CALL: alloc


def nested_inner():
    return alloc(1 << 20)  # CALL: nested_inner


def nested_outer():
    return nested_inner()  # CALL: nested_outer


class Model:
    def forward(self):
        return cudart.cudaDeviceSynchronize()  # CALL: forward


sync_now = lambda: cudart.cudaDeviceSynchronize()  # CALL: lambda


def chunks():
    for n in (4096, 8192):
        yield alloc(n)  # CALL: chunks


def worker():
    cudart.cudaFree(ctypes.c_void_p(0))  # CALL: worker


class Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


def launch():
    f = cudart.cudaLaunchKernel
    f.argtypes = [ctypes.c_void_p, Dim3, Dim3, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    return f(None, Dim3(1, 1, 1), Dim3(32, 1, 1), None, 0, None)  # CALL: launch


def main():
    nested_outer()  # CALL: main_nested
    Model().forward()  # CALL: main_forward
    sync_now()  # CALL: main_lambda
    for _ in chunks():  # CALL: main_chunks
        pass
    t = threading.Thread(target=worker, name="cw-worker")
    t.start()
    t.join()


if __name__ == "__main__":
    if "--wait" in sys.argv:
        print("ready", flush=True)
        sys.stdin.readline()
    time.sleep(delay)
    if "--launch" in sys.argv:
        launch()  # CALL: launch_module
    else:
        main()  # CALL: module
    if "--exit-now" in sys.argv:
        os._exit(0)
    # Give a tracer that reads this process's memory a moment (the kernel
    # copies what causeway needs; --exit-now checks that).
    time.sleep(0.3)
