/* The slice of the CUDA runtime and driver ABI the workloads call, declared
 * here so that workloads build without CUDA headers and dlopen the real
 * libraries. */
#ifndef CAUSEWAY_WORKLOADS_CUDA_API_H
#define CAUSEWAY_WORKLOADS_CUDA_API_H
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct { unsigned x, y, z; } dim3;
typedef struct {
  dim3 gridDim;
  dim3 blockDim;
  size_t dynamicSmemBytes;
  void *stream;
  void *attrs;
  unsigned numAttrs;
} cudaLaunchConfig_t;

typedef struct {
  unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
  void *hStream;
  void *attrs;
  unsigned numAttrs;
} CUlaunchConfig;

static void *cw_dlopen(const char *path) {
  void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  if (!h) {
    fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
    exit(2);
  }
  return h;
}

static void *cw_sym(void *h, const char *name) {
  void *p = dlsym(h, name);
  if (!p) {
    fprintf(stderr, "dlsym %s: %s\n", name, dlerror());
    exit(2);
  }
  return p;
}

#define CW_LOAD(h, name) name##_t name = (name##_t)cw_sym(h, #name)

typedef int (*cudaMalloc_t)(void **, size_t);
typedef int (*cudaMallocAsync_t)(void **, size_t, void *);
typedef int (*cudaFree_t)(void *);
typedef int (*cudaMemcpy_t)(void *, const void *, size_t, int);
typedef int (*cudaMemcpyAsync_t)(void *, const void *, size_t, int, void *);
typedef int (*cudaMemset_t)(void *, int, size_t);
typedef int (*cudaLaunchKernel_t)(const void *, dim3, dim3, void **, size_t, void *);
typedef int (*cudaLaunchKernelExC_t)(const cudaLaunchConfig_t *, const void *, void **);
typedef int (*cudaStreamSynchronize_t)(void *);
typedef int (*cudaDeviceSynchronize_t)(void);

typedef int (*cuModuleGetFunction_t)(void **, void *, const char *);
typedef int (*cuLibraryGetKernel_t)(void **, void *, const char *);
typedef int (*cuKernelGetFunction_t)(void **, void *);
typedef int (*cuLaunchKernel_t)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                unsigned, void *, void **, void **);
typedef int (*cuLaunchKernelEx_t)(const CUlaunchConfig *, void *, void **, void **);
typedef int (*cuMemAlloc_v2_t)(unsigned long long *, size_t);
typedef int (*cuMemFree_v2_t)(unsigned long long);
typedef int (*cuMemcpyHtoD_v2_t)(unsigned long long, const void *, size_t);
typedef int (*cuMemcpyDtoH_v2_t)(void *, unsigned long long, size_t);
typedef int (*cuCtxSynchronize_t)(void);
typedef int (*cuStreamSynchronize_t)(void *);

#define CW_DEFAULT_CUDART "/usr/local/cuda/lib64/libcudart.so.13"

#endif
