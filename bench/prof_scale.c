/* prof_scale.c - microbenchmark for bench/run.sh: how long a heap profile dump takes against the
 * number of live samples and of distinct stacks, and how much profiler memory live samples cost.
 *
 * For each (LIVE, STACKS) cell: a fresh session at sample rate 1 byte (every allocation is sampled),
 * LIVE blocks of 64 bytes allocated from STACKS distinct call paths, then
 *   - mi_prof_stats: live samples and profiler_bytes (the profiler's own mapped memory: record table,
 *     stack table, frames), against a session with nothing sampled;
 *   - REPS timed mi_prof_dump_fd to /dev/null (the whole dump: snapshot, pprof encoding, names, gzip)
 *     and one to a file, for its size;
 *   - REPS timed mi_prof_visit with a visitor that does nothing (the snapshot alone);
 * then every block is freed and the session stopped.
 *
 * Distinct stacks: a walk of LEVELS (14) calls through 64 generated functions, each with two call sites;
 * bit k of the path number picks the call site at level k (and the function called next), so path
 * numbers below 2^14 give distinct stacks of LEVELS + a few frames, over 128 distinct return addresses
 * (plus main's and libc's).  Path i % STACKS is used for the i-th block.
 *
 * Usage: prof_scale REPS LIVE:STACKS...   prints one line per cell:
 *   cell live=L stacks=S live_samples=N stacks_seen=K prof_bytes=B base_bytes=B0 dump_ns=T,T,...
 *   visit_ns=T,T,... dump_bytes=Z
 * Build with frame pointers (the harness runs it with MIMALLOC_PROF_UNWIND=fp):
 *   cc -O2 -fno-builtin -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer -fno-optimize-sibling-calls
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <mimalloc-prof.h>

#define LEVELS 14
#define FUNCS  64

typedef void *step_fn(unsigned level, uint32_t path);
static step_fn *const steps[FUNCS];
static volatile uint64_t sink;

static __attribute__((noinline)) void *leaf(void)
{
  char *p = malloc(64);
  p[0] = 1;
  return p;
}

/* Two call sites per function; the work after each call keeps it from being a tail call. */
#define STEP(n)                                                                             \
  static __attribute__((noinline)) void *step##n(unsigned level, uint32_t path)             \
  {                                                                                         \
    void *r;                                                                                \
    if (level == 0) r = leaf();                                                             \
    else if (path & 1) r = steps[(path >> 1) % FUNCS](level - 1, path >> 1);                \
    else r = steps[(path >> 2) % FUNCS](level - 1, path >> 1);                              \
    sink += level + (n);                                                                    \
    return r;                                                                               \
  }
#define STEP8(n) STEP(n##0) STEP(n##1) STEP(n##2) STEP(n##3) STEP(n##4) STEP(n##5) STEP(n##6) STEP(n##7)
STEP8(0) STEP8(1) STEP8(2) STEP8(3) STEP8(4) STEP8(5) STEP8(6) STEP8(7)
#define REF8(n) step##n##0, step##n##1, step##n##2, step##n##3, step##n##4, step##n##5, step##n##6, step##n##7
static step_fn *const steps[FUNCS] = {REF8(0), REF8(1), REF8(2), REF8(3), REF8(4), REF8(5), REF8(6), REF8(7)};

static long long now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static size_t stacks_seen;

static bool count_stack(void *const *frames, size_t depth, const mi_prof_stack_counts_t *c, void *arg)
{
  (void)frames, (void)depth, (void)c, (void)arg;
  stacks_seen++;
  return true;
}

static bool nothing(void *const *frames, size_t depth, const mi_prof_stack_counts_t *c, void *arg)
{
  (void)frames, (void)depth, (void)c, (void)arg;
  return true;
}

static void start(void)
{
  if (!mi_prof_start_seeded(1, 1)) {
    perror("prof_scale: mi_prof_start");
    exit(1);
  }
}

static uint64_t profiler_bytes(uint64_t *live)
{
  mi_prof_stats_t st;
  mi_prof_stats(&st, sizeof st);
  if (live != NULL) *live = st.live_samples;
  return st.profiler_bytes;
}

int main(int argc, char **argv)
{
  if (argc < 3) {
    fprintf(stderr, "usage: prof_scale REPS LIVE:STACKS...\n");
    return 2;
  }
  int reps = atoi(argv[1]);
  int devnull = open("/dev/null", O_WRONLY);
  char path[] = "/tmp/prof_scale.XXXXXX";
  int tmpfd = mkstemp(path);
  if (devnull < 0 || tmpfd < 0) {
    perror("prof_scale");
    return 1;
  }
  unlink(path);

  start();                                   /* the baseline: a session with nothing sampled */
  uint64_t base = profiler_bytes(NULL);
  mi_prof_stop();

  for (int a = 2; a < argc; a++) {
    long live = 0, nstacks = 0;
    if (sscanf(argv[a], "%ld:%ld", &live, &nstacks) != 2 || live < 1 || nstacks < 1 ||
        nstacks > (1L << LEVELS)) {
      fprintf(stderr, "prof_scale: bad cell %s\n", argv[a]);
      return 2;
    }
    void **blocks = calloc((size_t)live, sizeof *blocks);   /* before the session: not sampled */
    start();
    for (long i = 0; i < live; i++) blocks[i] = steps[0](LEVELS, (uint32_t)(i % nstacks));
    uint64_t live_samples;
    uint64_t bytes = profiler_bytes(&live_samples);
    stacks_seen = 0;
    mi_prof_visit(count_stack, NULL);

    printf("cell live=%ld stacks=%ld live_samples=%llu stacks_seen=%zu prof_bytes=%llu base_bytes=%llu dump_ns=",
           live, nstacks, (unsigned long long)live_samples, stacks_seen, (unsigned long long)bytes,
           (unsigned long long)base);
    for (int r = 0; r < reps; r++) {
      long long t0 = now();
      if (!mi_prof_dump_fd(devnull)) perror("prof_scale: mi_prof_dump_fd");
      printf("%s%lld", r ? "," : "", now() - t0);
    }
    printf(" visit_ns=");
    for (int r = 0; r < reps; r++) {
      long long t0 = now();
      mi_prof_visit(nothing, NULL);
      printf("%s%lld", r ? "," : "", now() - t0);
    }
    if (ftruncate(tmpfd, 0) != 0 || lseek(tmpfd, 0, SEEK_SET) != 0 || !mi_prof_dump_fd(tmpfd)) perror("prof_scale: dump");
    struct stat sb;
    fstat(tmpfd, &sb);
    printf(" dump_bytes=%lld\n", (long long)sb.st_size);
    fflush(stdout);

    for (long i = 0; i < live; i++) free(blocks[i]);
    mi_prof_stop();
    free(blocks);
  }
  close(tmpfd);
  close(devnull);
  return 0;
}
