/* dump_time.c - how long mi_prof_dump() takes, and how big the file is, for a large heap profile:
 * 100000 live samples over 10000 distinct stacks (target: under 100 ms).
 *
 * At sample rate 1 every allocation of 64 bytes is sampled (P(interval > 64) = e^-64), so the program
 * makes exactly the samples it wants: 10 live blocks from each of 10^4 stacks.  The stacks are told
 * apart by four levels of calls, each through one of ten functions (f0..f9) chosen by a decimal digit
 * of the stack's number; every function has its own call site, so every path has its own return
 * addresses.  Each dump is timed alone (CLOCK_MONOTONIC, wall time, the file written to a temporary
 * directory); the minimum and median of ROUNDS dumps are printed with the file size.
 *
 * Build and run (from the top of the source tree, after building the library in _build):
 *   cc -O2 -fno-builtin -fno-omit-frame-pointer -fno-optimize-sibling-calls -fno-inline -Iinclude \
 *      bench/dump_time.c -o /tmp/dump_time -L_build/lib/.libs -lmimalloc-prof -Wl,-rpath,$PWD/_build/lib/.libs
 *   /tmp/dump_time [ROUNDS]     (default 11)
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "mimalloc-prof.h"

#define STACKS    10000
#define PER_STACK 10
#define LEVELS    4
#define SIZE      64

static void *blocks[STACKS * PER_STACK];

static void descend(int level, unsigned code, void **out);

/* Ten distinct functions, each calling on with its own return address (the empty asm after the call
 * keeps it from being a tail call). */
#define F(i)                                                                             \
  static __attribute__((noinline)) void f##i(int level, unsigned code, void **out)       \
  {                                                                                      \
    descend(level - 1, code / 10, out);                                                  \
    __asm__ volatile("" ::: "memory");                                                   \
  }
F(0) F(1) F(2) F(3) F(4) F(5) F(6) F(7) F(8) F(9)
#undef F

static void (*const step[10])(int, unsigned, void **) = {f0, f1, f2, f3, f4, f5, f6, f7, f8, f9};

static __attribute__((noinline)) void descend(int level, unsigned code, void **out)
{
  if (level > 0) {
    step[code % 10](level, code, out);
    return;
  }
  for (int i = 0; i < PER_STACK; i++) out[i] = malloc(SIZE);
}

static double now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static bool count_stack(void *const *frames, size_t depth, const mi_prof_stack_counts_t *c, void *arg)
{
  (void)frames, (void)c;
  size_t *n = arg;
  n[0]++;
  n[1] += depth;
  return true;
}

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
  int rounds = argc > 1 ? atoi(argv[1]) : 11;
  if (rounds < 1 || rounds > 1000) rounds = 11;
  char dir[] = "/tmp/dump_time.XXXXXX", path[64];
  if (mkdtemp(dir) == NULL) return perror("mkdtemp"), 1;
  snprintf(path, sizeof path, "%s/profile.pb.gz", dir);
  double *ms = calloc((size_t)rounds, sizeof *ms);
  if (ms == NULL) return 1;

  if (!mi_prof_start_seeded(1, 1)) return perror("mi_prof_start_seeded"), 1;
  for (unsigned s = 0; s < STACKS; s++) descend(LEVELS, s, &blocks[s * PER_STACK]);
  mi_prof_stats_t st;
  mi_prof_stats(&st, sizeof st);
  size_t visited[2] = {0, 0};
  mi_prof_visit(count_stack, visited);

  struct stat sb = {0};
  for (int r = 0; r < rounds; r++) {
    double t = now_ms();
    if (!mi_prof_dump(path)) return perror("mi_prof_dump"), 1;
    ms[r] = now_ms() - t;
  }
  stat(path, &sb);
  qsort(ms, (size_t)rounds, sizeof *ms, cmp_double);
  printf("live samples %" PRIu64 ", stacks %zu (%.1f frames each), profiler memory %.1f MiB\n", st.live_samples,
         visited[0], visited[0] ? (double)visited[1] / (double)visited[0] : 0.0,
         (double)st.profiler_bytes / (1 << 20));
  printf("dump: min %.1f ms, median %.1f ms over %d rounds; file %lld bytes\n", ms[0], ms[rounds / 2], rounds,
         (long long)sb.st_size);
  unlink(path);
  rmdir(dir);
  mi_prof_stop();
  for (size_t i = 0; i < STACKS * PER_STACK; i++) free(blocks[i]);
  free(ms);
  return 0;
}
