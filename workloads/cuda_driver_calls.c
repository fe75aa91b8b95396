/* Calls the driver API of a libcuda (the stand-in build/workloads/lib/
 * libcuda.so.1 in tests) with known arguments and durations.
 * usage: cuda_driver_calls LIBCUDA */
#include "cuda_api.h"

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: cuda_driver_calls LIBCUDA\n");
    return 2;
  }
  void *drv = cw_dlopen(argv[1]);
  CW_LOAD(drv, cuModuleGetFunction);
  CW_LOAD(drv, cuLibraryGetKernel);
  CW_LOAD(drv, cuKernelGetFunction);
  CW_LOAD(drv, cuLaunchKernel);
  CW_LOAD(drv, cuLaunchKernelEx);
  CW_LOAD(drv, cuMemAlloc_v2);
  CW_LOAD(drv, cuMemFree_v2);
  CW_LOAD(drv, cuMemcpyHtoD_v2);
  CW_LOAD(drv, cuCtxSynchronize);
  static char host[4096];
  void *f = NULL, *k = NULL, *f2 = NULL;
  unsigned long long d = 0;

  cuModuleGetFunction(&f, (void *)0x1, "_Z11matmul_bf16PKfS0_Pfi");
  for (int i = 0; i < 3; i++) /* 5 ms each */
    cuLaunchKernel(f, 8, 4, 1, 128, 1, 1, 5000, (void *)0x99, NULL, NULL);
  cuLibraryGetKernel(&k, (void *)0x2, "_Z9softmax_fPfi");
  cuKernelGetFunction(&f2, k);
  CUlaunchConfig cfg = {16, 1, 1, 64, 1, 1, 2000, (void *)0x77, NULL, 0}; /* 2 ms */
  cuLaunchKernelEx(&cfg, f2, NULL, NULL);
  cuMemAlloc_v2(&d, 20 << 20); /* 20 ms */
  cuMemcpyHtoD_v2(d, host, sizeof host);
  cuMemFree_v2(d);
  cuCtxSynchronize(); /* CW_FAKE_SYNC_MS, default 50 ms */
  return 0;
}
