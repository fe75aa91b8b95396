/* A stand-in libnccl for tests of cross-rank analysis on a host with no GPU.
 * Ranks are processes that share one state per communicator: a file in
 * /dev/shm named by the ncclUniqueId's text (the launcher's choice, so it can
 * remove it). As with NCCL:
 * - ncclCommInitRank returns once every rank has joined (the bootstrap);
 * - a collective only enqueues: it returns at once. It arrives on the
 *   rank's "GPU" when that is done with the work queued before it
 *   (cwFakeGpuWork(us) queues that much), or at once if it is idle;
 * - an event synchronisation (the stand-in libcuda's cuEventSynchronize
 *   calls cwFakeNcclDrain) waits until every rank has entered this rank's
 *   latest collective and returns when the last rank's arrival plus
 *   CW_FAKE_NCCL_XFER_US (default 300) us have passed: a collective
 *   completes when its last rank arrives, on the GPU.
 * Waits sleep on a futex in the shared state (woken by the rank that enters),
 * as a blocking sync sleeps in the driver. Load it RTLD_GLOBAL so that
 * libcuda finds cwFakeNcclDrain. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/futex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_RANKS 64
#define RING 8  /* arrivals kept per rank: ranks in lockstep are at most one collective apart */

struct shared {
  uint32_t gen;     /* bumped (and woken) by every join and every entry */
  uint32_t joined;
  uint64_t entered[MAX_RANKS];  /* collectives each rank has entered */
  uint64_t arrival[MAX_RANKS][RING];  /* when the n-th reached its GPU (CLOCK_MONOTONIC ns) */
};

typedef struct {
  char internal[128];
} ncclUniqueId;

struct comm {
  struct shared *sh;
  int rank, nranks;
  uint64_t entered;
};

static struct comm *latest;  /* the communicator a sync drains */
static uint64_t gpu_done;    /* when this rank's GPU finishes what is queued */

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* Queues `us` of GPU work behind what is queued (a step's kernels). */
void cwFakeGpuWork(int us) {
  uint64_t t = now_ns();
  gpu_done = (gpu_done > t ? gpu_done : t) + (uint64_t)us * 1000;
}

static void wake(struct shared *sh) {
  __atomic_add_fetch(&sh->gen, 1, __ATOMIC_SEQ_CST);
  syscall(SYS_futex, &sh->gen, FUTEX_WAKE, 0x7fffffff, NULL, NULL, 0);
}

/* Sleeps until sh->gen moves past `seen` (or 20 ms: a wake-up lost between
 * the check and the wait costs no more). */
static void wait_change(struct shared *sh, uint32_t seen) {
  struct timespec t = {0, 20 * 1000 * 1000};
  syscall(SYS_futex, &sh->gen, FUTEX_WAIT, seen, &t, NULL, 0);
}

int ncclGetUniqueId(ncclUniqueId *id) {
  memset(id, 0, sizeof *id);
  snprintf(id->internal, sizeof id->internal, "cwfake-nccl-%d", (int)getpid());
  return 0;
}

int ncclCommInitRank(struct comm **out, int nranks, ncclUniqueId id, int rank) {
  char path[160];
  if (nranks < 1 || nranks > MAX_RANKS || rank < 0 || rank >= nranks) return 4; /* ncclInvalidArgument */
  id.internal[sizeof id.internal - 1] = 0;
  if (!id.internal[0] || strchr(id.internal, '/')) return 4;
  snprintf(path, sizeof path, "/dev/shm/%s", id.internal);
  int fd = open(path, O_RDWR | O_CREAT, 0600);
  if (fd < 0) return 2; /* ncclSystemError */
  if (ftruncate(fd, sizeof(struct shared)) != 0) {
    close(fd);
    return 2;
  }
  struct shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (sh == MAP_FAILED) return 2;
  struct comm *c = calloc(1, sizeof *c);
  c->sh = sh;
  c->rank = rank;
  c->nranks = nranks;
  __atomic_add_fetch(&sh->joined, 1, __ATOMIC_SEQ_CST);
  wake(sh);
  for (;;) {
    uint32_t g = __atomic_load_n(&sh->gen, __ATOMIC_SEQ_CST);
    if ((int)__atomic_load_n(&sh->joined, __ATOMIC_SEQ_CST) >= nranks) break;
    wait_change(sh, g);
  }
  *out = c;
  latest = c;
  return 0;
}

static int enter(struct comm *c) {
  if (!c) return 4;
  uint64_t t = now_ns();
  c->entered++;
  __atomic_store_n(&c->sh->arrival[c->rank][c->entered % RING], gpu_done > t ? gpu_done : t, __ATOMIC_SEQ_CST);
  __atomic_store_n(&c->sh->entered[c->rank], c->entered, __ATOMIC_SEQ_CST);
  wake(c->sh);
  latest = c;
  return 0;
}

int ncclAllReduce(const void *s, void *r, size_t count, int dt, int op, struct comm *c, void *stream) {
  (void)s; (void)r; (void)count; (void)dt; (void)op; (void)stream;
  return enter(c);
}
int ncclAllGather(const void *s, void *r, size_t count, int dt, struct comm *c, void *stream) {
  (void)s; (void)r; (void)count; (void)dt; (void)stream;
  return enter(c);
}
int ncclReduceScatter(const void *s, void *r, size_t count, int dt, int op, struct comm *c, void *stream) {
  (void)s; (void)r; (void)count; (void)dt; (void)op; (void)stream;
  return enter(c);
}
int ncclBroadcast(const void *s, void *r, size_t count, int dt, int root, struct comm *c, void *stream) {
  (void)s; (void)r; (void)count; (void)dt; (void)root; (void)stream;
  return enter(c);
}
int ncclGroupStart(void) { return 0; }
int ncclGroupEnd(void) { return 0; }

/* Blocks until every rank has entered this rank's latest collective of the
 * latest communicator, then until the last arrival plus the transfer. */
void cwFakeNcclDrain(void) {
  struct comm *c = latest;
  if (!c) return;
  for (;;) {
    uint32_t g = __atomic_load_n(&c->sh->gen, __ATOMIC_SEQ_CST);
    int all = 1;
    for (int r = 0; r < c->nranks; r++)
      if (__atomic_load_n(&c->sh->entered[r], __ATOMIC_SEQ_CST) < c->entered) all = 0;
    if (all) break;
    wait_change(c->sh, g);
  }
  uint64_t last = 0;
  for (int r = 0; r < c->nranks; r++) {
    uint64_t a = __atomic_load_n(&c->sh->arrival[r][c->entered % RING], __ATOMIC_SEQ_CST);
    if (a > last) last = a;
  }
  const char *us = getenv("CW_FAKE_NCCL_XFER_US");
  uint64_t done = last + (uint64_t)(us ? atoi(us) : 300) * 1000;
  struct timespec t = {(time_t)(done / 1000000000ull), (long)(done % 1000000000ull)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) != 0) {
  }
  gpu_done = done;
}

int ncclCommDestroy(struct comm *c) {
  if (!c) return 4;
  if (latest == c) latest = NULL;
  munmap(c->sh, sizeof *c->sh);
  free(c);
  return 0;
}
