/* Calls cudaMalloc (1111 bytes), then execs itself with one hop fewer; the
 * new image loads libcudart again and calls cudaMalloc (1111 bytes) once per
 * image: HOPS+1 calls from one pid across HOPS execs.
 * usage: exec_chain LIBCUDART HOPS */
#include <unistd.h>

#include "cuda_api.h"

int main(int argc, char **argv) {
  if (argc < 3) return 2;
  void *rt = cw_dlopen(argv[1]);
  CW_LOAD(rt, cudaMalloc);
  void *p;
  cudaMalloc(&p, 1111);
  int hops = atoi(argv[2]);
  if (hops <= 0) return 0;
  usleep(100 * 1000);
  char next[16];
  snprintf(next, sizeof next, "%d", hops - 1);
  execl("/proc/self/exe", argv[0], argv[1], next, (char *)NULL);
  perror("exec");
  return 1;
}
