"""Host memory page-locked every step and given back (a staging buffer pinned
per batch): through the real libcudart (cudaHostAlloc / cudaFreeHost, and
cudaHostRegister / cudaHostUnregister: they fail without a GPU, arguments
real) or the stand-in libcuda (cuMemHostAlloc / cuMemFreeHost, whose pinning
costs CPU time like the real one). Each step also runs a short sync, the
step's GPU work. Tests find the lines by the `# CALL:` markers.

usage: py_pinning.py LIB STEPS [MIB]
"""
import ctypes
import os
import sys

lib, steps = sys.argv[1], int(sys.argv[2])
mib = int(sys.argv[3]) if len(sys.argv) > 3 else 64
cuda = ctypes.CDLL(lib)
runtime = not os.path.basename(lib).startswith("libcuda.so")
size = ctypes.c_size_t(mib << 20)
host = ctypes.create_string_buffer(1 << 20)


def step():
    p = ctypes.c_void_p()
    if runtime:
        cuda.cudaHostAlloc(ctypes.byref(p), size, 0)  # CALL: pin
        cuda.cudaFreeHost(p)
        cuda.cudaHostRegister(host, ctypes.c_size_t(1 << 20), 0)  # CALL: register
        cuda.cudaHostUnregister(host)
        cuda.cudaDeviceSynchronize()
    else:
        cuda.cuMemHostAlloc(ctypes.byref(p), size, 0)  # CALL: pin_driver
        cuda.cuMemFreeHost(p)
        cuda.cuCtxSynchronize()


for _ in range(steps):
    step()
print(f"{steps} steps", flush=True)
