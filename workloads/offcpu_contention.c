/* A traced thread and a busy loop ("cw_hog") pinned to the same CPU: the
 * thread's cuCtxSynchronize (which spins, so it stays runnable) is preempted
 * by the hog. The hog is SCHED_FIFO and runs 2 ms of every 3, so it preempts
 * the thread every time it wakes, whatever else the machine is running.
 * usage: offcpu_contention LIBCUDA [CPU] */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
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
    struct sched_param sp = {.sched_priority = 10};
    sched_setscheduler(0, SCHED_FIFO, &sp);
    for (;;) {
      struct timespec a, b;
      clock_gettime(CLOCK_MONOTONIC, &a);
      do clock_gettime(CLOCK_MONOTONIC, &b);
      while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < 2000000L);
      usleep(1000);
    }
  }
  usleep(100000); /* let the hog get going */
  void *drv = cw_dlopen(argv[1]);
  CW_LOAD(drv, cuCtxSynchronize);
  for (int i = 0; i < 3; i++) cuCtxSynchronize();
  kill(hog, SIGKILL);
  waitpid(hog, NULL, 0);
  return 0;
}
