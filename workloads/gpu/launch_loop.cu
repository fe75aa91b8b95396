// A launch-bound loop for measuring the added cost per traced call on a GPU
// host (bench/, docs/performance.md). Built on the GPU host with nvcc:
//   nvcc -O2 -o launch_loop launch_loop.cu
// usage: launch_loop MODE N   (MODE: launch | malloc | memcpy | sync | event)
// Without a GPU each call returns an error at once: the loop then measures
// what the probes add to a call (bench/call_cost.sh, one function a mode).
// Prints one line: "<mode> <n> <microseconds per call>".
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

__global__ void empty_kernel() {}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "launch";
  const int n = argc > 2 ? atoi(argv[2]) : 100000;
  void* d = nullptr;
  static char host[4096];
  cudaFree(0);
  cudaMalloc(&d, 1 << 20);
  for (int i = 0; i < 1000; i++) empty_kernel<<<1, 1>>>();
  cudaDeviceSynchronize();
  auto t0 = std::chrono::steady_clock::now();
  if (!strcmp(mode, "launch")) {
    for (int i = 0; i < n; i++) empty_kernel<<<1, 1>>>();
    cudaDeviceSynchronize();
  } else if (!strcmp(mode, "malloc")) {
    for (int i = 0; i < n; i++) {
      void* p;
      cudaMalloc(&p, 1 << 20);
      cudaFree(p);
    }
  } else if (!strcmp(mode, "sync")) {
    for (int i = 0; i < n; i++) cudaStreamSynchronize(0);
  } else if (!strcmp(mode, "event")) {
    cudaEvent_t e = nullptr;
    cudaEventCreate(&e);
    for (int i = 0; i < n; i++) cudaEventSynchronize(e);
  } else {
    for (int i = 0; i < n; i++) cudaMemcpy(d, host, sizeof host, cudaMemcpyHostToDevice);
  }
  auto t1 = std::chrono::steady_clock::now();
  double us = std::chrono::duration<double, std::micro>(t1 - t0).count() / n;
  printf("%s %d %.3f\n", mode, n, us);
  return 0;
}
