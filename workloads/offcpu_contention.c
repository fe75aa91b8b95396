/* A traced thread and a busy loop ("cw_hog") pinned to the same CPU: the
 * thread's cuCtxSynchronize (which spins, so it stays runnable) is preempted
 * by the hog. usage: offcpu_contention LIBCUDA [CPU] */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuda_api.h"

static void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof set, &set);
}

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  int cpu = argc > 2 ? atoi(argv[2]) : 0;
  pin(cpu);
  pid_t hog = fork();
  if (hog == 0) {
    prctl(PR_SET_NAME, "cw_hog");
    volatile unsigned long n = 0;
    for (;;) n++;
  }
  usleep(100000); /* let the hog get going */
  void *drv = cw_dlopen(argv[1]);
  CW_LOAD(drv, cuCtxSynchronize);
  for (int i = 0; i < 3; i++) cuCtxSynchronize();
  kill(hog, SIGKILL);
  waitpid(hog, NULL, 0);
  return 0;
}
