// A hot loop in a CUDA program built as nvcc builds by default: the CUDA
// runtime linked statically into the executable (no libcudart.so; CuPy and
// most engines ship so). Each step launches a small kernel and reads one
// value back (a blocking 4-byte copy): a sync storm, planted in step_sync().
// Built on the GPU host by workloads/gpu/validate.sh:
//   nvcc -O2 -o static_loop static_loop.cu
// usage: static_loop SECONDS
#include <chrono>
#include <cstdio>
#include <cstdlib>

__global__ void scale(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * 1.0001f + 0.5f;
}

__attribute__((noinline)) float step_sync(float* d, int n) {
  float v = 0;
  for (int k = 0; k < 50; k++) {
    scale<<<(n + 255) / 256, 256>>>(d, n);
    cudaMemcpy(&v, d, sizeof v, cudaMemcpyDeviceToHost);  // CALL: static-loop
  }
  return v;
}

int main(int argc, char** argv) {
  const double secs = argc > 1 ? atof(argv[1]) : 8.0;
  const int n = 1 << 16;
  float* d = nullptr;
  if (cudaMalloc(&d, n * sizeof(float)) != cudaSuccess) return 1;
  cudaMemset(d, 0, n * sizeof(float));
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(secs);
  long steps = 0;
  float sum = 0;
  while (std::chrono::steady_clock::now() < end) {
    sum += step_sync(d, n);
    steps++;
  }
  cudaFree(d);
  printf("static-loop: %ld steps (%g)\n", steps, sum);
  return 0;
}
