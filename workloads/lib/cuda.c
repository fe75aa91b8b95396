/* A stand-in libcuda.so.1 exporting the driver functions causeway probes,
 * with controlled durations, for tests of the driver layer on a host with no
 * GPU: cuLaunchKernel sleeps sharedMemBytes microseconds, cuCtxSynchronize
 * spins (stays runnable) for CW_FAKE_SYNC_MS (default 50) ms of wall time,
 * cuMemAlloc sleeps 1 ms per MiB. Handles are small fake numbers. */
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

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int cuInit(unsigned flags) { (void)flags; return 0; }
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
  if (smem) usleep(smem); /* 0: return at once (launch-rate tests) */
  return 0;
}
int cuLaunchKernelEx(const CUlaunchConfig *cfg, void *f, void **params, void **extra) {
  (void)f; (void)params; (void)extra;
  if (cfg->sharedMemBytes) usleep(cfg->sharedMemBytes);
  return 0;
}
int cuMemAlloc_v2(unsigned long long *d, size_t bytes) {
  usleep((useconds_t)(bytes >> 20) * 1000);
  *d = (next_handle += 0x1000);
  return 0;
}
int cuMemFree_v2(unsigned long long d) { (void)d; return 0; }
int cuMemcpyHtoD_v2(unsigned long long dst, const void *src, size_t n) {
  (void)dst; (void)src; (void)n;
  return 0;
}
int cuMemcpyDtoH_v2(void *dst, unsigned long long src, size_t n) {
  (void)dst; (void)src; (void)n;
  return 0;
}
int cuCtxSynchronize(void) {
  const char *ms = getenv("CW_FAKE_SYNC_MS");
  double until = now_ms() + (ms ? atof(ms) : 50.0);
  while (now_ms() < until) {
  }
  return 0;
}
int cuStreamSynchronize(void *s) { (void)s; return 0; }
