// A stand-in libc10_cuda.so: PyTorch's CUDA caching allocator's two methods,
// declared with the real ones' names and signatures (so their mangled
// symbols are the real ones, which causeway probes), over a pool of blocks it
// grows through the stand-in libcuda's cuMemAlloc_v2, as the real one grows
// through cudaMalloc. A freed block goes back to the pool and is handed to
// the next request it fits: so the request that grows the pool can be a
// temporary, not the tensor that is kept (the real allocator's way).
// extern "C" entry points for ctypes: cw_c10_init(libcuda), cw_c10_alloc(size),
// cw_c10_free(ptr), cw_c10_empty_cache().
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <map>

struct CUstream_st;

// CW_HIDE_ALLOCATOR: the build a wheel may ship, its methods hidden (and the
// library stripped): nothing to probe.
#ifdef CW_HIDE_ALLOCATOR
#define CW_ALLOCATOR_VISIBILITY __attribute__((visibility("hidden")))
#else
#define CW_ALLOCATOR_VISIBILITY
#endif

struct OutOfMemoryError {};

namespace c10::cuda::CUDACachingAllocator::Native {
class CW_ALLOCATOR_VISIBILITY NativeCachingAllocator {
 public:
  void malloc(void** devPtr, signed char device, unsigned long size, CUstream_st* stream);
  void free(void* ptr);
};
}  // namespace c10::cuda::CUDACachingAllocator::Native

namespace {
using Native = c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator;
int (*cu_alloc)(unsigned long long*, size_t) = nullptr;
int (*cu_free)(unsigned long long) = nullptr;
std::multimap<unsigned long, unsigned long long> pool;  // free blocks: size -> address
std::map<unsigned long long, unsigned long> in_use;     // address -> size
Native allocator;
}  // namespace

namespace c10::cuda::CUDACachingAllocator::Native {
__attribute__((noinline, used)) void NativeCachingAllocator::malloc(void** devPtr, signed char, unsigned long size,
                                                                    CUstream_st*) {
  const unsigned long rounded = (size + 511) & ~511ul;
  auto it = pool.lower_bound(rounded);
  unsigned long long addr = 0;
  unsigned long got = rounded;
  if (it != pool.end() && it->first <= rounded * 2) {
    got = it->first;
    addr = it->second;
    pool.erase(it);
  } else if (!cu_alloc || cu_alloc(&addr, rounded) != 0) {
    throw OutOfMemoryError();  // as the real one does (c10::OutOfMemoryError), through this frame
  }
  in_use[addr] = got;
  *devPtr = reinterpret_cast<void*>(addr);
}

__attribute__((noinline, used)) void NativeCachingAllocator::free(void* ptr) {
  auto it = in_use.find(reinterpret_cast<unsigned long long>(ptr));
  if (it == in_use.end()) return;
  pool.emplace(it->second, it->first);
  in_use.erase(it);
}
}  // namespace c10::cuda::CUDACachingAllocator::Native

extern "C" {
int cw_c10_init(const char* libcuda) {
  void* h = dlopen(libcuda, RTLD_NOW | RTLD_GLOBAL);
  if (!h) return -1;
  cu_alloc = reinterpret_cast<int (*)(unsigned long long*, size_t)>(dlsym(h, "cuMemAlloc_v2"));
  cu_free = reinterpret_cast<int (*)(unsigned long long)>(dlsym(h, "cuMemFree_v2"));
  return cu_alloc && cu_free ? 0 : -1;
}
void* cw_c10_alloc(unsigned long size) {
  void* p = nullptr;
  try {
    allocator.malloc(&p, 0, size, nullptr);
  } catch (const OutOfMemoryError&) {
    return nullptr;  // torch.cuda.OutOfMemoryError, caught by the caller
  }
  return p;
}
void cw_c10_free(void* p) { allocator.free(p); }
// torch.cuda.empty_cache(): the pool's free blocks go back to the driver.
void cw_c10_empty_cache() {
  for (const auto& [size, addr] : pool) cu_free(addr);
  pool.clear();
}
}
