"""Two training-loop shapes that are slow for host-side reasons, calling a
CUDA library through ctypes. tests/e2e/account_e2e.cpp traces them with the
stand-in libcuda (workloads/lib/cuda.c), whose calls succeed: with the real
libcudart and no GPU every call fails (35), and explain rightly says that
nothing worked before anything else.

usage: py_step_loops.py MODE STEPS [path/to/libcudart.so | path/to/libcuda.so.1]

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
sleep:       each step's GPU work, then a sleep (a rate limiter): its line is
  where the step waits.
fsync:       each step's GPU work, then a checkpoint written and synced.
helper:      a helper thread waits on a queue for its half of each step
  (it does the step's second half of the GPU work) and is idle otherwise;
  then the loop waits for the GPU (cuCtxSynchronize, with the stand-in
  CW_FAKE_SYNC_MS=8): GPU-bound, and nothing is said of the helper.
burn-helper: the loop hands each step's preparation to a helper thread that
  burns CPU, and waits for it: the helper's line is the step's.
chain3:      the loop waits for thread B, which waits for thread C, which
  burns CPU: the wait is followed to C's line.
cpu-limit:   moves itself into the cgroup CW_LIMIT_CGROUP (a directory whose
  CPU limit the test set: cpu.max, or v1's cpu.cfs_quota_us), then each step
  computes 10 ms in Python and makes its calls: throttled by the limit.
handoff:     each step computes 10 ms on the loop thread, then 10 ms on a
  helper it hands to and waits for: the path alternates between the two.
late-import: one step of GPU work, then an import that computes for 2.5 s
  at its top level (as an optimizer's first step imports torch._dynamo),
  then STEPS steps that wait 20 ms each (for the GPU): start-up lasts
  through the import; no host_bound.
eager:       an eager framework's step: LAUNCHES_PER_STEP launches, each with
  DISPATCH_S (25 us) of Python dispatch at its line, then the loop waits for the GPU
  (cuCtxSynchronize, CW_FAKE_SYNC_MS): with a long GPU wait the queue stays
  ahead and launching is a note; with a short one the step is launch-bound.
eager-ex:    the same through cuLaunchKernelEx (whose first instruction the
  stand-in's build leaves to be single-stepped by a probe: the launch
  windows record what each launch cost, and explain takes it out).
recompile-threads: as JAX runs a step whose shape changes every time: the main
  thread compiles each step (30 ms of CPU, then a module load: libcuda
  only) and hands it to a worker thread that runs it; the main thread has
  no step of its own, its loads never stop, and they are not start-up.
warm-recompile: as JAX warms up and then recompiles every step: a worker thread
  runs the steps, the main thread compiles (in a stand-in compiler module
  whose file is jax/_src/compiler.py) once for 2 s before the loop (the
  first shape) and then 30 ms before each step (a shape that changes): the
  warm-up takes more time than all the recompiles, and the recompile's line
  is the one to name.
memlimit:    moves itself into the memory cgroup CW_MEM_CGROUP (and, on a
  hybrid host, the v2 cgroup CW_PSI_CGROUP, for PSI), reads the 512 MiB
  file CW_DATA_FILE once (an epoch's warm-up), then each step reads the
  next 16 MiB of it, round and round, and makes its calls. Under a 96 MiB
  limit the page cache cannot hold the file: each read is a read from disk
  of pages the limit evicted (file refaults). With room, every read after
  the warm-up is a page-cache hit. The file is written if missing, and
  dropped from the page cache before the cgroup is joined (pages cached by
  another cgroup would be charged there).
threads:     each step runs a parallel region (libomp_region.so beside the
  stand-in libcuda: libgomp, OMP_NUM_THREADS threads sharing 40 ms of CPU
  work) from Python, then makes its calls. 16 threads on 2 CPUs wait for
  a CPU behind each other; 2 threads on 2 CPUs do not.
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
LAUNCHES_PER_STEP = 100
DISPATCH_S = 25e-6  # each launch's Python dispatch
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


def sleep():
    time.sleep(0.01)
    for _ in range(steps):
        gpu_work()
        time.sleep(0.02)  # CALL: sleep


def fsync():
    import tempfile
    block = os.urandom(1 << 20)
    with tempfile.NamedTemporaryFile(dir="/var/tmp") as f:
        for _ in range(steps):
            gpu_work()
            for _ in range(8):
                f.write(block)
            f.flush()
            os.fsync(f.fileno())  # CALL: fsync
            f.seek(0)


def helper():
    import queue
    import threading
    work, done = queue.Queue(), queue.Queue()

    def run():
        libc.prctl(15, b"cw_helper", 0, 0, 0)
        while True:
            if work.get() is None:  # idle: waiting for the next step's work
                return
            gpu_work()
            done.put(1)

    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.01)
    for _ in range(steps):
        gpu_work()
        work.put(1)
        done.get()
        lib.cuCtxSynchronize()  # the GPU's work, waited for (CW_FAKE_SYNC_MS)
    work.put(None)
    t.join()


def burn_helper():
    import queue
    import threading
    work, done = queue.Queue(), queue.Queue()

    def run():
        libc.prctl(15, b"cw_prep", 0, 0, 0)
        while work.get() is not None:
            burn_prep()
            done.put(1)

    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.01)
    for _ in range(steps):
        work.put(1)
        done.get()
        gpu_work()
    work.put(None)
    t.join()


def handoff():
    # Half of each step on the loop thread, half on a helper it hands to:
    # the path alternates between the two every 10 ms.
    import queue
    import threading
    work, done = queue.Queue(), queue.Queue()

    def run():
        libc.prctl(15, b"cw_prep", 0, 0, 0)
        while work.get() is not None:
            burn(0.010)
            done.put(1)

    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.01)
    for _ in range(steps):
        burn(0.010)
        work.put(1)
        done.get()
        gpu_work()
    work.put(None)
    t.join()


def burn_prep():
    end = time.perf_counter() + 0.02
    while time.perf_counter() < end:  # CALL: prep_burn
        pass


def chain3():
    import queue
    import threading
    to_b, to_c, from_c, from_b = queue.Queue(), queue.Queue(), queue.Queue(), queue.Queue()

    def b():
        libc.prctl(15, b"cw_b", 0, 0, 0)
        while to_b.get() is not None:
            to_c.put(1)
            from_c.get()
            from_b.put(1)
        to_c.put(None)

    def c():
        libc.prctl(15, b"cw_c", 0, 0, 0)
        while to_c.get() is not None:
            end = time.perf_counter() + 0.02
            while time.perf_counter() < end:  # CALL: c_burn
                pass
            from_c.put(1)

    threads = [threading.Thread(target=b), threading.Thread(target=c)]
    for t in threads:
        t.start()
    time.sleep(0.01)
    for _ in range(steps):
        to_b.put(1)
        from_b.get()
        gpu_work()
    to_b.put(None)
    for t in threads:
        t.join()


def cpu_limit():
    with open(os.path.join(os.environ["CW_LIMIT_CGROUP"], "cgroup.procs"), "w") as f:
        f.write(str(os.getpid()))
    time.sleep(0.01)
    for _ in range(steps):
        burn(0.010)  # CALL: limited
        gpu_work()


def recompile_threads():
    import queue
    import threading
    work, done = queue.Queue(), queue.Queue()

    def run():
        while work.get() is not None:
            gpu_work()
            done.put(1)

    def compile_shape(n):
        burn(0.030)  # CALL: compile_shape
        lib.cuModuleLoadData(ctypes.byref(ctypes.c_void_p()), None)

    t = threading.Thread(target=run)
    t.start()
    for i in range(steps):
        compile_shape(i)
        work.put(1)
        done.get()
    work.put(None)
    t.join()


def warm_recompile():
    import importlib.util
    import queue
    import tempfile
    import threading
    # A compiler's frames are known by their file (src/analyze/critical_path.cpp).
    path = os.path.join(tempfile.mkdtemp(), "cw-packages", "jax", "_src", "compiler.py")
    os.makedirs(os.path.dirname(path))
    with open(path, "w") as f:
        f.write("import time\n\ndef backend_compile(seconds):\n    end = time.perf_counter() + seconds\n"
                "    while time.perf_counter() < end:\n        pass\n")
    spec = importlib.util.spec_from_file_location("cw_stand_in_compiler", path)
    compiler = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(compiler)
    work, done = queue.Queue(), queue.Queue()

    def run():
        while work.get() is not None:
            gpu_work()
            done.put(1)

    t = threading.Thread(target=run)
    t.start()
    for _ in range(3):  # the first GPU work, on the worker (JAX's random init)
        work.put(1)
        done.get()
    compiler.backend_compile(2.0)  # CALL: warm_compile
    for _ in range(steps):
        work.put(1)
        done.get()
        compiler.backend_compile(0.030)  # CALL: step_compile
    work.put(None)
    t.join()


def eager():
    launch = lib.cuLaunchKernel
    launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
    clock = time.perf_counter
    time.sleep(0.01)
    for _ in range(steps):
        for _ in range(LAUNCHES_PER_STEP):
            # Timed dispatch, not counted work (a busy VM host once ran the
            # old sum(range(3500)) in 122 us instead of ~25): on the launch's
            # line, so the launching is that line's.
            end = clock() + DISPATCH_S; all(iter(lambda: clock() < end, False)); launch(None, 1, 1, 1, 32, 1, 1, 0, None, None, None)  # CALL: eager_launch
        lib.cuCtxSynchronize()  # CALL: eager_sync


def eager_ex():
    class Config(ctypes.Structure):
        _fields_ = [("dims", ctypes.c_uint * 7), ("stream", ctypes.c_void_p), ("attrs", ctypes.c_void_p),
                    ("num_attrs", ctypes.c_uint)]
    launch = lib.cuLaunchKernelEx
    launch.argtypes = [ctypes.c_void_p] * 4
    cfg = Config((ctypes.c_uint * 7)(1, 1, 1, 32, 1, 1, 0), None, None, 0)
    time.sleep(0.01)
    for _ in range(steps):
        for _ in range(LAUNCHES_PER_STEP):
            _ = sum(range(3500)); launch(ctypes.byref(cfg), None, None, None)  # CALL: eager_ex_launch
        lib.cuCtxSynchronize()


STREAM_FILE_BYTES = 512 << 20
STREAM_READ_BYTES = 16 << 20


def join_cgroups():
    for var in ("CW_MEM_CGROUP", "CW_PSI_CGROUP"):
        if os.environ.get(var):
            with open(os.path.join(os.environ[var], "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))


def memlimit():
    path = os.environ["CW_DATA_FILE"]
    if not os.path.exists(path) or os.path.getsize(path) != STREAM_FILE_BYTES:
        block = bytes(range(256)) * 4096
        with open(path, "wb") as f:
            for _ in range(STREAM_FILE_BYTES // len(block)):
                f.write(block)
            f.flush()
            os.fsync(f.fileno())
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    join_cgroups()
    for off in range(0, STREAM_FILE_BYTES, STREAM_READ_BYTES):  # the warm-up epoch
        os.pread(fd, STREAM_READ_BYTES, off)
    time.sleep(0.01)
    for step in range(steps):
        off = step * STREAM_READ_BYTES % STREAM_FILE_BYTES
        batch = os.pread(fd, STREAM_READ_BYTES, off)  # CALL: stream_read
        sync(None)  # the step's GPU work, waited for once (five syncs in a 5-ms step would be a storm)
    os.close(fd)


def threads():
    region = ctypes.CDLL(os.path.join(os.path.dirname(os.path.abspath(lib_path)), "libomp_region.so.1"))
    region.cw_parallel_region.argtypes = [ctypes.c_double]
    time.sleep(0.01)
    for _ in range(steps):
        region.cw_parallel_region(0.040)  # CALL: parallel_region
        gpu_work()


{"input-bound": input_bound, "host-bound": host_bound, "sync-storm": sync_storm, "startup": startup,
 "vary": vary, "late-import": late_import, "sleep": sleep, "fsync": fsync, "helper": helper,
 "burn-helper": burn_helper, "chain3": chain3, "cpu-limit": cpu_limit, "handoff": handoff,
 "recompile-threads": recompile_threads, "warm-recompile": warm_recompile, "eager": eager,
 "eager-ex": eager_ex, "memlimit": memlimit, "threads": threads}[mode]()
print(f"{mode}: {steps} steps done", flush=True)
