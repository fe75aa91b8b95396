/* A traced process that sleeps and wakes N times (SLEEP_US each): N off-CPU
 * intervals of a traced thread, host records at a known rate
 * (bench/record_cost.sh). One cudaStreamSynchronize first, so that tracing
 * the whole host picks the process up. usage: sleep_storm LIBCUDART N [SLEEP_US] */
#include <time.h>

#include "cuda_api.h"

int main(int argc, char **argv) {
  if (argc < 3) return 2;
  void *rt = cw_dlopen(argv[1]);
  int (*sync)(void *) = (int (*)(void *))cw_sym(rt, "cudaStreamSynchronize");
  long n = atol(argv[2]);
  long us = argc > 3 ? atol(argv[3]) : 50;
  struct timespec t0, t1, d = {0, us * 1000};
  sync(NULL);
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (long i = 0; i < n; i++) nanosleep(&d, NULL);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
  printf("%ld sleeps in %.3f s (%.0f/s)\n", n, s, n / s);
  return 0;
}
