// SPDX-License-Identifier: Apache-2.0
// A parallel region as an intra-op thread pool runs one (OpenMP, as torch's
// CPU ops do): OMP_NUM_THREADS threads share a fixed amount of CPU work and
// meet at the region's closing barrier. Called from Python through ctypes
// (workloads/py_step_loops.py threads), which releases the GIL for the call.
// The pool's threads are named omp_worker_N, once each (a rename per region
// would be a threads row per step).
#include <omp.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <time.h>

static double thread_cpu_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static __thread int named;

// Each thread burns its share of cpu_seconds of its own CPU time (not wall
// time: a thread that waits for a CPU still owes its share).
void cw_parallel_region(double cpu_seconds) {
#pragma omp parallel
  {
    const int n = omp_get_num_threads(), i = omp_get_thread_num();
    if (i > 0 && !named) {
      char name[24];  /* the kernel keeps the first 15 */
      snprintf(name, sizeof name, "omp_worker_%d", i);
      prctl(PR_SET_NAME, name, 0, 0, 0);
      named = 1;
    }
    const double end = thread_cpu_s() + cpu_seconds / n;
    volatile unsigned long x = 0;
    while (thread_cpu_s() < end)
      for (int k = 0; k < 2000; k++) x++;
  }
}
