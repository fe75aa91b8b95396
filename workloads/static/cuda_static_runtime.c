/* The CUDA runtime linked statically (libcudart_static.a, nvcc's default):
 * the binary imports no libcudart and exports no cuda* symbol, and its calls
 * reach no shared library causeway could probe by name. Without a driver
 * every call fails (35, cudaErrorInsufficientDriver) quickly, yet each
 * entry point runs, with these exact arguments:
 *   3 cudaMalloc (1 MiB, 2 MiB, 4096 B), 2 cudaMemcpy (HtoD 4096, DtoH 8192),
 *   1 cudaMemcpyAsync (DtoH 512), 3 cudaStreamSynchronize, 2
 *   cudaDeviceSynchronize, 1 cudaHostAlloc (64 KiB) and 1 cudaFreeHost,
 *   3 cudaFree.
 * usage: cuda_static_runtime */
#include <stdio.h>
#include <cuda_runtime_api.h>

int main(void) {
  void *d[3] = {0, 0, 0};
  static char host[8192];
  void *pinned = 0;
  int failed = 0;
  failed += cudaMalloc(&d[0], 1 << 20) != 0;
  failed += cudaMalloc(&d[1], 2 << 20) != 0;
  failed += cudaMalloc(&d[2], 4096) != 0;
  failed += cudaMemcpy(d[0], host, 4096, cudaMemcpyHostToDevice) != 0;
  failed += cudaMemcpy(host, d[1], 8192, cudaMemcpyDeviceToHost) != 0;
  failed += cudaMemcpyAsync(host, d[2], 512, cudaMemcpyDeviceToHost, 0) != 0;
  for (int i = 0; i < 3; i++) failed += cudaStreamSynchronize(0) != 0;
  failed += cudaDeviceSynchronize() != 0;
  failed += cudaHostAlloc(&pinned, 64 << 10, cudaHostAllocDefault) != 0;
  failed += cudaFreeHost(pinned) != 0;
  failed += cudaDeviceSynchronize() != 0;
  for (int i = 0; i < 3; i++) failed += cudaFree(d[i]) != 0;
  printf("%d calls failed\n", failed);
  return 0;
}
