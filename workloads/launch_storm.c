/* Many fast driver launches with a few slow ones among them, through a
 * libcuda (the stand-in build/workloads/lib/libcuda.so.1, whose launches
 * take sharedMemBytes microseconds): the in-kernel launch aggregation
 * (--launch-sampling) must count every one and keep every slow one.
 * usage: launch_storm LIBCUDA FAST SLOW EX
 *   FAST launches of fast_kernel (no wait), SLOW of them 3 ms instead (grid
 *   x 2), spread evenly; then EX cuLaunchKernelEx launches of ex_kernel (kernel in arg1). */
#include <stdlib.h>

#include "cuda_api.h"

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: launch_storm LIBCUDA FAST SLOW EX\n");
    return 2;
  }
  void *drv = cw_dlopen(argv[1]);
  CW_LOAD(drv, cuModuleGetFunction);
  CW_LOAD(drv, cuLaunchKernel);
  CW_LOAD(drv, cuLaunchKernelEx);
  const long fast = atol(argv[2]), slow = atol(argv[3]), ex = atol(argv[4]);
  void *f = NULL, *g = NULL;
  cuModuleGetFunction(&f, (void *)0x1, "_Z11fast_kernelPf");
  cuModuleGetFunction(&g, (void *)0x1, "_Z9ex_kernelPf");
  const long every = slow > 0 ? fast / slow : 0;
  long slow_done = 0;
  for (long i = 1; i <= fast; i++) {
    unsigned us = 0, grid = 1;
    if (every && i % every == 0 && slow_done < slow) {
      us = 3000;
      grid = 2; /* marks the slow ones: on a busy machine a fast one may be slow too */
      slow_done++;
    }
    cuLaunchKernel(f, grid, 1, 1, 32, 1, 1, us, NULL, NULL, NULL);
  }
  CUlaunchConfig cfg = {1, 1, 1, 32, 1, 1, 0, NULL, NULL, 0};
  for (long i = 0; i < ex; i++) cuLaunchKernelEx(&cfg, g, NULL, NULL);
  printf("launched %ld fast (%ld of them slow) and %ld Ex\n", fast, slow_done, ex);
  return 0;
}
