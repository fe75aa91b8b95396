/* SPDX-License-Identifier: Apache-2.0
 * The release build's glibc floor (cmake/GlibcFloor.cmake, docs/building.md):
 * built on Debian 12 (glibc 2.36), the binary must start on glibc 2.28. Every
 * glibc symbol it needs at a newer version is listed in
 * cmake/glibc_floor_2.28.list and every reference to it, in the static
 * archives too, is redirected to __wrap_SYM by `-Wl,--wrap=SYM`. A symbol 2.28
 * already had is bound to that old version by a generated trampoline
 * (build/generated/glibc_floor_2.28_binds.c); the few that 2.28 lacked are
 * written below from what 2.28 has. x86-64 only (the _STAT_VER and the
 * versions named here are its). */
#define _GNU_SOURCE
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* ---- __libc_start_main. Since 2.34 crt1 passes no init function and the
 * new libc runs the executable's constructors itself; an older libc runs only
 * the init it is given, so without one no C++ static constructor would run.
 * This is what glibc's own __libc_csu_init did before 2.34 (the dynamic
 * loader runs DT_PREINIT_ARRAY; DT_FINI_ARRAY runs from _dl_fini). Newer
 * libcs take the given init as a legacy program's and run it alone. */
typedef int (*cw_main_fn)(int, char **, char **);
typedef void (*cw_init_fn)(int, char **, char **);
extern int cw_old_libc_start_main(cw_main_fn main, int argc, char **argv, cw_init_fn init, void (*fini)(void),
                                  void (*rtld_fini)(void), void *stack_end);
__asm__(".symver cw_old_libc_start_main, __libc_start_main@GLIBC_2.2.5");
/* Weak: a shared library linked with this file has no such symbols (and
 * never starts a program). */
extern void _init(void) __attribute__((weak));
extern cw_init_fn __init_array_start[] __attribute__((weak, visibility("hidden")));
extern cw_init_fn __init_array_end[] __attribute__((weak, visibility("hidden")));

static void cw_run_constructors(int argc, char **argv, char **envp) {
  _init();
  const size_t n = (size_t)(__init_array_end - __init_array_start);
  for (size_t i = 0; i < n; i++) __init_array_start[i](argc, argv, envp);
}

int __wrap___libc_start_main(cw_main_fn main, int argc, char **argv, cw_init_fn init, void (*fini)(void),
                             void (*rtld_fini)(void), void *stack_end) {
  (void)init;
  return cw_old_libc_start_main(main, argc, argv, cw_run_constructors, fini, rtld_fini, stack_end);
}

/* ---- __libc_single_threaded (2.32): libstdc++ skips atomics when it reads
 * 1. Never 1 here: always the atomic path, as before 2.32. */
char __wrap___libc_single_threaded = 0;

/* ---- stat and friends (2.33): before, the headers mapped them onto
 * __xstat and its siblings, version 1 (_STAT_VER on x86-64). */
extern int cw_old_xstat(int, const char *, struct stat *);
extern int cw_old_lxstat(int, const char *, struct stat *);
extern int cw_old_fxstat(int, int, struct stat *);
extern int cw_old_fxstatat(int, int, const char *, struct stat *, int);
__asm__(".symver cw_old_xstat, __xstat@GLIBC_2.2.5");
__asm__(".symver cw_old_lxstat, __lxstat@GLIBC_2.2.5");
__asm__(".symver cw_old_fxstat, __fxstat@GLIBC_2.2.5");
__asm__(".symver cw_old_fxstatat, __fxstatat@GLIBC_2.4");
int __wrap_stat(const char *path, struct stat *st) { return cw_old_xstat(1, path, st); }
int __wrap_stat64(const char *path, struct stat *st) { return cw_old_xstat(1, path, st); }
int __wrap_lstat(const char *path, struct stat *st) { return cw_old_lxstat(1, path, st); }
int __wrap_lstat64(const char *path, struct stat *st) { return cw_old_lxstat(1, path, st); }
int __wrap_fstat(int fd, struct stat *st) { return cw_old_fxstat(1, fd, st); }
int __wrap_fstat64(int fd, struct stat *st) { return cw_old_fxstat(1, fd, st); }
int __wrap_fstatat(int dirfd, const char *path, struct stat *st, int flags) {
  return cw_old_fxstatat(1, dirfd, path, st, flags);
}
int __wrap_fstatat64(int dirfd, const char *path, struct stat *st, int flags) {
  return cw_old_fxstatat(1, dirfd, path, st, flags);
}

/* ---- arc4random (2.36; libstdc++'s std::random_device): the kernel's
 * random bytes through getrandom (2.25), as 2.36 itself does. */
static void cw_random_bytes(void *buf, size_t n) {
  unsigned char *p = buf;
  while (n > 0) {
    const ssize_t got = getrandom(p, n, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      __builtin_trap(); /* as glibc's: a random source that fails is fatal */
    }
    p += got;
    n -= (size_t)got;
  }
}
uint32_t __wrap_arc4random(void) {
  uint32_t v;
  cw_random_bytes(&v, sizeof v);
  return v;
}

/* ---- gettid (2.30): the system call it wraps. */
pid_t __wrap_gettid(void) { return (pid_t)syscall(SYS_gettid); }

/* ---- pthread_cond_clockwait (2.30; libstdc++'s waits on steady_clock).
 * What libstdc++ did before 2.30: the steady deadline as a time left, added
 * to the wall clock for pthread_cond_timedwait (2.3.2). A wall-clock step
 * during the wait moves its end, as it did then. */
int __wrap_pthread_cond_clockwait(pthread_cond_t *cond, pthread_mutex_t *mutex, clockid_t clock,
                                  const struct timespec *abstime) {
  if (clock == CLOCK_REALTIME) return pthread_cond_timedwait(cond, mutex, abstime);
  if (clock != CLOCK_MONOTONIC) return EINVAL;
  struct timespec mono, wall;
  clock_gettime(CLOCK_MONOTONIC, &mono);
  clock_gettime(CLOCK_REALTIME, &wall);
  long long left = (long long)(abstime->tv_sec - mono.tv_sec) * 1000000000LL + (abstime->tv_nsec - mono.tv_nsec);
  if (left < 0) left = 0;
  const long long end = (long long)wall.tv_sec * 1000000000LL + wall.tv_nsec + left;
  const struct timespec until = {(time_t)(end / 1000000000LL), (long)(end % 1000000000LL)};
  return pthread_cond_timedwait(cond, mutex, &until);
}

/* ---- _dl_find_object (2.35): the static unwinder (libgcc_eh) finds the
 * .eh_frame_hdr of the object holding a return address through it, so every
 * C++ throw needs it. Before 2.35 it walked dl_iterate_phdr (2.2.5); so do we.
 * Only the fields the unwinder reads are filled on x86-64. */
struct cw_find {
  uintptr_t pc;
  struct dl_find_object *out;
  int found;
};

static int cw_find_in(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  struct cw_find *f = arg;
  const ElfW(Phdr) *eh = NULL;
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  int holds = 0;
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_GNU_EH_FRAME) eh = ph;
    if (ph->p_type != PT_LOAD) continue;
    const uintptr_t start = info->dlpi_addr + ph->p_vaddr, end = start + ph->p_memsz;
    if (start < lo) lo = start;
    if (end > hi) hi = end;
    if (f->pc >= start && f->pc < end) holds = 1;
  }
  if (!holds) return 0;
  f->out->dlfo_flags = 0;
  f->out->dlfo_map_start = (void *)lo;
  f->out->dlfo_map_end = (void *)hi;
  f->out->dlfo_link_map = NULL;
  f->out->dlfo_eh_frame = eh ? (void *)(info->dlpi_addr + eh->p_vaddr) : NULL;
  f->found = 1;
  return 1;
}

int __wrap__dl_find_object(void *pc, struct dl_find_object *result) {
  struct cw_find f = {(uintptr_t)pc, result, 0};
  dl_iterate_phdr(cw_find_in, &f);
  return f.found ? 0 : -1;
}
