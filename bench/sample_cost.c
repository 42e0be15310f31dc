/* sample_cost.c - microbenchmark: the cost of one sample (capture + record + the later free of the
 * sampled block) by unwinder and stack depth, for bench/run.sh.
 *
 * The loop: allocate a 64-byte block, free the one allocated WINDOW (1024) iterations earlier, at the
 * bottom of a chain of frames of this program.  "on" batches run in a session at sample rate 1 byte, so
 * every allocation is sampled (p = 1 - exp(-64) = 1) and every free is the free of a sampled block;
 * "off" batches run the same loop with the profiler stopped (the fast paths only).  The cost per sample
 * is (time on - time off) / samples.  All samples of a batch share one stack: after the first, interning
 * is a hit (hash + compare), as it is for most samples of a real program.  Each batch is a fresh
 * session (start .. stop), so a batch also pays the growth of the record and stack tables once.
 *
 * The unwinder is MIMALLOC_PROF_UNWIND (read when the library loads: one process per unwinder).  For a
 * wanted depth D the chain is set so that the stack the library records has D frames: a first session
 * with no extra frames measures the depth the unwinder reaches from the loop (the loop, main, and what
 * the unwinder finds below main), and D minus that many frames are added.  Depths beyond
 * MIMALLOC_PROF_BT_MAX (64) are cut there.
 *
 * Usage:
 *   sample_cost time PAIRS BATCH_MS DEPTH...   for each depth, PAIRS (on, off) pairs of batches (order
 *       alternating), each of about BATCH_MS milliseconds; prints per pair:
 *       pair depth=D frames=F n=N samples=S cpu_on=NS cpu_off=NS wall_on=NS wall_off=NS
 *       (cpu: CLOCK_PROCESS_CPUTIME_ID, wall: CLOCK_MONOTONIC, whole batches)
 *   sample_cost callgrind on|off N DEPTH   one warm-up batch, then one batch of N iterations with
 *       callgrind's collection toggled on around it (run under valgrind --tool=callgrind
 *       --collect-atstart=no): the instructions of that batch alone.  Prints: frames=F samples=S
 *
 * Build: cc -O2 -fno-builtin -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer
 *        -fno-optimize-sibling-calls -Iinclude sample_cost.c -lmimalloc-prof
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <valgrind/callgrind.h>

#include <mimalloc-prof.h>

#define WINDOW 1024
#define MAX_CHAIN 512

static void *ring[WINDOW];
static volatile uint64_t sink;

/* The leaf: n iterations of allocate + free the block of WINDOW iterations ago, then free the rest. */
static __attribute__((noinline)) void churn(long n)
{
  for (long i = 0; i < n; i++) {
    unsigned slot = (unsigned)(i % WINDOW);
    free(ring[slot]);
    char *p = malloc(64);
    p[0] = (char)i;
    ring[slot] = p;
  }
  for (unsigned i = 0; i < WINDOW; i++) {
    free(ring[i]);
    ring[i] = NULL;
  }
}

/* One frame per level: noipa keeps gcc from turning the recursion into a loop, the work after the
 * call keeps it from being a tail call. */
static __attribute__((noipa)) void descend(int level, long n)
{
  if (level == 0) churn(n);
  else descend(level - 1, n);
  sink += (uint64_t)level;
}

static long long now(clockid_t c)
{
  struct timespec ts;
  clock_gettime(c, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static size_t last_depth;

static bool note_depth(void *const *frames, size_t depth, const mi_prof_stack_counts_t *c, void *arg)
{
  (void)frames, (void)arg;
  if (c->alloc_objects != 0 && depth > last_depth) last_depth = depth;
  return true;
}

typedef struct batch_s {
  long long cpu, wall;
  unsigned long long samples;
  size_t frames;
} batch_t;

/* One batch of n iterations under `extra` added frames; on: sampling every allocation. */
static batch_t batch(bool on, int extra, long n, int collect)
{
  batch_t b = {0};
  if (on && !mi_prof_start_seeded(1, 1)) {
    perror("mi_prof_start");
    exit(1);
  }
  long long c0 = now(CLOCK_PROCESS_CPUTIME_ID), w0 = now(CLOCK_MONOTONIC);
  if (collect) CALLGRIND_TOGGLE_COLLECT;
  descend(extra, n);
  if (collect) CALLGRIND_TOGGLE_COLLECT;
  b.wall = now(CLOCK_MONOTONIC) - w0;
  b.cpu = now(CLOCK_PROCESS_CPUTIME_ID) - c0;
  if (on) {
    mi_prof_stats_t st;
    mi_prof_stats(&st, sizeof st);
    b.samples = st.samples;
    last_depth = 0;
    mi_prof_visit(note_depth, NULL);
    b.frames = last_depth;
    mi_prof_stop();
  }
  return b;
}

/* Frames the recorded stack has with no extra frame (measured by main(), whose call of batch() is the
 * same as in the measured batches, so the depth of the chain is the same too). */
static size_t base_frames;

/* The number of extra frames that makes the recorded stack `depth` frames deep. */
static int chain_for(size_t depth)
{
  int extra = (int)depth - (int)base_frames;
  if (extra < 0) extra = 0;
  return extra > MAX_CHAIN ? MAX_CHAIN : extra;
}

int main(int argc, char **argv)
{
  if (!mi_prof_available()) {
    fprintf(stderr, "sample_cost: the library has no sampling engine\n");
    return 1;
  }
  base_frames = batch(true, 0, 2000, 0).frames;
  if (base_frames == 0) {
    fprintf(stderr, "sample_cost: no stack recorded\n");
    return 1;
  }
  if (argc >= 5 && strcmp(argv[1], "time") == 0) {
    int pairs = atoi(argv[2]);
    double batch_ms = atof(argv[3]);
    for (int a = 4; a < argc; a++) {
      size_t depth = (size_t)atol(argv[a]);
      int extra = chain_for(depth);
      /* Size the batch from a calibration batch of the slower kind. */
      batch_t cal = batch(true, extra, 4000, 0);
      double per_iter = (double)cal.wall / 4000;
      long n = (long)(batch_ms * 1e6 / (per_iter > 1 ? per_iter : 1));
      if (n < 2000) n = 2000;
      if (n > 2000000) n = 2000000;
      for (int p = 0; p < pairs; p++) {
        batch_t on, off;
        if (p % 2 == 0) {
          on = batch(true, extra, n, 0);
          off = batch(false, extra, n, 0);
        } else {
          off = batch(false, extra, n, 0);
          on = batch(true, extra, n, 0);
        }
        printf("pair depth=%zu frames=%zu n=%ld samples=%llu cpu_on=%lld cpu_off=%lld wall_on=%lld "
               "wall_off=%lld\n",
               depth, on.frames, n, on.samples, on.cpu, off.cpu, on.wall, off.wall);
        fflush(stdout);
      }
    }
    return 0;
  }
  if (argc == 5 && strcmp(argv[1], "callgrind") == 0) {
    bool on = strcmp(argv[2], "on") == 0;
    long n = atol(argv[3]);
    int extra = chain_for((size_t)atol(argv[4]));
    batch_t warm = batch(true, extra, n, 0);
    batch_t b = batch(on, extra, n, 1);
    printf("frames=%zu samples=%llu\n", warm.frames, on ? b.samples : 0ULL);
    return 0;
  }
  fprintf(stderr, "usage: sample_cost time PAIRS BATCH_MS DEPTH... | callgrind on|off N DEPTH\n");
  return 2;
}
