/* test_record.c - the record table: live records and the in-use estimates follow every free, realloc,
 * stop and restart, and return exactly to zero (catalogue A2, A3, A4, B19, C25, E38).
 *
 * Check allocates on every passing assertion (it packs a location message), so no assertion runs between
 * two snapshots whose difference is asserted, and the deterministic tests take their snapshots without
 * asserting in between. */
#include "suites.h"

#if MPROF_PPROF == 1

#include <errno.h>
#include <malloc.h>
#include <mimalloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mimalloc-prof.h"

#define SEED 0x243f6a8885a308d3ull

/* Requests that must fail (volatile: hidden from -Walloc-size-larger-than): `half` doubled overflows, so
 * reallocarray(p, half, 2) fails before touching p; `huge` is more than any allocator can serve. */
static volatile size_t half = SIZE_MAX / 2 + 2;
static volatile size_t huge = SIZE_MAX - 4096;

/* The record table and the in-use estimate at one moment. */
typedef struct live_s {
  size_t records, bytes;              /* mi_prof_debug_stats */
  uint64_t live_samples, inuse_objects, inuse_bytes;
} live_t;

static live_t live_now(void)
{
  live_t l;
  mi_prof_stats_t st;
  bool ok = mi_prof_debug_stats(&l.records, &l.bytes) && mi_prof_stats(&st, sizeof st);
  ck_assert(ok);
  l.live_samples = st.live_samples;
  l.inuse_objects = st.inuse_objects;
  l.inuse_bytes = st.inuse_bytes;
  return l;
}

static mi_prof_stats_t stats_now(void)
{
  mi_prof_stats_t st;
  ck_assert(mi_prof_stats(&st, sizeof st));
  return st;
}

/* At rate 1 a block of s >= 16 bytes is sampled with p = 1 - e^-s, which is 1 to within 1.2e-7, so its
 * weight rounds to exactly one object and s bytes: the estimate must equal the records themselves.  A macro,
 * so a failure names the step's line. */
#define ck_assert_live_exact(n, b)                \
  do {                                            \
    live_t l_ = live_now();                       \
    ck_assert_uint_eq(l_.records, (n));           \
    ck_assert_uint_eq(l_.bytes, (b));             \
    ck_assert_uint_eq(l_.live_samples, (n));      \
    ck_assert_uint_eq(l_.inuse_objects, (n));     \
    ck_assert_uint_eq(l_.inuse_bytes, (b));       \
  } while (0)

/* Nothing live, in records or in the estimate. */
#define ck_assert_nothing_live() ck_assert_live_exact(0, 0)

/* ---------------------------------------------------------------------------------------------------
   A2: free all -> zero; profiler memory is reused
--------------------------------------------------------------------------------------------------- */

#define A_BLOCKS 1000
#define A_SIZE   512
#define A_RATE   4096

START_TEST(record_free_all_returns_to_zero)
{
  static void *blocks[A_BLOCKS];
  live_t live[2], after[2];
  uint64_t pmem_peak[2], pmem_after[2];
  /* Nothing asserted until both rounds are done: Check allocates on every passing assertion, and at this
   * rate those allocations may be sampled from new stacks, which would grow the stack table between the
   * two measurements this test compares. */
  ck_assert(mi_prof_start_seeded(A_RATE, SEED));
  for (int round = 0; round < 2; round++) {
    for (int i = 0; i < A_BLOCKS; i++) blocks[i] = malloc(A_SIZE);
    live[round] = live_now();
    pmem_peak[round] = stats_now().profiler_bytes;
    for (int i = 0; i < A_BLOCKS; i++) free(blocks[i]);
    after[round] = live_now();
    pmem_after[round] = stats_now().profiler_bytes;
  }
  ck_assert(mi_prof_stop());
  for (int round = 0; round < 2; round++) {
    /* E[records] = 1000 (1 - e^(-512/4096)) = 117.5, sigma = sqrt(117.5 (1 - 0.1175)) = 10.2: zero records
     * would be 11.5 sigma out.  Every record holds its requested size. */
    ck_assert_uint_gt(live[round].records, 0);
    ck_assert_uint_eq(live[round].bytes, live[round].records * A_SIZE);
    ck_assert_uint_eq(live[round].live_samples, live[round].records);
    ck_assert_uint_gt(pmem_peak[round], 0);
    ck_assert_uint_eq(after[round].records, 0);
    ck_assert_uint_eq(after[round].bytes, 0);
    ck_assert_uint_eq(after[round].inuse_bytes, 0);
    ck_assert_uint_eq(after[round].inuse_objects, 0);
    ck_assert_uint_eq(pmem_after[round], pmem_peak[round]);   /* tables are kept for reuse while running */
  }
  /* Round 2 fits in the tables of round 1, and its stacks are round 1's: a record shard (1 of 16) grows
   * past its first 64 slots only beyond 44 records; per round a shard gets Binomial(~118, 1/16) records,
   * mean 7.3, and P(>= 45) < 1e-20. */
  ck_assert_uint_eq(pmem_peak[1], pmem_after[0]);
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   A3: realloc keeps the records and the estimate right, step by step (rate 1: deterministic)
--------------------------------------------------------------------------------------------------- */

START_TEST(record_realloc_accounting)
{
  ck_assert(mi_prof_start_seeded(1, SEED));
  ck_assert_nothing_live();

  /* At rate 1 the distance to the next mark is at most ceil(-ln 2^-53) = 37 bytes: every request of 37
   * bytes or more is sampled. */
  char *a = malloc(100);
  ck_assert_ptr_nonnull(a);
  strcpy(a, "first");
  ck_assert_live_exact(1, 100);

  /* Grow in place, up to the usable size: a realloc is a new allocation of its size (sampled: rate 1) and
   * the free of the old block, so the block keeps its address and gets a new record of the new size. */
  size_t usable = malloc_usable_size(a);
  ck_assert_uint_ge(usable, 100);
  ck_assert_ptr_eq(realloc(a, usable), a);
  ck_assert_live_exact(1, usable);

  /* Shrink in place: a size a fresh request would also get this block size for (the sampled heap's size
   * classes are at least 16 bytes apart at this size). */
  size_t kept = usable - 8;
  ck_assert_ptr_eq(realloc(a, kept), a);
  ck_assert_live_exact(1, kept);
  ck_assert_str_eq(a, "first");

  /* A forced move, 16 B -> 1 MiB: free of the old record + a new sample (rate 1 samples it).  The 16-byte
   * block is sampled unless the distance to the mark exceeds 16 bytes (P = e^-16; fixed seed). */
  unsigned char *b = malloc(16);
  ck_assert_ptr_nonnull(b);
  memset(b, 0x42, 16);
  ck_assert_live_exact(2, kept + 16);
  unsigned char *moved = realloc(b, (size_t)1 << 20);
  ck_assert_ptr_nonnull(moved);
  ck_assert_ptr_ne(moved, b);
  for (int i = 0; i < 16; i++) ck_assert_uint_eq(moved[i], 0x42);
  ck_assert_live_exact(2, kept + ((size_t)1 << 20));

  /* Shrinking to another size class moves too. */
  b = realloc(moved, 64);
  ck_assert_ptr_nonnull(b);
  ck_assert_ptr_ne(b, moved);
  for (int i = 0; i < 16; i++) ck_assert_uint_eq(b[i], 0x42);
  ck_assert_live_exact(2, kept + 64);

  /* realloc(p, 0) frees p's record; what it returns (NULL or a zero-size block) is never sampled:
   * p(0) = 1 - e^0 = 0. */
  void *zero = realloc(b, 0);
  ck_assert_live_exact(1, kept);
  free(zero);
  ck_assert_live_exact(1, kept);

  /* realloc(NULL, n) is malloc(n): a new sample. */
  char *c = realloc(NULL, 200);
  ck_assert_ptr_nonnull(c);
  strcpy(c, "second");
  ck_assert_live_exact(2, kept + 200);

  /* Failures leave the block and its record alone: reallocarray overflow, and a size nothing can serve. */
  errno = 0;
  ck_assert_ptr_null(reallocarray(c, half, 2));
  ck_assert_int_eq(errno, ENOMEM);
  errno = 0;
  ck_assert_ptr_null(realloc(c, huge));
  ck_assert_int_eq(errno, ENOMEM);
  ck_assert_str_eq(c, "second");
  ck_assert_live_exact(2, kept + 200);

  free(a);
  free(c);
  ck_assert_nothing_live();
  ck_assert(mi_prof_stop());
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   A4: after a stop nothing new is recorded, what was is kept; blocks sampled before stay valid
--------------------------------------------------------------------------------------------------- */

/* The test's thread only.  volatile: glibc declares malloc and free __leaf__ ("never calls back into this
 * file"), so GCC may keep these in registers across the calls, yet the observer runs inside them. */
static volatile uint64_t stop_samples_seen, stop_frees_seen;

static void stop_on_sample(void *p, size_t size, size_t weight, size_t rate, uint64_t tid, void *arg)
{
  (void)p, (void)size, (void)weight, (void)rate, (void)tid, (void)arg;
  stop_samples_seen++;
}

static void stop_on_free(void *p, size_t size, void *arg)
{
  (void)p, (void)size, (void)arg;
  stop_frees_seen++;
}

#define TRAFFIC_OPS 100000

/* Alloc/free traffic through the whole malloc family; returns the number of failed requests. */
static unsigned traffic(unsigned ops)
{
  unsigned failed = 0;
  for (unsigned i = 0; i < ops; i++) {
    size_t size = 16 + (size_t)(i * 2654435761u % 8192);
    void *p;
    switch (i % 4) {
    case 0: p = malloc(size); break;
    case 1: p = calloc(1, size); break;
    case 2: p = aligned_alloc(256, size); break;
    default: p = realloc(malloc(16), size); break;
    }
    failed += p == NULL;
    if (p != NULL) *(volatile char *)p = 1;
    free(p);
  }
  return failed;
}

START_TEST(record_stop_then_traffic)
{
  static unsigned char *blocks[A_BLOCKS];
  ck_assert(mi_prof_set_observer(stop_on_sample, stop_on_free, NULL));
  ck_assert(mi_prof_start_seeded(A_RATE, SEED));
  for (int i = 0; i < A_BLOCKS; i++) {
    blocks[i] = malloc(A_SIZE);
    memset(blocks[i], i & 0xff, A_SIZE);
  }
  live_t before = live_now();
  /* E[records] = 117.5, sigma 10.2 (see A2): at least one is 11.5 sigma safe. */
  ck_assert_uint_gt(before.records, 0);

  ck_assert(mi_prof_stop());
  /* Counted from the stop: the assertions before it allocate, and those allocations may be sampled. */
  uint64_t samples = stats_now().samples, observed = stop_samples_seen, frees = stop_frees_seen;
  live_t kept = live_now();
  ck_assert(!mi_prof_is_enabled());
  ck_assert_uint_ge(kept.records, before.records);    /* the stop keeps what was recorded */

  ck_assert_uint_eq(traffic(TRAFFIC_OPS), 0);
  live_t after = live_now();                           /* nothing sampled, nothing kept freed */
  ck_assert_uint_eq(after.records, kept.records);
  ck_assert_uint_eq(after.live_samples, kept.live_samples);
  ck_assert_uint_eq(after.inuse_bytes, kept.inuse_bytes);
  ck_assert_uint_eq(stats_now().samples, samples);     /* cumulative counts stay, none added */
  ck_assert_uint_eq(stop_samples_seen, observed);

  /* Blocks sampled before the stop are intact and free safely: the kept ones leave the in-use totals and
   * reach the observer, as while running. */
  unsigned bad = 0;
  for (int i = 0; i < A_BLOCKS; i++) {
    bad += blocks[i][0] != (i & 0xff) || blocks[i][A_SIZE - 1] != (i & 0xff);
    free(blocks[i]);
  }
  ck_assert_uint_eq(bad, 0);
  ck_assert_uint_ge(stop_frees_seen, frees + before.records);
  ck_assert_uint_le(live_now().records, kept.records - before.records);
  /* A reset while stopped discards the rest; blocks of it freed later have no weight. */
  ck_assert(mi_prof_reset());
  ck_assert_nothing_live();
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   C25: start/stop cycles leak nothing and start from zero
--------------------------------------------------------------------------------------------------- */

#define CYCLES       20
#define CYCLE_ALLOCS 4000
#define CYCLE_EVERY  40                                /* every 40th block outlives its session */
#define CYCLE_KEEP   (CYCLE_ALLOCS / CYCLE_EVERY)

static void *cycle_kept[CYCLE_KEEP];

/* The same traffic each cycle.  It first frees the blocks the previous cycle kept: they were sampled in
 * an earlier session and must not touch this one. */
static void cycle_traffic(void)
{
  for (int i = 0; i < CYCLE_KEEP; i++) free(cycle_kept[i]);
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < CYCLE_ALLOCS; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    void *p = malloc(16 + (size_t)(x % 8192));
    if (i % CYCLE_EVERY == 0) cycle_kept[i / CYCLE_EVERY] = p;
    else free(p);
  }
}

/* Profiler memory once nothing is live and no session runs: a start releases the record tables of shards
 * with no record, a stop the stack table. */
static uint64_t pmem_idle(void)
{
  ck_assert(mi_prof_start_seeded(A_RATE, SEED) && mi_prof_stop() && mi_prof_reset());
  return stats_now().profiler_bytes;
}

/* A stop keeps the session's records and stacks; a reset while stopped discards them.  After that the
 * profiler keeps one record table per shard holding orphans (the kept blocks sampled in
 * the session, about 57 of the 100: each is sampled with probability 0.57 on average; spread by address
 * hash over the 16 shards) and nothing else.  Which
 * shards they fall in depends on where the sampled-block heap put them, which depends on its history (its
 * purges are timed): 15 or 16 tables were seen in the same cycle of different runs on i386.  So per cycle:
 * at most one 4 KiB table (64 slots) per shard above the idle baseline, as at most 101 records are live at
 * once (this cycle's kept samples, the previous cycle's orphans freed before any new allocation, one more)
 * and a shard's table doubles only past 44 of them (16 standard deviations above the binomial mean of
 * 101/16 = 6.3); and once the kept blocks are freed, exactly the baseline again: nothing leaked over 20
 * cycles. */
#define RECORD_SHARDS      16
#define RECORD_TABLE_BYTES 4096

START_TEST(record_start_stop_cycles)
{
  mi_prof_stats_t first = {0};
  uint64_t idle = pmem_idle();
  for (int c = 0; c < CYCLES; c++) {
    /* The session runs without assertions (Check allocates), so every cycle sees the same allocations. */
    mi_prof_stats_t fresh, busy, stopped, discarded;
    bool ok = mi_prof_start_seeded(A_RATE, SEED);
    ok = ok && mi_prof_stats(&fresh, sizeof fresh);
    cycle_traffic();
    ok = ok && mi_prof_stats(&busy, sizeof busy);
    ok = ok && mi_prof_stop();
    ok = ok && mi_prof_stats(&stopped, sizeof stopped);
    ok = ok && mi_prof_reset();
    ok = ok && mi_prof_stats(&discarded, sizeof discarded);
    ck_assert(ok);

    ck_assert_uint_eq(fresh.samples, 0);             /* a session starts from zero */
    ck_assert_uint_eq(fresh.live_samples, 0);
    ck_assert_uint_eq(fresh.inuse_bytes, 0);
    ck_assert_uint_eq(fresh.alloc_bytes, 0);
    ck_assert_uint_eq(fresh.untracked_frees, 0);
    /* E[samples] = sum over 4000 sizes uniform in 16..8207 of 1 - e^(-s/4096), about 4000 * 0.57 = 2280;
     * zero samples is impossible in practice (and the seed is fixed). */
    ck_assert_uint_gt(busy.samples, 0);
    ck_assert_uint_gt(busy.live_samples, 0);
    ck_assert_uint_eq(busy.untracked_frees, 0);
    /* Same seed, same thread, same allocations: a session that starts clean repeats the first exactly. */
    if (c == 0) first = busy;
    ck_assert_uint_eq(busy.samples, first.samples);
    ck_assert_uint_eq(busy.live_samples, first.live_samples);
    ck_assert_uint_eq(busy.inuse_objects, first.inuse_objects);
    ck_assert_uint_eq(busy.inuse_bytes, first.inuse_bytes);
    ck_assert_uint_eq(busy.alloc_objects, first.alloc_objects);
    ck_assert_uint_eq(busy.alloc_bytes, first.alloc_bytes);

    /* Stopped: everything the session recorded stays.  Discarded: every field is 0, profiler memory
     * holds only the orphans' record tables (see above). */
    ck_assert_uint_eq(stopped.sample_rate, 0);
    ck_assert_uint_eq(stopped.live_samples, busy.live_samples);
    ck_assert_uint_eq(stopped.inuse_objects, busy.inuse_objects);
    ck_assert_uint_eq(stopped.inuse_bytes, busy.inuse_bytes);
    ck_assert_uint_eq(stopped.samples, busy.samples);
    ck_assert_uint_eq(stopped.alloc_bytes, busy.alloc_bytes);
    ck_assert_uint_eq(discarded.live_samples, 0);
    ck_assert_uint_eq(discarded.inuse_bytes, 0);
    ck_assert_uint_eq(discarded.samples, 0);
    ck_assert_uint_eq(discarded.alloc_bytes, 0);
    ck_assert_uint_ge(discarded.profiler_bytes, idle + RECORD_TABLE_BYTES);   /* orphans live */
    ck_assert_uint_le(discarded.profiler_bytes, idle + RECORD_SHARDS * RECORD_TABLE_BYTES);
    ck_assert_uint_eq((discarded.profiler_bytes - idle) % RECORD_TABLE_BYTES, 0);
  }
  for (int i = 0; i < CYCLE_KEEP; i++) free(cycle_kept[i]);
  ck_assert_uint_eq(pmem_idle(), idle);
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   E38: long realloc chains leave nothing behind
--------------------------------------------------------------------------------------------------- */

#define CHAINS       10000
#define CHAIN_LENGTH 100
#define CHAIN_MAX    2048

START_TEST(record_realloc_chain_no_leak)
{
  ck_assert(mi_prof_start_seeded(A_RATE, SEED));
  uint64_t x = 0x2545f4914f6cdd1dull;
  unsigned bad = 0;
  for (uint64_t chain = 0; chain < CHAINS; chain++) {
    uint64_t *p = malloc(sizeof *p);
    *p = chain;
    /* Random sizes in 8..2055 bytes: each step grows or shrinks, in place or by a move, sampled or not. */
    for (int k = 0; k < CHAIN_LENGTH; k++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      uint64_t *q = realloc(p, sizeof *p + (size_t)(x % CHAIN_MAX));
      if (q == NULL) {
        bad++;
        continue;
      }
      p = q;
      bad += *p != chain;                            /* the contents follow the block */
    }
    free(p);
  }
  live_t l = live_now();
  mi_prof_stats_t st = stats_now();
  ck_assert_uint_eq(bad, 0);
  /* 1.01e6 requests of sizes uniform in 8..2055, each sampled with mean probability 0.215, except that an
   * in-place resize of a sampled block is no new allocation: E[samples] is of order 1e5, so sampled blocks
   * were resized and moved many times over. */
  ck_assert_uint_gt(st.samples, 0);
  ck_assert_uint_eq(l.records, 0);
  ck_assert_uint_eq(l.bytes, 0);
  ck_assert_uint_eq(l.live_samples, 0);
  ck_assert_uint_eq(l.inuse_objects, 0);
  ck_assert_uint_eq(l.inuse_bytes, 0);
  ck_assert(mi_prof_stop());
}
END_TEST

Suite *record_suite(void)
{
  Suite *s = suite_create("record");
  TCase *tc = tcase_create("record");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, record_free_all_returns_to_zero);
  tcase_add_test(tc, record_realloc_accounting);
  tcase_add_test(tc, record_stop_then_traffic);
  tcase_add_test(tc, record_start_stop_cycles);
  tcase_add_test(tc, record_realloc_chain_no_leak);
  suite_add_tcase(s, tc);
  return s;
}

#endif
