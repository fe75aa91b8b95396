/* Launches for SECONDS seconds through a libcuda (the stand-in, whose
 * launches busy-wait sharedMemBytes microseconds), a cuStreamSynchronize
 * after every 10: the launch probes of `trace --launch-duty` come and go
 * while the thread is often inside a launch, and every sync must still be
 * a row of its own (a launch caught mid-call by a detach loses its return).
 * usage: duty_loop LIBCUDA SECONDS LAUNCH_US */
#include <stdlib.h>
#include <time.h>

#include "cuda_api.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: duty_loop LIBCUDA SECONDS LAUNCH_US\n");
    return 2;
  }
  void *drv = cw_dlopen(argv[1]);
  CW_LOAD(drv, cuModuleGetFunction);
  CW_LOAD(drv, cuLaunchKernel);
  CW_LOAD(drv, cuStreamSynchronize);
  const double secs = atof(argv[2]);
  const unsigned us = (unsigned)atoi(argv[3]);
  void *f = NULL;
  cuModuleGetFunction(&f, (void *)0x1, "_Z11duty_kernelPf");
  long launches = 0, syncs = 0;
  const double end = now_s() + secs;
  while (now_s() < end) {
    for (int i = 0; i < 10; i++, launches++) cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, us, NULL, NULL, NULL);
    cuStreamSynchronize(NULL);
    syncs++;
  }
  printf("launches %ld syncs %ld\n", launches, syncs);
  return 0;
}
