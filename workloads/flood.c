/* Hammers cudaMalloc from THREADS threads, CALLS times each, far faster than
 * a 50 ms drain of a small ring can keep up with; then sleeps SLEEP_MS so a
 * test can kill the tracer while the process is still alive. Prints the total
 * number of calls it made. usage: flood LIBCUDART THREADS CALLS [SLEEP_MS] */
#include <pthread.h>
#include <unistd.h>

#include "cuda_api.h"

static cudaMalloc_t malloc_fn;
static long calls_per_thread;

static void *hammer(void *arg) {
  (void)arg;
  void *p;
  for (long i = 0; i < calls_per_thread; i++) malloc_fn(&p, 4096);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 4) return 2;
  void *rt = cw_dlopen(argv[1]);
  malloc_fn = (cudaMalloc_t)cw_sym(rt, "cudaMalloc");
  int threads = atoi(argv[2]);
  calls_per_thread = atol(argv[3]);
  pthread_t t[64];
  if (threads < 1 || threads > 64) return 2;
  for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, hammer, NULL);
  for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
  printf("flood: %ld calls\n", calls_per_thread * threads);
  fflush(stdout);
  if (argc > 4) usleep((useconds_t)atoi(argv[4]) * 1000);
  return 0;
}
