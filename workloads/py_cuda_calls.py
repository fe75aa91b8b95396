"""Calls the real libcudart through ctypes from known functions at known lines,
so that tests can assert the exact Python stack stored for each call.

Without a GPU every call returns an error (35, no driver) quickly, but the
uprobes fire with real arguments. Do not move lines: tests/e2e/python_stacks_e2e.cpp
finds the call sites by the `# CALL:` markers below, not by number.

usage: py_cuda_calls.py [--wait] [path/to/libcudart.so]
  --wait: print "ready" and wait for a line on stdin before calling (a tracer
          that registers the process after it starts).
"""
import ctypes
import sys
import threading
import time

args = [a for a in sys.argv[1:] if a != "--wait"]
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
    main()  # CALL: module
    # The tracer reads code objects from this process's memory when it drains
    # its buffers: stay alive a moment so that the last calls still resolve.
    time.sleep(0.3)
