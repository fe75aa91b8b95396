// A stand-in libc10_cuda.so: PyTorch's CUDA caching allocator as causeway
// sees it, over a pool of blocks it grows through the stand-in libcuda's
// cuMemAlloc_v2, as the real one grows through cudaMalloc. A freed block goes
// back to the pool and is handed to the next request it fits: so the request
// that grows the pool can be a temporary, not the tensor that is kept (the
// real allocator's way).
// - The USDT probes the real one has (pytorch:malloc ptr device size stream,
//   after the block is handed out; pytorch:free ptr, in the tensor's
//   deleter), each behind its semaphore: what causeway uses first.
// - NativeCachingAllocator::malloc and the deleter local_raw_delete, declared
//   with the real names and signatures (their mangled symbols are the real
//   ones): what causeway uses without the probes. malloc throws out of memory
//   through itself, as the real one does.
// Builds: the default has both; CW_NO_SDT, the symbols only; with
// CW_HIDE_ALLOCATOR as well (and stripped), neither.
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

#ifndef CW_NO_SDT
// A SystemTap SDT note (.note.stapsdt: pc, base 0, semaphore, provider, name,
// argument specs) for a nop at this point; the argument specs name where the
// operands are ("-8@%rax", "-1@%dl"), as the compiler placed them.
#define CW_SDT(provider, name, sem, argfmt, ...)                                                  \
  __asm__ __volatile__("990: nop\n"                                                             \
                       ".pushsection .note.stapsdt,\"\",\"note\"\n"                               \
                       ".balign 4\n"                                                             \
                       ".4byte 992f-991f, 994f-993f, 3\n"                                        \
                       "991: .asciz \"stapsdt\"\n"                                               \
                       "992: .balign 4\n"                                                        \
                       "993: .8byte 990b\n"                                                      \
                       ".8byte 0\n"                                                              \
                       ".8byte " #sem "\n"                                                       \
                       ".asciz \"" provider "\"\n"                                               \
                       ".asciz \"" name "\"\n"                                                   \
                       ".asciz \"" argfmt "\"\n"                                                 \
                       "994: .balign 4\n"                                                        \
                       ".popsection\n" ::__VA_ARGS__)
// The semaphores: the kernel raises them while a probe is attached; the
// probe's code runs only then (as PyTorch's TORCH_SDT_IS_ENABLED).
extern "C" {
__attribute__((section(".probes"), used)) volatile unsigned short pytorch_malloc_semaphore = 0;
__attribute__((section(".probes"), used)) volatile unsigned short pytorch_free_semaphore = 0;
}
#endif

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

// The deleter of every tensor the allocator handed out (the real one's free
// is inlined here: this is where frees are seen).
__attribute__((noinline, used)) static void local_raw_delete(void* ptr) {
#ifndef CW_NO_SDT
  if (pytorch_free_semaphore) CW_SDT("pytorch", "free", pytorch_free_semaphore, "-8@%0", "nor"(ptr));
#endif
  allocator.free(ptr);
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
// NativeCachingAllocator::allocate: the block, then the probe.
void* cw_c10_alloc(unsigned long size) {
  void* p = nullptr;
  try {
    allocator.malloc(&p, 0, size, nullptr);
  } catch (const OutOfMemoryError&) {
    return nullptr;  // torch.cuda.OutOfMemoryError, caught by the caller
  }
#ifndef CW_NO_SDT
  signed char device = 0;
  long stream = 0;
  if (pytorch_malloc_semaphore)
    CW_SDT("pytorch", "malloc", pytorch_malloc_semaphore, "-8@%0 -1@%1 -8@%2 -8@%3", "nor"(p), "nor"(device),
           "nor"(size), "nor"(stream));
#endif
  return p;
}
void cw_c10_free(void* p) { c10::cuda::CUDACachingAllocator::Native::local_raw_delete(p); }
// torch.cuda.empty_cache(): the pool's free blocks go back to the driver.
void cw_c10_empty_cache() {
  for (const auto& [size, addr] : pool) cu_free(addr);
  pool.clear();
}
}
