/* A stand-in libcuda.so.1 exporting the driver functions causeway probes,
 * with controlled durations, for tests of the driver layer on a host with no
 * GPU: cuLaunchKernel sleeps sharedMemBytes microseconds, cuCtxSynchronize
 * spins (stays runnable) for CW_FAKE_SYNC_MS (default 50) ms of wall time
 * (with CW_FAKE_SYNC_BLOCK=1 it sleeps instead, as a blocking sync does),
 * cuMemAlloc sleeps CW_FAKE_ALLOC_US_PER_MB (default 1000) us per MiB, and
 * pinning host memory (cuMemHostAlloc, cuMemHostRegister) spins
 * CW_FAKE_PIN_US_PER_MB (default 200) us per MiB on the CPU, as the kernel
 * does when it locks every page.
 * Handles and addresses are fake numbers.
 *   CW_FAKE_MEM_MB=N       device memory: allocations beyond it fail with
 *                          CUDA_ERROR_OUT_OF_MEMORY (2); frees give it back
 *   CW_FAKE_FAULT_LAUNCH=N the Nth cuLaunchKernel faults, like a kernel that
 *                          writes out of bounds: it returns 0 (launches are
 *                          asynchronous), and every call after it returns
 *                          CUDA_ERROR_ILLEGAL_ADDRESS (700), a sticky error */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct {
  unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
  void *hStream;
  void *attrs;
  unsigned numAttrs;
} CUlaunchConfig;

static unsigned long next_handle = 0xf000;
static int faulted;
static long launches;

/* Allocation sizes by address, for CW_FAKE_MEM_MB. */
#define SLOTS 4096
static unsigned long long slot_addr[SLOTS];
static size_t slot_bytes[SLOTS];
static size_t used_bytes;

static int over_capacity(size_t bytes) {
  const char *mb = getenv("CW_FAKE_MEM_MB");
  return mb && used_bytes + bytes > (size_t)atol(mb) << 20;
}
static void remember(unsigned long long a, size_t bytes) {
  for (int i = 0; i < SLOTS; i++)
    if (!slot_addr[i]) {
      slot_addr[i] = a;
      slot_bytes[i] = bytes;
      used_bytes += bytes;
      return;
    }
}
static void forget(unsigned long long a) {
  for (int i = 0; i < SLOTS; i++)
    if (slot_addr[i] == a) {
      slot_addr[i] = 0;
      used_bytes -= slot_bytes[i];
      return;
    }
}
static int do_alloc(unsigned long long *d, size_t bytes) {
  const char *us = getenv("CW_FAKE_ALLOC_US_PER_MB");
  if (faulted) return 700;
  if (over_capacity(bytes)) return 2;
  usleep((useconds_t)(bytes >> 20) * (us ? (useconds_t)atoi(us) : 1000));
  *d = (next_handle += 0x100000);
  remember(*d, bytes);
  return 0;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int cuInit(unsigned flags) { (void)flags; return 0; }
/* Module loads take CW_FAKE_LOAD_MS (default 20) ms: a JIT or a fatbin's load. */
int cuModuleLoadData(void **mod, const void *image) {
  (void)image;
  const char *ms = getenv("CW_FAKE_LOAD_MS");
  usleep((useconds_t)((ms ? atof(ms) : 20.0) * 1000));
  *mod = (void *)(next_handle += 0x10);
  return 0;
}
int cuModuleUnload(void *mod) {
  (void)mod;
  return faulted ? 700 : 0;
}
int cuModuleGetFunction(void **f, void *mod, const char *name) {
  (void)mod; (void)name;
  *f = (void *)(next_handle += 0x10);
  return 0;
}
int cuLibraryGetKernel(void **k, void *lib, const char *name) {
  (void)lib; (void)name;
  *k = (void *)(next_handle += 0x10);
  return 0;
}
int cuKernelGetFunction(void **f, void *k) {
  *f = (void *)((unsigned long)k + 1);
  return 0;
}
int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                   unsigned bz, unsigned smem, void *stream, void **params, void **extra) {
  (void)f; (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)stream;
  (void)params; (void)extra;
  if (faulted) return 700;
  const char *at = getenv("CW_FAKE_FAULT_LAUNCH");
  if (at && ++launches == atol(at)) faulted = 1;
  if (smem) usleep(smem); /* 0: return at once (launch-rate tests) */
  return 0;
}
int cuLaunchKernelEx(const CUlaunchConfig *cfg, void *f, void **params, void **extra) {
  (void)f; (void)params; (void)extra;
  if (cfg->sharedMemBytes) usleep(cfg->sharedMemBytes);
  return 0;
}
int cuMemAlloc_v2(unsigned long long *d, size_t bytes) { return do_alloc(d, bytes); }
int cuMemAllocAsync(unsigned long long *d, size_t bytes, void *stream) {
  (void)stream;
  return do_alloc(d, bytes);
}
/* Physical memory by handle, as PyTorch's expandable segments use it. */
int cuMemCreate(unsigned long long *handle, size_t bytes, const void *prop, unsigned long long flags) {
  (void)prop; (void)flags;
  return do_alloc(handle, bytes);
}
int cuMemFree_v2(unsigned long long d) {
  if (faulted) return 700;
  forget(d);
  return 0;
}
int cuMemFreeAsync(unsigned long long d, void *stream) {
  (void)stream;
  return cuMemFree_v2(d);
}
int cuMemRelease(unsigned long long handle) { return cuMemFree_v2(handle); }
static void pin_cost(size_t bytes) {
  const char *us = getenv("CW_FAKE_PIN_US_PER_MB");
  double until = now_ms() + (double)(bytes >> 20) * (us ? atof(us) : 200.0) / 1000.0;
  while (now_ms() < until) {
  }
}
int cuMemHostAlloc(void **p, size_t bytes, unsigned flags) {
  (void)flags;
  if (faulted) return 700;
  pin_cost(bytes);
  *p = (void *)(next_handle += 0x100000);
  return 0;
}
int cuMemFreeHost(void *p) {
  (void)p;
  return faulted ? 700 : 0;
}
int cuMemHostRegister_v2(void *p, size_t bytes, unsigned flags) {
  (void)p; (void)flags;
  if (faulted) return 700;
  pin_cost(bytes);
  return 0;
}
int cuMemHostUnregister(void *p) {
  (void)p;
  return faulted ? 700 : 0;
}
int cuMemcpyHtoD_v2(unsigned long long dst, const void *src, size_t n) {
  (void)dst; (void)src; (void)n;
  return faulted ? 700 : 0;
}
int cuMemcpyDtoH_v2(void *dst, unsigned long long src, size_t n) {
  (void)dst; (void)src; (void)n;
  return faulted ? 700 : 0;
}
int cuCtxSynchronize(void) {
  const char *ms = getenv("CW_FAKE_SYNC_MS");
  const char *block = getenv("CW_FAKE_SYNC_BLOCK");
  double until = now_ms() + (ms ? atof(ms) : 50.0);
  while (now_ms() < until) {
    if (block && *block == '1') {
      struct timespec t = {0, 100 * 1000 * 1000};
      nanosleep(&t, NULL);
    }
  }
  return faulted ? 700 : 0;
}
int cuStreamSynchronize(void *s) {
  (void)s;
  return faulted ? 700 : 0;
}
/* An event recorded after the collectives of a step: with the stand-in
 * libnccl loaded (RTLD_GLOBAL), its sync waits for them as a real one waits
 * for NCCL's kernels, until every rank has entered them and the last one
 * arrived (workloads/lib/nccl.c); without it, it returns at once. */
int cuEventSynchronize(void *ev) {
  (void)ev;
  void (*drain)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "cwFakeNcclDrain");
  if (drain) drain();
  return faulted ? 700 : 0;
}
