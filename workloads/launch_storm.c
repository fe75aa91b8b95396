/* Many fast driver launches with a few slow ones among them, through a
 * libcuda (the stand-in build/workloads/lib/libcuda.so.1, whose launches
 * take sharedMemBytes microseconds): the in-kernel launch aggregation
 * (--launch-sampling) must count every one and keep every slow one.
 * usage: launch_storm LIBCUDA FAST SLOW EX [RATE]
 *   FAST launches of fast_kernel (no wait), SLOW of them 3 ms instead (grid
 *   x 2), spread evenly; then EX cuLaunchKernelEx launches of ex_kernel (kernel in arg1).
 *   RATE: at most this many launches per second, fast ones and then Ex ones
 *   (bench/agent_cost.sh; tests/e2e/launch_sampling_e2e.cpp). */
#include <stdlib.h>
#include <time.h>

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
  const double rate = argc > 5 ? atof(argv[5]) : 0;
  long slow_done = 0;
  struct timespec t0, now;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (long i = 1; i <= fast; i++) {
    if (rate > 0 && i % 64 == 0) { /* pace: sleep until launch i is due */
      clock_gettime(CLOCK_MONOTONIC, &now);
      const double ahead = i / rate - ((now.tv_sec - t0.tv_sec) + (now.tv_nsec - t0.tv_nsec) / 1e9);
      if (ahead > 0) {
        struct timespec d = {(time_t)ahead, (long)((ahead - (time_t)ahead) * 1e9)};
        nanosleep(&d, NULL);
      }
    }
    unsigned us = 0, grid = 1;
    if (every && i % every == 0 && slow_done < slow) {
      us = 3000;
      grid = 2; /* marks the slow ones: on a busy machine a fast one may be slow too */
      slow_done++;
    }
    cuLaunchKernel(f, grid, 1, 1, 32, 1, 1, us, NULL, NULL, NULL);
  }
  CUlaunchConfig cfg = {1, 1, 1, 32, 1, 1, 0, NULL, NULL, 0};
  struct timespec ex0;
  clock_gettime(CLOCK_MONOTONIC, &ex0);
  for (long i = 1; i <= ex; i++) {
    if (rate > 0 && i % 64 == 0) {
      clock_gettime(CLOCK_MONOTONIC, &now);
      const double ahead = i / rate - ((now.tv_sec - ex0.tv_sec) + (now.tv_nsec - ex0.tv_nsec) / 1e9);
      if (ahead > 0) {
        struct timespec d = {(time_t)ahead, (long)((ahead - (time_t)ahead) * 1e9)};
        nanosleep(&d, NULL);
      }
    }
    cuLaunchKernelEx(&cfg, g, NULL, NULL);
  }
  clock_gettime(CLOCK_MONOTONIC, &now);
  const double secs = (now.tv_sec - t0.tv_sec) + (now.tv_nsec - t0.tv_nsec) / 1e9;
  printf("launched %ld fast (%ld of them slow) and %ld Ex in %.3f s (%.0f launches/s)\n", fast,
         slow_done, ex, secs, fast / secs);
  return 0;
}
