/* One process, two copies of the CUDA runtime at two paths (a framework's
 * bundled copy beside a wheel's): both are probed. cudaMalloc 3 times
 * through the first (1000 B each), 2 times through the second (2000 B each),
 * once the tracer has had time to find the second file.
 * usage: two_cudarts LIBCUDART COPY_OF_LIBCUDART [DELAY_MS] */
#include <unistd.h>

#include "cuda_api.h"

int main(int argc, char **argv) {
  if (argc < 3) return 2;
  int delay_ms = argc > 3 ? atoi(argv[3]) : 2500;
  void *a = cw_dlopen(argv[1]);
  /* RTLD_LOCAL: the copy's symbols stay its own. */
  void *b = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
  if (!b || b == a) {
    fprintf(stderr, "the second copy did not load apart: %s\n", b ? "same handle" : dlerror());
    return 2;
  }
  cudaMalloc_t malloc_a = (cudaMalloc_t)cw_sym(a, "cudaMalloc");
  cudaMalloc_t malloc_b = (cudaMalloc_t)cw_sym(b, "cudaMalloc");
  if (malloc_a == malloc_b) return 3;
  usleep((useconds_t)delay_ms * 1000);
  void *p;
  for (int i = 0; i < 3; i++) malloc_a(&p, 1000);
  for (int i = 0; i < 2; i++) malloc_b(&p, 2000);
  return 0;
}
