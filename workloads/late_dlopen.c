/* Loads a libcudart copy only after a while (dlopen), then calls cudaMalloc
 * twice with 424242 bytes once the tracer has had time to find the new file.
 * usage: late_dlopen LIBCUDART [DELAY_MS] */
#include <unistd.h>

#include "cuda_api.h"

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  int delay_ms = argc > 2 ? atoi(argv[2]) : 2500;
  usleep(300 * 1000);
  void *rt = cw_dlopen(argv[1]);
  CW_LOAD(rt, cudaMalloc);
  usleep((useconds_t)delay_ms * 1000);
  void *p;
  cudaMalloc(&p, 424242);
  cudaMalloc(&p, 424242);
  return 0;
}
