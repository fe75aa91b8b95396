/* Calls the real libnccl.so.2 with known arguments. Without a GPU the init
 * calls fail (1, ncclUnhandledCudaError) and leave *comm as it was, and the
 * collectives fail argument checks (4) on a zeroed stand-in communicator:
 * the probes still see every real argument. Prints the FNV-1a 64 of each
 * ncclUniqueId, which must be the comm_hash of its rows.
 * Expected rows: see tests/e2e/nccl_e2e.cpp. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { char internal[128]; } ncclUniqueId;
typedef void *ncclComm_t;
typedef void *stream_t;

#define LOAD(ret, name, ...)                    \
  ret (*name)(__VA_ARGS__) = dlsym(lib, #name); \
  if (!name) { fprintf(stderr, "missing %s\n", #name); return 2; }

enum { Int8 = 0, Int32 = 2, Int64 = 4, Float16 = 6, Float32 = 7, Float64 = 8, Bfloat16 = 9 };
enum { Sum = 0, Max = 2, Min = 3 };

static uint64_t fnv1a(const void *p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < n; i++) {
    h ^= ((const uint8_t *)p)[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

int main(int argc, char **argv) {
  void *lib = dlopen(argc > 1 ? argv[1] : "libnccl.so.2", RTLD_NOW);
  if (!lib) { fprintf(stderr, "%s\n", dlerror()); return 2; }
  LOAD(int, ncclGetVersion, int *);
  LOAD(int, ncclGetUniqueId, ncclUniqueId *);
  LOAD(int, ncclCommInitRank, ncclComm_t *, int, ncclUniqueId, int);
  LOAD(int, ncclCommInitRankConfig, ncclComm_t *, int, ncclUniqueId, int, void *);
  LOAD(int, ncclCommInitAll, ncclComm_t *, int, const int *);
  LOAD(int, ncclCommSplit, ncclComm_t, int, int, ncclComm_t *, void *);
  LOAD(int, ncclCommDestroy, ncclComm_t);
  LOAD(int, ncclCommAbort, ncclComm_t);
  LOAD(int, ncclAllReduce, const void *, void *, size_t, int, int, ncclComm_t, stream_t);
  LOAD(int, ncclAllGather, const void *, void *, size_t, int, ncclComm_t, stream_t);
  LOAD(int, ncclReduceScatter, const void *, void *, size_t, int, int, ncclComm_t, stream_t);
  LOAD(int, ncclBroadcast, const void *, void *, size_t, int, int, ncclComm_t, stream_t);
  LOAD(int, ncclBcast, void *, size_t, int, int, ncclComm_t, stream_t);
  LOAD(int, ncclReduce, const void *, void *, size_t, int, int, int, ncclComm_t, stream_t);
  LOAD(int, ncclSend, const void *, size_t, int, int, ncclComm_t, stream_t);
  LOAD(int, ncclRecv, void *, size_t, int, int, ncclComm_t, stream_t);
  LOAD(int, ncclGroupStart, void);
  LOAD(int, ncclGroupEnd, void);

  int version = 0;
  ncclGetVersion(&version);
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  if (ncclGetUniqueId(&id) != 0) return 3;
  printf("comm_a %016llx\n", (unsigned long long)fnv1a(&id, sizeof id));

  /* Zeroed stand-ins: NCCL rejects them as invalid, without crashing. */
  ncclComm_t fake_a = calloc(1, 1 << 20), fake_b = calloc(1, 1 << 20);
  void *s = (void *)0x5678, *r = (void *)0x2000;
  const void *sb = (const void *)0x1000;

  ncclComm_t a = fake_a;
  ncclCommInitRank(&a, 4, id, 2);
  for (int i = 0; i < 3; i++) ncclAllReduce(sb, r, 1024, Float32, Sum, a, s); /* seq 0-2 */
  ncclAllGather(sb, r, 10, Bfloat16, a, s);                                   /* seq 3 */
  ncclReduceScatter(sb, r, 10, Bfloat16, Max, a, s);                          /* seq 4 */
  ncclBroadcast(sb, r, 100, Int8, 1, a, s);                                   /* seq 5 */
  ncclBcast(r, 16, Float64, 3, a, s);                                         /* seq 6 */
  ncclReduce(sb, r, 8, Int64, Min, 0, a, s);                                  /* seq 7 */
  ncclGroupStart();
  ncclSend(sb, 32, Float16, 3, a, s);
  ncclRecv(r, 32, Float16, 3, a, s);
  ncclGroupEnd();

  ncclUniqueId id_b;
  memset(&id_b, 0x5a, sizeof id_b);
  printf("comm_b %016llx\n", (unsigned long long)fnv1a(&id_b, sizeof id_b));
  ncclComm_t b = fake_b;
  ncclCommInitRankConfig(&b, 2, id_b, 1, NULL);
  ncclAllReduce(sb, r, 256, Int32, Sum, b, s); /* seq 0 of comm b */

  ncclComm_t all[2] = {NULL, NULL};
  ncclCommInitAll(all, 2, NULL);
  ncclComm_t child = NULL;
  ncclCommSplit(NULL, 1, 0, &child, NULL);
  /* Destroying a stand-in would crash NCCL; NULL is accepted (returns 0). */
  ncclCommDestroy(NULL);
  ncclCommAbort(NULL);
  printf("version %d\n", version);
  return 0;
}
