/* Forks CHILDREN short-lived children, one at a time; each dlopens
 * libcudart itself (a fresh mapping in a fresh process), calls cudaMalloc
 * once with 31337 bytes and exits. usage: fork_storm LIBCUDART CHILDREN */
#include <sys/wait.h>
#include <unistd.h>

#include "cuda_api.h"

int main(int argc, char **argv) {
  if (argc < 3) return 2;
  int children = atoi(argv[2]), failed = 0;
  for (int i = 0; i < children; i++) {
    pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
      void *rt = cw_dlopen(argv[1]);
      CW_LOAD(rt, cudaMalloc);
      void *p;
      cudaMalloc(&p, 31337);
      _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) failed++;
  }
  printf("fork_storm: %d children, %d failed\n", children, failed);
  return failed ? 1 : 0;
}
