/* peak_probe.c - the peak and labels suites' subprocess: programs whose peak, labels and lifetimes are
 * known, profiled through the API: mi_prof_start_seeded(RATE, SEED), the program, mi_prof_dump(PATH)
 * while what it keeps is still live.  Built with -g, frame pointers, no inlining and -export-dynamic:
 * every site keeps its own frame and is named in the profile (by dladdr) as peak_site_<name>.
 *
 * Usage: peak_probe MODE PATH RATE SEED.  Modes:
 *   transient   build: 1600 x 64 KiB from peak_site_build (100 MiB), then all freed; keep: 40 x 256 KiB
 *               from peak_site_keep (10 MiB), live at the dump
 *   plateau     build as transient; then, while those 100 MiB stay, 200000 x (1024 B from
 *               peak_site_churn, freed at once: one of them live at a time); then as transient
 *   reset       build as transient, 800 of its blocks freed, mi_prof_reset(), stats, the profile
 *   lifetimes   peak_site_long: 64 x 64 KiB; then peak_site_short: 100000 x (1 KiB, freed at once);
 *               then the long blocks freed (each lived at least long_min_ns, measured here on
 *               CLOCK_MONOTONIC, the library's clock); peak_site_kept: 16 x 64 KiB, live at the dump
 *   threads     thread "alpha" allocates 2000 x 4 KiB at peak_site_alpha, thread "beta" 2000 x 4 KiB at
 *               peak_site_beta (each names itself with pthread_setname_np first), an unnamed thread
 *               2000 x 4 KiB at peak_site_gamma ("gamma_tid N"), main 2000 x 4 KiB at peak_site_main;
 *               all live at the dump ("comm NAME": the process's name)
 *   sizes       peak_site_sizes allocates one block of each size 1..4096, all live at the dump (run at
 *               rate 1: every one is sampled)
 * It prints "key value" lines on stdout: t_* are CLOCK_REALTIME nanoseconds at the boundaries of the
 * program's phases, peak_* and inuse_* mi_prof_stats's fields after the dump.  On a failure it prints
 * "peak_probe: ..." on stderr and exits 1.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mimalloc-prof.h"

#define PROBE_NAME "peak_probe"
#include "probe_util.h"

#define NOINLINE __attribute__((noinline, used, visibility("default")))

static void *blocks[4096];               /* static: the probe's bookkeeping is never sampled */
static void *kept[4][2000];

static uint64_t clock_now(clockid_t clock)
{
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void mark(const char *name) { printf("t_%s %" PRIu64 "\n", name, clock_now(CLOCK_REALTIME)); }

/* One allocation site per name: the block is touched (so it is really allocated) and returned. */
#define SITE(name)                                         \
  NOINLINE void *peak_site_##name(size_t size)             \
  {                                                        \
    unsigned char *p = malloc(size);                       \
    if (p == NULL) die("malloc failed");                   \
    p[0] = 1;                                              \
    __asm__ volatile("" ::"r"(p) : "memory");              \
    return p;                                              \
  }
SITE(build) SITE(keep) SITE(churn) SITE(long) SITE(short) SITE(kept) SITE(alpha) SITE(beta) SITE(gamma)
SITE(main) SITE(sizes)
#undef SITE

static void build(void)
{
  mark("build");
  for (size_t i = 0; i < 1600; i++) blocks[i] = peak_site_build(64 << 10);
  mark("built");
}

static void free_range(size_t from, size_t to)
{
  for (size_t i = from; i < to; i++) {
    free(blocks[i]);
    blocks[i] = NULL;
  }
}

static void keep(void)
{
  mark("keep");
  for (size_t i = 0; i < 40; i++) blocks[i] = peak_site_keep(256 << 10);
  mark("kept");
}

static void *thread_main(void *arg)
{
  size_t k = (size_t)(uintptr_t)arg;
  static const char *const names[] = {"alpha", "beta"};
  if (k < 2 && pthread_setname_np(pthread_self(), names[k]) != 0) die("pthread_setname_np failed");
  if (k == 2) printf("gamma_tid %d\n", (int)gettid());
  for (size_t i = 0; i < 2000; i++)
    kept[k][i] = k == 0 ? peak_site_alpha(4096) : k == 1 ? peak_site_beta(4096) : peak_site_gamma(4096);
  return NULL;
}

static void threads(void)
{
  char comm[32] = {0};
  if (prctl(PR_GET_NAME, comm, 0, 0, 0) != 0) die("prctl failed");
  printf("comm %s\n", comm);
  pthread_t t[3];
  for (size_t k = 0; k < 3; k++)
    if (pthread_create(&t[k], NULL, thread_main, (void *)(uintptr_t)k) != 0) die("pthread_create failed");
  for (size_t k = 0; k < 3; k++) pthread_join(t[k], NULL);
  for (size_t i = 0; i < 2000; i++) kept[3][i] = peak_site_main(4096);
}

static void lifetimes(void)
{
  for (size_t i = 0; i < 64; i++) blocks[i] = peak_site_long(64 << 10);
  uint64_t t0 = clock_now(CLOCK_MONOTONIC);
  for (size_t i = 0; i < 100000; i++) free(peak_site_short(1024));
  uint64_t t1 = clock_now(CLOCK_MONOTONIC);
  free_range(0, 64);
  printf("long_min_ns %" PRIu64 "\n", t1 - t0);
  for (size_t i = 0; i < 16; i++) blocks[i] = peak_site_kept(64 << 10);
}

int main(int argc, char **argv)
{
  if (argc < 5) die("usage: peak_probe MODE PATH RATE SEED");
  const char *mode = argv[1], *path = argv[2];
  printf("peak_probe\n");                /* stdout's buffer exists before sampling starts */
  fflush(stdout);
  mark("start");
  if (!mi_prof_start_seeded(arg_size(argv[3]), arg_size(argv[4]))) die("mi_prof_start_seeded failed");
  if (strcmp(mode, "transient") == 0 || strcmp(mode, "plateau") == 0) {
    build();
    if (mode[0] == 'p') {
      for (size_t i = 0; i < 200000; i++) free(peak_site_churn(1024));
      mark("plateau_end");
    }
    free_range(0, 1600);
    mark("freed");
    keep();
  } else if (strcmp(mode, "reset") == 0) {
    build();
    free_range(0, 800);
    if (!mi_prof_reset()) die("mi_prof_reset failed");
    mark("reset");
  } else if (strcmp(mode, "lifetimes") == 0) {
    lifetimes();
  } else if (strcmp(mode, "threads") == 0) {
    threads();
  } else if (strcmp(mode, "sizes") == 0) {
    for (size_t i = 0; i < 4096; i++) blocks[i] = peak_site_sizes(i + 1);
  } else {
    die("unknown mode");
  }
  if (!mi_prof_dump(path)) die("mi_prof_dump failed");
  mark("dump");
  mi_prof_stats_t st = stats_now();
  printf("peak_inuse_bytes %" PRIu64 "\npeak_inuse_objects %" PRIu64 "\npeak_time_ns %" PRIu64 "\n",
         st.peak_inuse_bytes, st.peak_inuse_objects, st.peak_time_ns);
  printf("inuse_bytes %" PRIu64 "\ninuse_objects %" PRIu64 "\n", st.inuse_bytes, st.inuse_objects);
  return 0;
}
