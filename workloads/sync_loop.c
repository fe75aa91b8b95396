/* Calls cuStreamSynchronize as fast as it can for SECONDS through a libcuda
 * it loads itself (the stand-in: each returns at once), so a tracer attaches
 * that library while the loop is already running at full speed. Prints the
 * number of calls. usage: sync_loop LIBCUDA SECONDS */
#include <stdlib.h>
#include <time.h>

#include "cuda_api.h"

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: sync_loop LIBCUDA SECONDS\n");
    return 2;
  }
  void *drv = cw_dlopen(argv[1]);
  CW_LOAD(drv, cuStreamSynchronize);
  struct timespec t0, now;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  const double secs = atof(argv[2]);
  long calls = 0;
  for (;;) {
    for (int i = 0; i < 64; i++, calls++) cuStreamSynchronize(NULL);
    clock_gettime(CLOCK_MONOTONIC, &now);
    if ((now.tv_sec - t0.tv_sec) + (now.tv_nsec - t0.tv_nsec) / 1e9 >= secs) break;
  }
  printf("syncs %ld\n", calls);
  return 0;
}
