/* Calls the real libcudart with known arguments. Without a GPU every call
 * returns an error (35) quickly, but the probes see the real arguments.
 * Expected rows: see tests/e2e/trace_cuda_e2e.cpp. */
#include <unistd.h>

#include "cuda_api.h"

/* A host stub: its address is what cudaLaunchKernel receives; causeway names
 * the kernel from this symbol. */
__attribute__((noinline)) void vector_add_stub(void) { __asm__ volatile(""); }
__attribute__((noinline)) void softmax_stub(void) { __asm__ volatile(""); }

int main(int argc, char **argv) {
  void *rt = cw_dlopen(argc > 1 ? argv[1] : CW_DEFAULT_CUDART);
  CW_LOAD(rt, cudaMalloc);
  CW_LOAD(rt, cudaFree);
  CW_LOAD(rt, cudaMemcpy);
  CW_LOAD(rt, cudaMemcpyAsync);
  CW_LOAD(rt, cudaMemset);
  CW_LOAD(rt, cudaLaunchKernel);
  CW_LOAD(rt, cudaLaunchKernelExC);
  CW_LOAD(rt, cudaStreamSynchronize);
  CW_LOAD(rt, cudaDeviceSynchronize);
  static char host[65536];
  void *p = NULL;
  void *stream = (void *)0x5678;

  cudaMalloc(&p, 1 << 20);
  cudaMalloc(&p, 3 << 20);
  cudaMalloc(&p, 12345);
  cudaFree(p);
  cudaMemcpy(host, host + 1, 4096, 1);           /* HtoD */
  cudaMemcpy(host, host + 1, 8192, 2);           /* DtoH */
  cudaMemcpyAsync(host, host + 1, 65536, 3, stream); /* DtoD */
  cudaMemset(host, 0, 777);
  for (int i = 0; i < 5; i++) {
    dim3 grid = {4, 2, 1}, block = {256, 1, 1};
    cudaLaunchKernel((const void *)vector_add_stub, grid, block, NULL, 1024, stream);
  }
  cudaLaunchKernelExC(&(cudaLaunchConfig_t){{64, 1, 1}, {128, 2, 1}, 2048, (void *)0x9abc, NULL, 0},
                      (const void *)softmax_stub, NULL);
  int rc = cudaStreamSynchronize(stream);
  cudaDeviceSynchronize();
  printf("cudaStreamSynchronize returned %d\n", rc);
  /* Stay alive past one drain interval: kernel names are resolved from this
   * process's maps while it is alive. */
  usleep(300 * 1000);
  return 0;
}
