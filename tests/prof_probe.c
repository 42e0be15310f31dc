/* prof_probe.c - a small program linked with the library, run by tests in a subprocess with a chosen
 * environment (the MIMALLOC_PROF_* options are read once, at load, so they can only be tested in a fresh
 * process).  It prints "key value" lines on stdout and never writes to stderr itself unless something
 * the test cannot see went wrong ("prof_probe: ..." and exit status 1): stderr belongs to the library's
 * warnings, which the tests count.
 *
 * Modes (argv[1]):
 *   stats [RATE]        state at main, then mi_prof_start(RATE, default 0 = the option) if not running,
 *                       then the stats fields the options set
 *   sequence RATE N     mi_prof_start(RATE) (seed from MIMALLOC_PROF_SEED), N allocations of a fixed
 *                       pattern of sizes; one "sample INDEX SIZE" line per sampled allocation
 *   budget RATE N SIZE  N live allocations of SIZE bytes; profiler memory peak, budget and drops
 *   arena RATE          start; report the arena, then allocate and check 1000 blocks either way
 *   fill SIZE           allocate (and touch) SIZE-byte blocks until malloc fails; print what it got
 *   keep N SIZE [RATE]  mi_prof_start(RATE, default 65536), N live SIZE-byte blocks: the estimates, the
 *                       dropped counts and what the "dropped (arena_full)" stack holds; then free them all
 *   sigfree N           rate 1, N sampled blocks made and freed while a SIGPROF handler frees some of
 *                       them, interrupting the profiler anywhere (its locks included)
 *   idle N SIZE [LAST]  rate 1, N live SIZE-byte blocks, all freed, then no allocation at all: the sampled
 *                       heap's resident bytes after the frees and after up to 2 s of 10 ms pauses (until
 *                       they fall to the chunks' headers).  With LAST, the last LAST blocks are freed only
 *                       once the others' pages have gone back (polled as above; "first_gone 1")
 */
#define _GNU_SOURCE   /* process_vm_readv (probe_util.h) */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "mimalloc-prof.h"

#define PROBE_NAME "prof_probe"   /* die()'s prefix (probe_util.h) */
#include "probe_util.h"

/* Starts the profiler and prints the outcome: "start 1" or "start 0", then "errno E" (0 on success). */
static bool start_and_report(size_t rate)
{
  errno = 0;
  bool ok = mi_prof_start(rate);
  int err = ok ? 0 : errno;
  printf("start %d\nerrno %d\n", ok ? 1 : 0, err);
  return ok;
}

/* Allocates `count` blocks of `size` bytes, fills each with its own byte, checks them all and frees
 * them: the program's allocations work whatever the profiler does. */
static void traffic(size_t count, size_t size)
{
  unsigned char **p = calloc(count, sizeof *p);
  if (p == NULL) die("calloc failed");
  for (size_t i = 0; i < count; i++) {
    p[i] = malloc(size);
    if (p[i] == NULL) die("malloc failed");
    memset(p[i], (int)(i & 0xff), size);
  }
  for (size_t i = 0; i < count; i++) {
    if (p[i][0] != (unsigned char)(i & 0xff) || p[i][size - 1] != (unsigned char)(i & 0xff))
      die("block contents changed");
    free(p[i]);
  }
  free(p);
  printf("allocations ok\n");
}

static int mode_stats(int argc, char **argv)
{
  printf("enabled_at_main %d\n", mi_prof_is_enabled() ? 1 : 0);
  if (!mi_prof_is_enabled()) start_and_report(argc > 2 ? arg_size(argv[2]) : 0);
  mi_prof_stats_t st = stats_now();
  printf("sample_rate %" PRIu64 "\n", st.sample_rate);
  printf("profiler_bytes_max %" PRIu64 "\n", st.profiler_bytes_max);
  printf("arena_bytes %" PRIu64 "\n", st.arena_bytes);
  printf("arena_limit_bytes %" PRIu64 "\n", st.arena_limit_bytes);
  traffic(1000, 100);
  printf("slow_path_calls %" PRIu64 "\n", stats_now().slow_path_calls);
  return 0;
}

/* sequence: the observer notes the index of each sampled allocation; printed after the run so that
 * printing cannot change what is sampled. */
#define SEQ_MAX 100000
/* volatile: GCC assumes malloc (declared __attribute__((malloc))) reads no caller variable, and would
 * otherwise keep seq_index in a register across the call that runs the callback. */
static volatile size_t seq_index;        /* index of the allocation in progress */
static size_t seq_hits[SEQ_MAX][2];      /* (index, size) of each sample */
static size_t seq_count;

static void seq_on_sample(void *ptr, size_t size, size_t weight, size_t rate, uint64_t tid, void *arg)
{
  (void)ptr, (void)weight, (void)rate, (void)tid, (void)arg;
  if (seq_count < SEQ_MAX) {
    seq_hits[seq_count][0] = seq_index;
    seq_hits[seq_count][1] = size;
  }
  seq_count++;
}

static int mode_sequence(int argc, char **argv)
{
  if (argc < 4) die("usage: sequence RATE N");
  size_t rate = arg_size(argv[2]), n = arg_size(argv[3]);
  void **p = calloc(n, sizeof *p);
  if (p == NULL) die("calloc failed");
  printf("sequence\n");                  /* stdout's buffer is allocated before sampling starts */
  fflush(stdout);
  if (!mi_prof_set_observer(seq_on_sample, NULL, NULL)) die("mi_prof_set_observer failed");
  if (!mi_prof_start(rate)) die("mi_prof_start failed");
  uint64_t x = 0x2545f4914f6cdd1dull;    /* a fixed pattern of sizes 1..4096 */
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    seq_index = i;
    p[i] = malloc(1 + (size_t)(x % 4096));
    if (p[i] == NULL) die("malloc failed");
    if (i % 3 == 2) {                    /* free some, so later blocks reuse addresses */
      free(p[i - 1]);
      p[i - 1] = NULL;
    }
  }
  if (!mi_prof_stop()) die("mi_prof_stop failed");
  for (size_t i = 0; i < n; i++) free(p[i]);
  free(p);
  for (size_t i = 0; i < seq_count && i < SEQ_MAX; i++)
    printf("sample %zu %zu\n", seq_hits[i][0], seq_hits[i][1]);
  printf("samples %zu\n", seq_count);
  return 0;
}

static int mode_budget(int argc, char **argv)
{
  if (argc < 5) die("usage: budget RATE N SIZE");
  size_t rate = arg_size(argv[2]), n = arg_size(argv[3]), size = arg_size(argv[4]);
  unsigned char **p = calloc(n, sizeof *p);
  if (p == NULL) die("calloc failed");
  if (!mi_prof_start(rate)) die("mi_prof_start failed");
  uint64_t peak = 0;
  for (size_t i = 0; i < n; i++) {
    p[i] = malloc(size);
    if (p[i] == NULL) die("malloc failed");
    memset(p[i], (int)(i * 7 & 0xff), size);
    if (i % 64 == 0) {
      mi_prof_stats_t st = stats_now();
      if (st.profiler_bytes > peak) peak = st.profiler_bytes;
    }
  }
  mi_prof_stats_t st = stats_now();
  if (st.profiler_bytes > peak) peak = st.profiler_bytes;
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) {
    if (p[i][0] != (unsigned char)(i * 7 & 0xff) || p[i][size - 1] != (unsigned char)(i * 7 & 0xff)) bad++;
    free(p[i]);
  }
  free(p);
  size_t live = 0;
  mi_prof_debug_stats(&live, NULL);
  printf("bad_blocks %zu\n", bad);
  printf("profiler_bytes_peak %" PRIu64 "\n", peak);
  printf("profiler_bytes_max %" PRIu64 "\n", st.profiler_bytes_max);
  printf("samples %" PRIu64 "\n", st.samples);
  printf("dropped_memory %" PRIu64 "\n", st.dropped[MI_PROF_DROP_MEMORY]);
  printf("live_after_free %zu\n", live);
  return 0;
}

static int mode_arena(size_t rate)
{
  bool started = start_and_report(rate);
  mi_prof_stats_t st = stats_now();
  printf("arena_bytes %" PRIu64 "\n", st.arena_bytes);
  printf("arena_limit_bytes %" PRIu64 "\n", st.arena_limit_bytes);
  printf("dropped_no_arena %" PRIu64 "\n", st.dropped[MI_PROF_DROP_NO_ARENA]);
  traffic(1000, 512);
  st = stats_now();
  printf("samples %" PRIu64 "\n", st.samples);
  printf("enabled %d\n", mi_prof_is_enabled() ? 1 : 0);
  if (started && !mi_prof_stop()) die("mi_prof_stop failed");
  return 0;
}

/* fill: what a program that allocates until failure gets (issue: the arena must not cost it its
 * address space).  Every block is touched, as a program would use it; nothing is freed.  Also the
 * profiler's view at the end, to tell the limit the library ran into. */
static int mode_fill(int argc, char **argv)
{
  if (argc < 3) die("usage: fill SIZE");
  size_t size = arg_size(argv[2]), blocks = 0;
  printf("fill\n");                      /* stdout's buffer exists before memory runs out */
  fflush(stdout);
  for (;;) {
    char *p = malloc(size);
    if (p == NULL) break;
    memset(p, 1, size);
    blocks++;
  }
  mi_prof_stats_t st = stats_now();
  printf("bytes %zu\n", blocks * size);
  printf("enabled %d\n", mi_prof_is_enabled() ? 1 : 0);
  printf("samples %" PRIu64 "\n", st.samples);
  printf("arena_bytes %" PRIu64 "\n", st.arena_bytes);
  return 0;
}

static uint64_t full_stack_bytes;

static bool find_arena_full(void *const *frames, size_t depth, const mi_prof_stack_counts_t *c, void *arg)
{
  (void)arg;
  if (depth == 1 && frames[0] == MI_PROF_FRAME_DROPPED(MI_PROF_DROP_ARENA_FULL)) full_stack_bytes += c->alloc_bytes;
  return true;
}

static int mode_keep(int argc, char **argv)
{
  if (argc < 4) die("usage: keep N SIZE [RATE]");
  size_t n = arg_size(argv[2]), size = arg_size(argv[3]), rate = argc > 4 ? arg_size(argv[4]) : 65536;
  unsigned char **p = calloc(n, sizeof *p);
  if (p == NULL) die("calloc failed");
  printf("keep\n");
  fflush(stdout);
  if (!mi_prof_start(rate)) die("mi_prof_start failed");
  for (size_t i = 0; i < n; i++) {
    if ((p[i] = malloc(size)) == NULL) die("malloc failed");
    memset(p[i], (int)(i & 0xff), size);
  }
  mi_prof_stats_t st = stats_now();
  if (!mi_prof_visit(find_arena_full, NULL)) die("mi_prof_visit failed");
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) {
    bad += p[i][0] != (unsigned char)(i & 0xff) || p[i][size - 1] != (unsigned char)(i & 0xff);
    free(p[i]);
  }
  free(p);
  mi_prof_stats_t after = stats_now();
  printf("bad_blocks %zu\n", bad);
  printf("alloc_bytes %" PRIu64 "\n", st.alloc_bytes);
  printf("inuse_bytes %" PRIu64 "\n", st.inuse_bytes);
  printf("samples %" PRIu64 "\n", st.samples);
  printf("dropped_arena_full %" PRIu64 "\n", st.dropped[MI_PROF_DROP_ARENA_FULL]);
  printf("dropped_stack_alloc_bytes %" PRIu64 "\n", full_stack_bytes);
  printf("inuse_after_free %" PRIu64 "\n", after.inuse_bytes);
  return 0;
}

/* sigfree: the main loop's blocks go through a ring the SIGPROF handler empties, so the handler frees
 * sampled blocks while the main thread is anywhere in the profiler: inside the record table's or the
 * sampled heap's lock, in the middle of a sample.  Only sampled blocks are freed there (rate 1 samples
 * every block of 64 bytes or more), so the handler never enters mimalloc, whose own paths are not
 * reentrant; the profiler's must be.  A missing guard shows as a self-deadlock (the test's watchdog). */
#define RING 256
static void *volatile ring[RING];
static volatile unsigned ring_head, ring_tail;   /* main writes head, the handler tail (one thread) */
static volatile unsigned long handler_frees, handler_runs;

static void sigfree_handler(int sig)
{
  (void)sig;
  int saved = errno;
  handler_runs++;
  while (ring_tail != ring_head) {
    free(ring[ring_tail % RING]);
    ring_tail++;
    handler_frees++;
  }
  errno = saved;
}

static int mode_sigfree(int argc, char **argv)
{
  if (argc < 3) die("usage: sigfree N");
  size_t n = arg_size(argv[2]);
  printf("sigfree\n");
  fflush(stdout);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = sigfree_handler;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGPROF, &sa, NULL) != 0) die("sigaction failed");
  if (!mi_prof_start(1)) die("mi_prof_start failed");
  struct itimerval it = {{0, 20}, {0, 20}};              /* every 20 us of CPU time */
  if (setitimer(ITIMER_PROF, &it, NULL) != 0) die("setitimer failed");
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    void *p = malloc(64 + (size_t)(x % 960));
    if (p == NULL) die("malloc failed");
    if (ring_head - ring_tail < RING) {
      ring[ring_head % RING] = p;
      __asm__ volatile("" ::: "memory");                 /* the slot is written before it is published */
      ring_head++;
    } else {
      free(p);
    }
  }
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_PROF, &off, NULL);
  while (ring_tail != ring_head) sigfree_handler(0);     /* what the handler has not freed yet */
  stats_now();                                           /* leaves the guard: deferred frees done */
  mi_prof_stats_t st = stats_now();
  printf("handler_runs %lu\nhandler_frees %lu\n", (unsigned long)handler_runs, (unsigned long)handler_frees);
  printf("samples %" PRIu64 "\nlive_samples %" PRIu64 "\ninuse_bytes %" PRIu64 "\n", st.samples, st.live_samples,
         st.inuse_bytes);
  return 0;
}

/* closefds: a daemon-style program closes every descriptor above 2, makes its own pipe (which gets the
 * lowest numbers), allocates enough to trigger interval dumps, then reads its message back.  The
 * profiler's dump requests must not use descriptors the program can close and reuse (they once went
 * through a pipe: the profiler thread read the program's bytes and the program hung). */
static int mode_closefds(void)
{
  static const char msg[] = "hello through my pipe";
  for (int fd = 3; fd < 1024; fd++) close(fd);
  int p[2];
  if (pipe(p) != 0) die("pipe failed");
  if (write(p[1], msg, sizeof msg) != (ssize_t)sizeof msg) die("write failed");
  for (int i = 0; i < 2000; i++) free(malloc(16 << 10));   /* 32 MiB: many interval requests */
  char back[64] = "";
  ssize_t n = read(p[0], back, sizeof back);
  printf("read %zd\nsame %d\n", n, n == (ssize_t)sizeof msg && memcmp(back, msg, sizeof msg) == 0);
  return 0;
}

/* Reads the stats every 10 ms until the sampled heap's resident bytes fall to `at_most` or *rounds reaches
 * rounds_max; the last read. */
static mi_prof_stats_t poll_resident(mi_prof_stats_t last, uint64_t at_most, int *rounds, int rounds_max)
{
  while (*rounds < rounds_max && last.arena_resident_bytes > at_most) {
    nanosleep(&(struct timespec){0, 10 * 1000000}, NULL);
    last = stats_now();
    (*rounds)++;
  }
  return last;
}

/* idle: blocks live in slots (SIZE up to 128 KiB); what their pages become when the program stops
 * allocating.  The pauses only pace the reads (nothing here allocates between them). */
static int mode_idle(int argc, char **argv)
{
  if (argc < 4) die("usage: idle N SIZE [LAST]");
  size_t n = arg_size(argv[2]), size = arg_size(argv[3]), last_n = argc > 4 ? arg_size(argv[4]) : 0;
  static char *blocks[4096];
  if (n > 4096 || last_n > n) die("N above 4096, or LAST above N");
  if (!mi_prof_start(1)) die("mi_prof_start failed");
  for (size_t i = 0; i < n; i++) {
    if ((blocks[i] = malloc(size)) == NULL) die("malloc failed");
    memset(blocks[i], 1, size);
  }
  /* 2 s of polls, stretched as Check's timeouts are (an emulator or a loaded builder runs the profiler
   * thread later). */
  const char *stretch = getenv("CK_TIMEOUT_MULTIPLIER");
  int factor = stretch != NULL ? atoi(stretch) : 1, rounds = 0, rounds_max;
  rounds_max = 200 * (factor < 1 ? 1 : factor > 20 ? 20 : factor);
  for (size_t i = 0; i < n - last_n; i++) free(blocks[i]);
  mi_prof_stats_t freed = stats_now(), last = freed;
  if (last_n != 0) {           /* until the first frees' pages are gone: the live blocks' and 64 KiB left */
    uint64_t live = (uint64_t)last_n * size + 64 * 1024;
    last = poll_resident(last, live, &rounds, rounds_max);
    printf("first_gone %d\n", last.arena_resident_bytes <= live);
    for (size_t i = n - last_n; i < n; i++) free(blocks[i]);
    freed = last = stats_now();
    rounds = 0;
  }
  last = poll_resident(last, 64 * 1024, &rounds, rounds_max);
  printf("resident_after_free %" PRIu64 "\nresident_end %" PRIu64 "\nrounds %d\nrounds_max %d\n",
         freed.arena_resident_bytes, last.arena_resident_bytes, rounds, rounds_max);
  return 0;
}

int main(int argc, char **argv)
{
  if (argc < 2) die("usage: prof_probe MODE ...");
  const char *mode = argv[1];
  if (strcmp(mode, "stats") == 0) return mode_stats(argc, argv);
  if (strcmp(mode, "closefds") == 0) return mode_closefds();
  if (strcmp(mode, "sequence") == 0) return mode_sequence(argc, argv);
  if (strcmp(mode, "budget") == 0) return mode_budget(argc, argv);
  if (strcmp(mode, "arena") == 0) return mode_arena(argc > 2 ? arg_size(argv[2]) : 4096);
  if (strcmp(mode, "fill") == 0) return mode_fill(argc, argv);
  if (strcmp(mode, "keep") == 0) return mode_keep(argc, argv);
  if (strcmp(mode, "sigfree") == 0) return mode_sigfree(argc, argv);
  if (strcmp(mode, "idle") == 0) return mode_idle(argc, argv);
  die("unknown mode");
  return 1;
}
