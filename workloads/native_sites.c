/* Synchronises through the real libcudart from three native call paths, each
 * ROUNDS times in a row: path_one -> sync_at_a, then path_two -> sync_at_a (the
 * same call site, another caller), then sync_at_b. The probes cache a native
 * call site's stack by its return address and its callers' (frame pointers)
 * and walk it again only now and then: each path must keep its own stack,
 * also when it follows a run of the other. usage: native_sites LIBCUDART ROUNDS */
#include "cuda_api.h"

static cudaStreamSynchronize_t sync_fn;

__attribute__((noinline)) void sync_at_a(void) {
  sync_fn(NULL);
  __asm__ volatile("" ::: "memory");  /* no tail call: the return stays here */
}

__attribute__((noinline)) void sync_at_b(void) {
  sync_fn(NULL);
  __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void path_one(void) {
  sync_at_a();
  __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void path_two(void) {
  sync_at_a();
  __asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: native_sites LIBCUDART ROUNDS\n");
    return 2;
  }
  void *rt = cw_dlopen(argv[1]);
  sync_fn = (cudaStreamSynchronize_t)cw_sym(rt, "cudaStreamSynchronize");
  const int rounds = atoi(argv[2]);
  for (int i = 0; i < rounds; i++) path_one();
  for (int i = 0; i < rounds; i++) path_two();
  for (int i = 0; i < rounds; i++) sync_at_b();
  printf("rounds %d\n", rounds);
  return 0;
}
