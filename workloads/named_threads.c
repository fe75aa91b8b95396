/* A thread that names itself and then calls libcudart: the threads family
 * (include/causeway/model/threads.h) must record it created and renamed,
 * with the name its calls are made under. usage: named_threads LIBCUDART NAME */
#define _GNU_SOURCE
#include <pthread.h>

#include "cuda_api.h"

static int (*sync_fn)(void *);
static const char *name;

static void *dispatcher(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), name);
  sync_fn(NULL);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 3) return 2;
  void *rt = cw_dlopen(argv[1]);
  sync_fn = (int (*)(void *))cw_sym(rt, "cudaStreamSynchronize");
  name = argv[2];
  sync_fn(NULL);  /* the process is traced from here (whole-host tracing) */
  pthread_t t;
  pthread_create(&t, NULL, dispatcher, NULL);
  pthread_join(t, NULL);
  printf("named_threads: done\n");
  return 0;
}
