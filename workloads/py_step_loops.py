"""Two training-loop shapes that are slow for host-side reasons, calling a
CUDA library through ctypes. tests/e2e/account_e2e.cpp traces them with the
stand-in libcuda (workloads/lib/cuda.c), whose calls succeed: with the real
libcudart and no GPU every call fails (35), and explain rightly says that
nothing worked before anything else.

usage: py_step_loops.py input-bound|host-bound|sync-storm|startup|vary|late-import STEPS [path/to/libcudart.so | path/to/libcuda.so.1]

input-bound: WORKERS forked worker processes (named cw_loader) burn CPU to
  "decode" a batch, then write a token into a pipe; the training loop blocks
  reading the pipe (asleep, woken by a worker), then makes its CUDA calls.
host-bound:  the training loop computes in Python between its CUDA calls; the
  first call after the host work is a driver lookup that carries no stack (as
  cuBLAS's cuKernelGetFunction does before a GEMM).
sync-storm:  each step reads back SYNCS_PER_STEP scalars (.item() in an inner
  loop: a copy back and a synchronisation each) and has no outer sync.
startup:     what a process does before its loop, and nothing after: STEPS
  rounds of loading a module and "importing" (Python work between the
  loads), then it exits. Not a loop: no host_bound.
vary:        each step allocates a different number of buffers of different
  sizes at one line and frees them, with no sync at all (a caching
  allocator emptied every step): steps are found by that line.
late-import: one step of GPU work, then an import that computes for 2.5 s
  at its top level (as an optimizer's first step imports torch._dynamo),
  then STEPS steps that wait 20 ms each (for the GPU): start-up lasts
  through the import; no host_bound.
The `# CALL:` lines are where the tests expect the diagnosis to point.
"""
import ctypes
import os
import sys
import time

mode, steps = sys.argv[1], int(sys.argv[2])
lib_path = sys.argv[3] if len(sys.argv) > 3 else "/usr/local/cuda/lib64/libcudart.so.13"
lib = ctypes.CDLL(lib_path)
sync = lib.cuStreamSynchronize if os.path.basename(lib_path).startswith("libcuda.") else lib.cudaStreamSynchronize
sync.argtypes = [ctypes.c_void_p]
WORKERS = 2
SYNCS_PER_STEP = 300
get_function = getattr(lib, "cuKernelGetFunction", None)  # libcuda only
copy_back = getattr(lib, "cuMemcpyDtoH_v2", None)
libc = ctypes.CDLL(None)


def burn(seconds):
    end = time.perf_counter() + seconds
    x = 0
    while time.perf_counter() < end:  # CALL: burn_loop
        x += 1
    return x


def gpu_work():
    for _ in range(4):
        sync(None)
    sync(None)  # CALL: step_end


def input_bound():
    r, w = os.pipe()
    for _ in range(WORKERS):
        if os.fork() == 0:
            os.close(r)
            libc.prctl(15, b"cw_loader", 0, 0, 0)  # PR_SET_NAME
            try:
                while True:
                    burn(0.040)  # decode a batch
                    os.write(w, b"b")
            except OSError:  # the loop is done: the pipe is closed
                os._exit(0)
    os.close(w)
    for _ in range(steps):
        os.read(r, 1)  # CALL: next_batch
        gpu_work()
    os.close(r)
    for _ in range(WORKERS):
        os.wait()


def host_bound():
    time.sleep(0.01)
    f = ctypes.c_void_p()
    for _ in range(steps):
        burn(0.020)  # CALL: prepare
        if get_function:
            get_function(ctypes.byref(f), ctypes.c_void_p(0x1000))
        gpu_work()


def sync_storm():
    time.sleep(0.01)
    value = ctypes.c_float()
    for _ in range(steps):
        total = 0.0
        for k in range(SYNCS_PER_STEP):
            total += burn(25e-6) * k  # the loop's own Python work
            copy_back(ctypes.byref(value), ctypes.c_ulonglong(0x1000), 4)
            sync(None)  # CALL: item


# `causeway trace -- cmd` registers a new Python process a few ms after exec.
time.sleep(0.2)
def startup():
    mod = ctypes.c_void_p()
    for _ in range(steps):
        lib.cuModuleLoadData(ctypes.byref(mod), None)  # CALL: module_load
        burn(0.050)  # importing, building the model


def vary():
    import random
    rng = random.Random(3)
    alloc, free = lib.cuMemAlloc_v2, lib.cuMemFree_v2
    ptrs = [ctypes.c_ulonglong() for _ in range(6)]
    for _ in range(steps):
        n = rng.randint(2, 6)
        for p in ptrs[:n]:
            alloc(ctypes.byref(p), ctypes.c_size_t(rng.choice([1, 2, 3, 5]) << 20))  # CALL: vary_alloc
        burn(0.004)
        for p in ptrs[:n]:
            free(p)  # CALL: vary_free
        burn(0.002)


def late_import():
    import importlib
    import sys
    import tempfile
    gpu_work()
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "cw_slow_module.py"), "w") as f:
            f.write("import time\nend = time.perf_counter() + 2.5\nx = 0\n"
                    "while time.perf_counter() < end:\n    x += 1\n")
        sys.path.insert(0, d)
        importlib.import_module("cw_slow_module")  # CALL: late_import
    for _ in range(steps):
        gpu_work()
        time.sleep(0.02)  # the GPU's work, waited for


{"input-bound": input_bound, "host-bound": host_bound, "sync-storm": sync_storm, "startup": startup,
 "vary": vary, "late-import": late_import}[mode]()
print(f"{mode}: {steps} steps done", flush=True)
