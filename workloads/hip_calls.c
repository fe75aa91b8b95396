/* Calls the real libamdhip64 with known arguments. Without an AMD GPU every
 * call returns an error (101) and the probes see the real arguments.
 * Expected rows: see tests/e2e/hip_e2e.cpp. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

typedef struct { uint32_t x, y, z; } dim3;

#define LOAD(ret, name, ...)                    \
  ret (*name)(__VA_ARGS__) = dlsym(lib, #name); \
  if (!name) { fprintf(stderr, "missing %s\n", #name); return 2; }

enum { HtoD = 1, DtoH = 2, DtoD = 3 };

/* Its address is what hipLaunchKernel receives: the kernel is named from it. */
__attribute__((noinline)) void hip_vector_add_stub(void) { __asm__ volatile(""); }

int main(int argc, char **argv) {
  void *lib = dlopen(argc > 1 ? argv[1] : "libamdhip64.so.5", RTLD_NOW);
  if (!lib) { fprintf(stderr, "%s\n", dlerror()); return 2; }
  LOAD(int, hipMalloc, void **, size_t);
  LOAD(int, hipFree, void *);
  LOAD(int, hipMemcpy, void *, const void *, size_t, int);
  LOAD(int, hipMemcpyAsync, void *, const void *, size_t, int, void *);
  LOAD(int, hipMemset, void *, int, size_t);
  LOAD(int, hipMemsetAsync, void *, int, size_t, void *);
  LOAD(int, hipDeviceSynchronize, void);
  LOAD(int, hipStreamSynchronize, void *);
  LOAD(int, hipGraphLaunch, void *, void *);
  LOAD(int, hipLaunchKernel, const void *, dim3, dim3, void **, size_t, void *);
  LOAD(int, hipModuleLaunchKernel, void *, unsigned, unsigned, unsigned, unsigned, unsigned,
       unsigned, unsigned, void *, void **, void **);
  static char host[8192];
  void *p = NULL, *dev = (void *)0x100000, *stream = (void *)0x4444;

  hipMalloc(&p, 1 << 20);
  hipMalloc(&p, 4096);
  hipFree(dev);
  hipMemcpy(dev, host, 4096, HtoD);
  hipMemcpy(host, dev, 8192, DtoH);
  hipMemcpyAsync(dev, dev, 65536, DtoD, stream);
  hipMemset(dev, 0, 777);
  hipMemsetAsync(dev, 1, 333, stream);
  hipDeviceSynchronize();
  hipStreamSynchronize(stream);
  hipGraphLaunch((void *)0x99, stream);
  dim3 grid = {4, 2, 1}, block = {256, 1, 1};
  for (int i = 0; i < 2; i++) hipLaunchKernel((void *)hip_vector_add_stub, grid, block, NULL, 1024, stream);
  hipModuleLaunchKernel((void *)0x77, 8, 1, 1, 64, 1, 1, 512, stream, NULL, NULL);
  printf("done\n");
  /* Stay alive past one drain interval: the kernel is named from this
   * process's maps while it is alive. */
  usleep(300 * 1000);
  return 0;
}
