/* Loads and unloads libcudart CYCLES times (dlopen/dlclose, RTLD_NODELETE
 * off), making one cudaMalloc of 2718 bytes per load, so its mapping comes
 * and goes while traced. A library with static destructors may stay mapped;
 * the check after each dlclose says whether it really went away.
 * usage: dlopen_cycle LIBCUDART CYCLES */
#include <string.h>
#include <unistd.h>

#include "cuda_api.h"

static int mapped(const char *path) {
  FILE *f = fopen("/proc/self/maps", "r");
  char line[4096];
  int found = 0;
  while (f && fgets(line, sizeof line, f))
    if (strstr(line, path)) found = 1;
  if (f) fclose(f);
  return found;
}

int main(int argc, char **argv) {
  if (argc < 3) return 2;
  int cycles = atoi(argv[2]), unmapped = 0;
  const char *base = strrchr(argv[1], '/') ? strrchr(argv[1], '/') + 1 : argv[1];
  for (int i = 0; i < cycles; i++) {
    void *rt = cw_dlopen(argv[1]);
    CW_LOAD(rt, cudaMalloc);
    void *p;
    cudaMalloc(&p, 2718);
    dlclose(rt);
    if (!mapped(base)) unmapped++;
    usleep(20 * 1000);
  }
  printf("dlopen_cycle: %d cycles, unmapped after %d\n", cycles, unmapped);
  return 0;
}
