/* Hammers cudaMalloc from THREADS threads, CALLS times each, far faster than
 * a 50 ms drain of a small ring can keep up with; then sleeps SLEEP_MS so a
 * test can kill the tracer while the process is still alive. Prints the total
 * number of calls it made. With FORKS, that many children are forked first
 * and live through the flood (a DataLoader's workers: forks of a CUDA
 * process, each a process the tracer looks at), and with PACE_US each thread
 * sleeps that long after every 1,000 calls (a rate a real loop has).
 * usage: flood LIBCUDART THREADS CALLS [SLEEP_MS [FORKS [PACE_US]]] */
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuda_api.h"

static cudaMalloc_t malloc_fn;
static long calls_per_thread;
static useconds_t pace_us;

static void *hammer(void *arg) {
  (void)arg;
  void *p;
  for (long i = 0; i < calls_per_thread; i++) {
    malloc_fn(&p, 4096);
    if (pace_us && i % 1000 == 999) usleep(pace_us);
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 4) return 2;
  void *rt = cw_dlopen(argv[1]);
  malloc_fn = (cudaMalloc_t)cw_sym(rt, "cudaMalloc");
  int threads = atoi(argv[2]);
  calls_per_thread = atol(argv[3]);
  int forks = argc > 5 ? atoi(argv[5]) : 0;
  pace_us = argc > 6 ? (useconds_t)atoi(argv[6]) : 0;
  pthread_t t[64];
  pid_t kids[64];
  if (threads < 1 || threads > 64 || forks < 0 || forks > 64) return 2;
  for (int i = 0; i < forks; i++) {
    kids[i] = fork();
    if (kids[i] == 0) {
      for (;;) pause();
    }
  }
  for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, hammer, NULL);
  for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < forks; i++) {
    kill(kids[i], SIGKILL);
    waitpid(kids[i], NULL, 0);
  }
  printf("flood: %ld calls\n", calls_per_thread * threads);
  fflush(stdout);
  if (argc > 4) usleep((useconds_t)atoi(argv[4]) * 1000);
  return 0;
}
