/* test_sampler.c - the sampling engine: exponential byte intervals, sample weights and the unbiased
 * estimates built from them, and when threads (new, already running, restarted) begin to sample.
 *
 * Every bound below is derived in a comment from p(s) = 1 - exp(-s/R), the probability that an
 * allocation of s bytes is sampled at rate R, and allows at least 4 standard deviations.  Sessions use
 * a fixed seed (SEED), so each test is deterministic; MPROF_TEST_SEED=<n> in the environment replaces
 * it, to check the bounds against other seeds.
 *
 * Check's own assertions allocate (each passing ck_assert sends a location message), and those
 * allocations could be sampled: the tests measure first, with no ck_assert between mi_prof_start and
 * the last counter read, and assert afterwards.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mimalloc-prof.h"
#include "sampling_util.h"
#include "suites.h"

#if MPROF_PPROF == 1

#define SEED  0x5eed2024u

static uint64_t test_seed(void) { return test_seed_or(SEED); }
static void start_rate(size_t rate) { start_seeded(rate, test_seed()); }
static mi_prof_stats_t stats_now(void) { return stats_or_abort(); }

/* Blocks kept live by the tests (the largest case, small_attribution, keeps 820000).  Static, so that
 * holding them allocates nothing while a session runs. */
#define BLOCKS_MAX 820000
static void *blocks[BLOCKS_MAX];

/* ---------------------------------------------------------------------------------------------------
   An observer that records every sample, in order.  Entries are reserved with an atomic counter, so
   several threads may sample at once; `alloc_index` lets a test say which of its allocations was sampled.
--------------------------------------------------------------------------------------------------- */

typedef struct seen_s {
  void    *ptr;
  size_t   size;
  size_t   weight;
  size_t   rate;
  uint64_t tid;
  uint64_t index;        /* alloc_index of the sampling thread at the sample */
} seen_t;

#define SEEN_MAX (1u << 16)
static seen_t seen[SEEN_MAX];
static unsigned seen_count;    /* samples reported; entries past SEEN_MAX are lost (asserted) */
static unsigned freed_count;   /* on_free calls */
static __thread uint64_t alloc_index;

static void record_sample(void *ptr, size_t size, size_t weight, size_t rate, uint64_t tid, void *arg)
{
  (void)arg;
  unsigned i = __atomic_fetch_add(&seen_count, 1, __ATOMIC_RELAXED);
  if (i < SEEN_MAX) seen[i] = (seen_t){ptr, size, weight, rate, tid, alloc_index};
}

static void record_free(void *ptr, size_t size, void *arg)
{
  (void)ptr, (void)size, (void)arg;
  __atomic_fetch_add(&freed_count, 1, __ATOMIC_RELAXED);
}

static void observe(mi_prof_sample_fn *on_sample, mi_prof_free_fn *on_free)
{
  seen_count = freed_count = 0;
  if (!mi_prof_set_observer(on_sample, on_free, NULL)) ck_abort_msg("mi_prof_set_observer failed");
}

static unsigned seen_total(void)
{
  unsigned n = __atomic_load_n(&seen_count, __ATOMIC_ACQUIRE);
  ck_assert_uint_le(n, SEEN_MAX);
  return n;
}

/* Runs `fn` on `n` <= 16 fresh threads (argument: the thread's number) and joins them.  Asserts only
 * on failure (it runs inside sessions). */
static void run_threads(unsigned n, void *(*fn)(void *))
{
  pthread_t th[16];
  for (unsigned i = 0; i < n; i++) {
    if (pthread_create(&th[i], NULL, fn, (void *)(uintptr_t)i) != 0) ck_abort_msg("pthread_create failed");
  }
  for (unsigned i = 0; i < n; i++) {
    if (pthread_join(th[i], NULL) != 0) ck_abort_msg("pthread_join failed");
  }
}

/* ---------------------------------------------------------------------------------------------------
   A. Engine basics
--------------------------------------------------------------------------------------------------- */

/* Catalogue A1.  Rate 4096, 1000 live blocks of 512 B: p = 1 - e^(-1/8) = 0.117503.
 * Live records n ~ Binomial(1000, p): E = 117.5, sigma = sqrt(1000 p (1-p)) = 10.18; [60, 190] is
 * E - 5.6 sigma .. E + 7.1 sigma.  Estimated live bytes = n * 512/p = n * 4357.3: the +-40% band
 * [307200, 716800] is n in [70.5, 164.5], E -+ 4.6 sigma. */
START_TEST(sampler_seeded_counts)
{
  start_rate(4096);
  unsigned nulls = 0;
  for (unsigned i = 0; i < 1000; i++) {
    blocks[i] = malloc(512);
    nulls += blocks[i] == NULL;
  }
  size_t records = 0, bytes = 0;
  bool debug_ok = mi_prof_debug_stats(&records, &bytes);
  mi_prof_stats_t st = stats_now();
  errno = 0;
  bool again = mi_prof_start(4096);
  int again_errno = errno;

  ck_assert_uint_eq(nulls, 0);
  ck_assert(debug_ok);
  ck_assert_uint_ge(records, 60);
  ck_assert_uint_le(records, 190);
  ck_assert_uint_eq(bytes, records * 512);
  ck_assert_uint_eq(st.live_samples, records);
  ck_assert_uint_eq(st.sample_rate, 4096);
  ck_assert_uint_ge(st.inuse_bytes, 307200);
  ck_assert_uint_le(st.inuse_bytes, 716800);
  ck_assert(!again);
  ck_assert_int_eq(again_errno, EALREADY);
  ck_assert(mi_prof_is_enabled());        /* the refused start left the session running */
  for (unsigned i = 0; i < 1000; i++) free(blocks[i]);
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   B. Attribution and sampling correctness
--------------------------------------------------------------------------------------------------- */

/* Catalogue B6.  A sample of s bytes weighs s/p(s) >= s, at every rate; the observer also gets the
 * rate in force and exactly that weight (rounded).  Sizes 16 B .. 4 MiB at rates 1 B, 4 KiB, 1 MiB. */
START_TEST(sampler_weight_at_least_size)
{
  static const size_t sizes[] = {16, 24, 100, 512, 1000, 4096, 10000, 65536, 200000,
                                 1 * MiB, 3 * MiB, 4 * MiB};
  static const size_t rates[] = {1, 4096, 1 * MiB};
  for (size_t r = 0; r < sizeof rates / sizeof rates[0]; r++) {
    observe(record_sample, NULL);
    start_rate(rates[r]);
    for (unsigned round = 0; round < 20; round++) {
      for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) free(malloc(sizes[i]));
    }
    mi_prof_stop();
    mi_prof_stats_t st = stats_now();
    unsigned n = seen_total();
    /* Samples expected per round: 12 at 1 B, ~6.4 at 4 KiB, ~2.9 at 1 MiB; 20 rounds give >= 1
     * sample except with probability below e^-50. */
    ck_assert_uint_ge(n, 1);
    ck_assert_uint_eq(st.samples, n);
    for (unsigned i = 0; i < n; i++) {
      const seen_t *s = &seen[i];
      ck_assert_uint_ge(s->weight, s->size);
      ck_assert_uint_eq(s->rate, rates[r]);
      ck_assert_double_eq_tol((double)s->weight, weight_of(s->size, rates[r]), 1.0);
    }
  }
}
END_TEST

/* Catalogue B7.  40 allocations of 4 KiB at rate 16 KiB.  With the fixed seed the outcome is fixed;
 * with a random seed none of them is sampled with probability (1 - p)^40 = e^(-40*4096/16384) = e^-10
 * = 4.5e-5. */
START_TEST(sampler_samples_exist)
{
  start_rate(16 * KiB);
  for (unsigned i = 0; i < 40; i++) free(malloc(4096));
  mi_prof_stats_t st = stats_now();
  ck_assert_uint_ge(st.samples, 1);
  ck_assert_uint_eq(st.live_samples, 0);
}
END_TEST

/* Catalogue B10.  Rate 64 KiB, 20000 rounds of 40 x 64 B + 1 x 1100 B, all live: 73.2 MB requested,
 * of which 64 B blocks are 2560/3660 = 0.69945.
 * 64 B:   p = 9.7609e-4, n64 ~ Binomial(800000, p), E = 780.9, each weighing 65568 B.
 * 1100 B: p = 0.016644,  n11 ~ Binomial(20000, p),  E = 332.9, each weighing 66090 B.
 * Share S = W64 / (W64 + W11): sigma_S ~ S (1-S) sqrt(1/n64 + 1/n11) = 0.2102 * 0.0654 = 0.0138;
 * +-0.06 is 4.3 sigma.  Total: ~1114 samples, sigma_rel ~ 1/sqrt(1114) = 3.0%; +-12% is 4 sigma. */
#define B10_ROUNDS 20000
#define B10_SMALL  40

START_TEST(sampler_small_attribution)
{
  observe(record_sample, NULL);
  start_rate(64 * KiB);
  size_t k = 0;
  unsigned nulls = 0;
  for (unsigned r = 0; r < B10_ROUNDS; r++) {
    for (unsigned i = 0; i < B10_SMALL; i++) blocks[k++] = malloc(64);
    blocks[k++] = malloc(1100);
  }
  for (size_t i = 0; i < k; i++) nulls += blocks[i] == NULL;
  mi_prof_stats_t st = stats_now();
  unsigned n = seen_total();
  double w64 = 0, w1100 = 0, other = 0;
  for (unsigned i = 0; i < n; i++) {
    if (seen[i].size == 64) w64 += (double)seen[i].weight;
    else if (seen[i].size == 1100) w1100 += (double)seen[i].weight;
    else other += (double)seen[i].weight;
  }
  double requested = (double)B10_ROUNDS * (B10_SMALL * 64 + 1100);

  ck_assert_uint_eq(nulls, 0);
  ck_assert_double_eq(other, 0);
  ck_assert_uint_eq(st.samples, n);
  ck_assert_double_eq_tol((double)st.inuse_bytes, w64 + w1100, 0.5);
  ck_assert_double_eq_tol(w64 / (w64 + w1100), 2560.0 / 3660.0, 0.06);
  ck_assert_double_eq_tol((double)st.inuse_bytes / requested, 1.0, 0.12);
  for (size_t i = 0; i < k; i++) free(blocks[i]);
}
END_TEST

/* Catalogue B11.  8 fresh threads x 8 x 1 MiB at 512 KiB: each thread's first allocation draws a full
 * interval, so every allocation is sampled with p = 1 - e^-2 = 0.864665.
 * n ~ Binomial(64, p): E = 55.34, sigma = sqrt(64 p (1-p)) = 2.735; n >= 35 is E - 7.4 sigma.
 * Estimate = n * 1 MiB / p = n * 1.15652 MiB.  The catalogue's -20% (n >= 45) is E - 3.8 sigma, and
 * the binomial's left tail is heavier than the normal's: P(n <= 44) = 2.0e-4.  The lower bound is
 * therefore -23% (n >= 43; P(n <= 42) = 1.9e-5, the one-sided 4 sigma normal tail being 3.2e-5).
 * Upper: the largest possible estimate (n = 64) is 74.02 MiB = +15.7%, so +20% can only fail if a
 * sample is counted with a wrong weight or twice.  Only the workers allocate 1 MiB, so the samples are
 * selected by size (pthread_create's own allocations on the main thread may be sampled too). */
#define B11_THREADS 8
#define B11_BLOCKS  8

static void *b11_worker(void *arg)
{
  void *mine[B11_BLOCKS];
  (void)arg;
  for (unsigned i = 0; i < B11_BLOCKS; i++) mine[i] = malloc(1 * MiB);
  for (unsigned i = 0; i < B11_BLOCKS; i++) free(mine[i]);
  return NULL;
}

START_TEST(sampler_new_threads_sampled_at_once)
{
  observe(record_sample, NULL);
  start_rate(512 * KiB);
  run_threads(B11_THREADS, b11_worker);
  unsigned n = 0, all = seen_total();
  double estimate = 0;
  for (unsigned i = 0; i < all; i++) {
    if (seen[i].size != 1 * MiB) continue;
    n++;
    estimate += (double)seen[i].weight;
  }
  ck_assert_uint_ge(n, 35);
  ck_assert_uint_le(n, B11_THREADS * B11_BLOCKS);
  ck_assert_double_ge(estimate / (double)(64 * MiB), 0.77);
  ck_assert_double_le(estimate / (double)(64 * MiB), 1.20);
}
END_TEST

/* Catalogue B12.  4 fresh threads allocate 32 B each at 512 KiB.  Without a phantom period (a new
 * thread draws a full interval) a 32 B block is sampled with p = 6.1e-5, so none of the 4 is, except
 * with probability 1 - e^(-128/524288) = 2.4e-4 for a random seed (the fixed seed fixes the outcome).
 * A single sample would weigh 512 KiB, far above the 64 KiB bound; a thread that sampled its first
 * allocation (countdown 0 taken for "sample now") would add 512 KiB per thread. */
#define B12_THREADS 4

static __thread bool tl_worker;
static uint64_t worker_weight;    /* estimated bytes of samples taken on worker threads (atomic) */
static unsigned worker_samples;

static void sample_on_worker(void *ptr, size_t size, size_t weight, size_t rate, uint64_t tid, void *arg)
{
  (void)ptr, (void)size, (void)rate, (void)tid, (void)arg;
  if (!tl_worker) return;
  __atomic_fetch_add(&worker_weight, weight, __ATOMIC_RELAXED);
  __atomic_fetch_add(&worker_samples, 1, __ATOMIC_RELAXED);
}

static void *b12_worker(void *arg)
{
  (void)arg;
  tl_worker = true;
  void *p = malloc(32);
  tl_worker = false;
  free(p);
  return p;
}

START_TEST(sampler_no_phantom_period)
{
  observe(sample_on_worker, NULL);
  start_rate(512 * KiB);
  run_threads(B12_THREADS, b12_worker);
  uint64_t weight = __atomic_load_n(&worker_weight, __ATOMIC_ACQUIRE);
  ck_assert_uint_lt(weight, 64 * KiB);
  ck_assert_uint_eq(worker_samples, 0);
}
END_TEST

/* Catalogue B16.  A thread that allocated before the start (so it sits in the stopped state with a
 * countdown of at most MI_PROF_RECHECK_BYTES) does 3000 x aligned_alloc(4096, 128 KiB) after it, at
 * rate 512 KiB: p = 1 - e^(-1/4) = 0.221199.  It notices the start within MI_PROF_RECHECK_BYTES =
 * 8 x 128 KiB of its own allocation, so m in [0, 8] of its first allocations may go unsampled and the
 * count is Binomial(3000 - m, p): E in [2992 p, 3000 p] = [661.8, 663.6], sigma <= sqrt(3000 p (1-p))
 * = 22.73.  Bounds: [661.8 - 4 sigma, 663.6 + 4 sigma] = [570.9, 754.5] -> [571, 754]. */
#define B16_ALLOCS 3000
#define B16_SIZE   (128 * KiB)

static pthread_barrier_t b16_barrier;
static unsigned b16_misaligned, b16_nulls;

static void *b16_worker(void *arg)
{
  (void)arg;
  free(malloc(64));                         /* running before the start */
  pthread_barrier_wait(&b16_barrier);       /* main starts the session */
  pthread_barrier_wait(&b16_barrier);
  for (unsigned i = 0; i < B16_ALLOCS; i++) {
    void *p = aligned_alloc(4096, B16_SIZE);
    b16_nulls += p == NULL;
    b16_misaligned += ((uintptr_t)p & 4095) != 0;
    free(p);
  }
  return NULL;
}

START_TEST(sampler_late_start_running_thread)
{
  pthread_t th;
  observe(record_sample, NULL);
  ck_assert_int_eq(pthread_barrier_init(&b16_barrier, NULL, 2), 0);
  ck_assert_int_eq(pthread_create(&th, NULL, b16_worker, NULL), 0);
  pthread_barrier_wait(&b16_barrier);
  start_rate(512 * KiB);
  pthread_barrier_wait(&b16_barrier);
  ck_assert_int_eq(pthread_join(th, NULL), 0);
  unsigned n = 0, misaligned = 0, all = seen_total();
  for (unsigned i = 0; i < all; i++) {
    if (seen[i].size != B16_SIZE) continue;
    n++;
    misaligned += ((uintptr_t)seen[i].ptr & 4095) != 0;
  }
  ck_assert_uint_eq(b16_nulls, 0);
  ck_assert_uint_eq(b16_misaligned, 0);
  ck_assert_uint_eq(misaligned, 0);
  ck_assert_uint_ge(n, 571);
  ck_assert_uint_le(n, 754);
  pthread_barrier_destroy(&b16_barrier);
}
END_TEST

/* Catalogue B17.  4 threads allocate 4 KiB blocks in a loop; once all are busy, the session starts at
 * R = 256 KiB.  Each thread counts the bytes it allocates after it has seen the session running (read
 * before each allocation, so every counted allocation began after the start) and, in the observer,
 * where its first sample fell.  A thread notices the start within MI_PROF_RECHECK_BYTES of its own
 * allocation, then draws X ~ Exp(R) (rounded up by < 1 byte); the allocation holding the mark ends
 * within X + 4 KiB.  So first <= MI_PROF_RECHECK_BYTES + X + 4 KiB, and X > 20 R only with probability
 * e^-20 per thread: bound MI_PROF_RECHECK_BYTES + 20 R + 4 KiB = 6 MiB + 4 KiB.
 * Each thread allocates 16 MiB after the start, more than that bound, so it gets samples.  Total
 * samples: at most 256 allocations per thread fall before it notices, so n ~ Binomial(4 x (4096 - m),
 * p = 1 - e^(-1/64) = 0.015504): E in [238.1, 254.0], sigma <= sqrt(16384 p (1-p)) = 15.8; bounds
 * [238.1 - 4 sigma, 254.0 + 4 sigma] = [174.9, 317.2] -> [175, 317]. */
#define B17_THREADS 4
#define B17_SIZE    (4 * KiB)
#define B17_AFTER   ((uint64_t)16 * MiB)
#define B17_RATE    (256 * KiB)
#define B17_WARM    1000

static unsigned b17_warm[B17_THREADS];          /* allocations so far, capped at B17_WARM (atomic) */
static uint64_t b17_samples[B17_THREADS], b17_first[B17_THREADS];
static __thread uint64_t tl_after;              /* bytes allocated after this thread saw the start */
static __thread uint64_t tl_first;              /* tl_after at the end of the first sample; 0 = none */
static __thread uint64_t tl_samples;

static void sample_first(void *ptr, size_t size, size_t weight, size_t rate, uint64_t tid, void *arg)
{
  (void)ptr, (void)weight, (void)rate, (void)tid, (void)arg;
  tl_samples++;
  if (tl_first == 0) tl_first = tl_after + size;
}

static void *b17_worker(void *arg)
{
  unsigned t = (unsigned)(uintptr_t)arg;
  bool on = false;
  while (tl_after < B17_AFTER) {
    if (!on) on = mi_prof_is_enabled();
    void *p = malloc(B17_SIZE);
    if (on) tl_after += B17_SIZE;
    if (b17_warm[t] < B17_WARM) __atomic_fetch_add(&b17_warm[t], 1, __ATOMIC_RELEASE);
    free(p);
  }
  b17_samples[t] = tl_samples;
  b17_first[t] = tl_first;
  return NULL;
}

static bool b17_all_warm(void)
{
  for (unsigned t = 0; t < B17_THREADS; t++) {
    if (__atomic_load_n(&b17_warm[t], __ATOMIC_ACQUIRE) < B17_WARM) return false;
  }
  return true;
}

START_TEST(sampler_start_with_running_threads)
{
  pthread_t th[B17_THREADS];
  observe(sample_first, NULL);
  for (unsigned t = 0; t < B17_THREADS; t++)
    ck_assert_int_eq(pthread_create(&th[t], NULL, b17_worker, (void *)(uintptr_t)t), 0);
  while (!b17_all_warm()) sched_yield();
  start_rate(B17_RATE);
  for (unsigned t = 0; t < B17_THREADS; t++) ck_assert_int_eq(pthread_join(th[t], NULL), 0);
  uint64_t total = 0;
  for (unsigned t = 0; t < B17_THREADS; t++) {
    ck_assert_uint_ge(b17_samples[t], 1);
    ck_assert_uint_ge(b17_first[t], 1);
    ck_assert_uint_le(b17_first[t], MI_PROF_RECHECK_BYTES + 20 * (uint64_t)B17_RATE + B17_SIZE);
    total += b17_samples[t];
  }
  ck_assert_uint_ge(total, 175);
  ck_assert_uint_le(total, 317);
}
END_TEST

/* Catalogue B18.  A session at 256 MiB, then a restart at R = 64 KiB and 32768 x 1 KiB: p = 1 -
 * e^(-1/64) = 0.015504, n ~ Binomial(32768, p), E = 508.0; the estimate n * 1024/p has sigma_rel =
 * sqrt((1-p) / (32768 p)) = 4.40%, so +-18% is 4.1 sigma.
 * Nothing of the first session may leak into the second: the main thread's long interval drawn at
 * 256 MiB is dropped (the estimate would collapse otherwise), every sample carries the new rate and
 * its weight, and a block sampled in the first session and freed during the second is neither
 * reported to on_free nor subtracted from the second session's counts.  To have such a block, the
 * first session allocates 4096 x 1 MiB and keeps its first sampled block: none is sampled only with
 * probability e^(-4096 MiB / 256 MiB) = e^-16. */
#define B18_OLD_RATE (256 * MiB)
#define B18_RATE     (64 * KiB)
#define B18_ALLOCS   32768
#define B18_SIZE     (1 * KiB)

static void *b18_last_sampled;

static void sample_last(void *ptr, size_t size, size_t weight, size_t rate, uint64_t tid, void *arg)
{
  (void)size, (void)weight, (void)rate, (void)tid, (void)arg;
  b18_last_sampled = ptr;
}

START_TEST(sampler_restart_new_rate)
{
  void *old = NULL;
  observe(sample_last, NULL);
  start_rate(B18_OLD_RATE);
  for (unsigned i = 0; i < 4096; i++) {
    void *p = malloc(1 * MiB);
    if (old == NULL && p == b18_last_sampled) old = p;
    else free(p);
  }
  mi_prof_stop();
  mi_prof_stats_t first = stats_now();

  observe(record_sample, record_free);
  start_rate(B18_RATE);
  free(old);
  for (unsigned i = 0; i < B18_ALLOCS; i++) free(malloc(B18_SIZE));
  mi_prof_stats_t st = stats_now();
  unsigned n = seen_total();

  ck_assert_ptr_nonnull(old);
  ck_assert_uint_ge(first.samples, 1);
  ck_assert_uint_eq(st.samples, n);
  ck_assert_uint_eq(freed_count, n);            /* the new session's blocks, not the old one */
  ck_assert_uint_eq(st.live_samples, 0);
  ck_assert_uint_eq(st.inuse_bytes, 0);
  ck_assert_uint_eq(st.inuse_objects, 0);
  ck_assert_uint_eq(st.untracked_frees, 0);
  double sum = 0;
  for (unsigned i = 0; i < n; i++) {
    ck_assert_uint_eq(seen[i].rate, B18_RATE);
    ck_assert_uint_eq(seen[i].size, B18_SIZE);
    ck_assert_double_eq_tol((double)seen[i].weight, weight_of(B18_SIZE, B18_RATE), 1.0);
    sum += (double)seen[i].weight;
  }
  ck_assert_double_eq_tol((double)st.alloc_bytes, sum, 0.5);
  ck_assert_double_eq_tol((double)st.alloc_bytes / (double)(B18_ALLOCS * B18_SIZE), 1.0, 0.18);
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   C22 and the interval distribution
--------------------------------------------------------------------------------------------------- */

/* Catalogue C22 (the dump is tested elsewhere).  At rate 1 a 64 B allocation is sampled with p =
 * 1 - e^-64, which is 1.0 in double precision (e^-64 = 1.6e-28 is below half an ulp of 1), and every
 * drawn interval is at most 38 bytes: all 500 are sampled, each standing for exactly 1 object of 64 B. */
START_TEST(sampler_rate_one)
{
  start_rate(1);
  for (unsigned i = 0; i < 500; i++) blocks[i] = malloc(64);
  size_t records = 0, bytes = 0;
  mi_prof_debug_stats(&records, &bytes);
  mi_prof_stats_t live = stats_now();
  for (unsigned i = 0; i < 500; i++) free(blocks[i]);
  size_t records_after = 1, bytes_after = 1;
  mi_prof_debug_stats(&records_after, &bytes_after);
  mi_prof_stats_t done = stats_now();

  ck_assert_uint_eq(records, 500);
  ck_assert_uint_eq(bytes, 500 * 64);
  ck_assert_uint_eq(live.samples, 500);
  ck_assert_uint_eq(live.live_samples, 500);
  ck_assert_uint_eq(live.inuse_objects, 500);
  ck_assert_uint_eq(live.inuse_bytes, 32000);
  ck_assert_uint_eq(live.alloc_objects, 500);
  ck_assert_uint_eq(live.alloc_bytes, 32000);
  ck_assert_uint_eq(records_after, 0);
  ck_assert_uint_eq(bytes_after, 0);
  ck_assert_uint_eq(done.live_samples, 0);
  ck_assert_uint_eq(done.inuse_objects, 0);
  ck_assert_uint_eq(done.inuse_bytes, 0);
  ck_assert_uint_eq(done.samples, 500);
  ck_assert_uint_eq(done.alloc_objects, 500);
  ck_assert_uint_eq(done.alloc_bytes, 32000);
}
END_TEST

/* The intervals themselves.  N = 200000 allocations of 1 KiB at R = 8 KiB: each is sampled
 * independently with p = 1 - e^(-1/8) = 0.117503 (the next interval is drawn from the end of a sampled
 * allocation, and Exp is memoryless).
 * Count: n ~ Binomial(N, p), E = 23500.6, sigma = sqrt(N p (1-p)) = 144.0; allowed 4 sigma = 576.
 * Shape: the gaps between samples, in allocations, are Geometric(p): P(G > k) = (1-p)^k = e^(-k/8).
 * For k = 8, 16, 32 the number of the n gaps above k is Binomial(n, q = e^-1, e^-2, e^-4); allowed
 * 4 sqrt(n q (1-q)) around n q (about 296, 205, 118).  A fixed interval (every 8th allocation) or a
 * uniform one would miss these by thousands. */
#define DIST_ALLOCS 200000
#define DIST_RATE   (8 * KiB)
#define DIST_SIZE   (1 * KiB)

static void check_gap_tail(const uint64_t *gaps, unsigned n, unsigned k)
{
  double q = exp(-(double)k * DIST_SIZE / DIST_RATE);
  unsigned above = 0;
  for (unsigned i = 0; i < n; i++) above += gaps[i] > k;
  double sigma = sqrt(n * q * (1 - q));
  ck_assert_msg(fabs(above - n * q) <= 4 * sigma, "gaps > %u: %u, expected %.1f +- %.1f", k, above,
                n * q, 4 * sigma);
}

START_TEST(sampler_interval_distribution)
{
  static uint64_t gaps[SEEN_MAX];
  observe(record_sample, NULL);
  start_rate(DIST_RATE);
  for (unsigned i = 0; i < DIST_ALLOCS; i++) {
    alloc_index = i;
    free(malloc(DIST_SIZE));
  }
  mi_prof_stop();
  unsigned n = seen_total();
  double p = prob_of(DIST_SIZE, DIST_RATE);
  double sigma = sqrt(DIST_ALLOCS * p * (1 - p));
  ck_assert_double_eq_tol((double)n, DIST_ALLOCS * p, 4 * sigma);
  uint64_t prev = (uint64_t)-1;              /* the first gap counts from the start */
  for (unsigned i = 0; i < n; i++) {
    gaps[i] = seen[i].index - prev;
    prev = seen[i].index;
  }
  check_gap_tail(gaps, n, 8);
  check_gap_tail(gaps, n, 16);
  check_gap_tail(gaps, n, 32);
}
END_TEST

/* Unbiased estimates for a mixed size distribution: 200000 allocations, sizes log-uniform in
 * [16, 65536] (the test's own generator, fixed), at R = 64 KiB.  The estimate of allocated bytes,
 * sum over samples of s/p(s), has mean sum(s) and variance sum(s^2 (1-p)/p) over all allocations;
 * objects likewise with sum((1-p)/p).  Both sigmas are computed below from the actual sizes (about
 * 1.57e9 bytes, sigma_rel ~ 0.57%; E[samples] ~ 19000) and 4 sigma is allowed, plus the rounding of
 * each weight (<= 0.5 byte, 0.5/1024 object per sample). */
#define MIX_ALLOCS 200000
#define MIX_RATE   (64 * KiB)

static uint64_t mix_next(uint64_t *x)
{
  *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
  return *x;
}

START_TEST(sampler_mixed_sizes_unbiased)
{
  uint64_t x = 0x243f6a8885a308d3ull;
  double bytes = 0, var_bytes = 0, var_objects = 0;
  start_rate(MIX_RATE);
  for (unsigned i = 0; i < MIX_ALLOCS; i++) {
    double u = (double)(mix_next(&x) >> 11) * 0x1.0p-53;
    size_t size = (size_t)(16.0 * exp2(12.0 * u));   /* 16 * 4096^u */
    free(malloc(size));
    double p = prob_of(size, MIX_RATE);
    bytes += (double)size;
    var_bytes += (double)size * (double)size * (1 - p) / p;
    var_objects += (1 - p) / p;
  }
  mi_prof_stats_t st = stats_now();
  double sd_bytes = sqrt(var_bytes), sd_objects = sqrt(var_objects);
  ck_assert_uint_gt(st.samples, 0);
  ck_assert_double_eq_tol((double)st.alloc_bytes, bytes, 4 * sd_bytes + 0.5 * (double)st.samples);
  ck_assert_double_eq_tol((double)st.alloc_objects, MIX_ALLOCS, 4 * sd_objects + 1);
  ck_assert_uint_eq(st.live_samples, 0);
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   The reentrancy guard
--------------------------------------------------------------------------------------------------- */

/* Allocations inside an observer callback are never sampled, and they do not disturb the sampling of
 * the program's own allocations (sampler.c: "its bytes are given back to the countdown").  Two seeded
 * sessions with the same seed on the same thread draw the same intervals, so they must sample exactly
 * the same allocations whether or not the callback allocates.  Here the callback allocates and frees
 * 1 MiB blocks; the program does 20000 x 1 KiB at 64 KiB (E = 310 samples). */
#define GUARD_ALLOCS 20000
#define GUARD_RATE   (64 * KiB)

static size_t guard_alloc_size;   /* bytes the callback allocates (twice) per sample; 0 = none */
static unsigned guard_nulls;

static void sample_and_allocate(void *ptr, size_t size, size_t weight, size_t rate, uint64_t tid, void *arg)
{
  record_sample(ptr, size, weight, rate, tid, arg);
  for (unsigned i = 0; i < 2 && guard_alloc_size != 0; i++) {
    void *p = malloc(guard_alloc_size);
    guard_nulls += p == NULL;
    free(p);
  }
}

/* Runs one seeded session and copies the allocation indices that were sampled into idx. */
static unsigned guard_run(size_t callback_bytes, uint64_t *idx, mi_prof_stats_t *st)
{
  guard_alloc_size = callback_bytes;
  observe(sample_and_allocate, NULL);
  start_rate(GUARD_RATE);
  for (unsigned i = 0; i < GUARD_ALLOCS; i++) {
    alloc_index = i;
    free(malloc(1 * KiB));
  }
  mi_prof_stop();
  *st = stats_now();
  unsigned n = seen_total();
  for (unsigned i = 0; i < n; i++) {
    ck_assert_uint_eq(seen[i].size, 1 * KiB);    /* nothing the callback allocated was sampled */
    idx[i] = seen[i].index;
  }
  return n;
}

static void guard_compare(size_t callback_bytes)
{
  static uint64_t base[SEEN_MAX], with[SEEN_MAX];
  mi_prof_stats_t st_base, st_with;
  unsigned n_base = guard_run(0, base, &st_base);
  unsigned n_with = guard_run(callback_bytes, with, &st_with);
  ck_assert_uint_eq(guard_nulls, 0);
  ck_assert_uint_gt(n_base, 0);
  ck_assert_uint_eq(st_base.samples, n_base);
  ck_assert_uint_eq(st_with.samples, n_with);
  ck_assert_uint_eq(n_with, n_base);
  for (unsigned i = 0; i < n_base; i++)
    ck_assert_msg(with[i] == base[i], "sample %u: allocation %llu with an allocating callback, %llu without",
                  i, (unsigned long long)with[i], (unsigned long long)base[i]);
}

START_TEST(sampler_guard_keeps_countdown)
{
  guard_compare(1 * MiB);
}
END_TEST

/* The same with a callback that allocates small blocks (64 B, as an observer appending to a list
 * would): they must not be sampled and must not shorten the program's intervals either. */
START_TEST(sampler_guard_small_allocs_keep_countdown)
{
  guard_compare(64);
}
END_TEST

Suite *sampler_suite(void)
{
  Suite *s = suite_create("sampler");
  TCase *tc = tcase_create("sampler");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, sampler_seeded_counts);
  tcase_add_test(tc, sampler_weight_at_least_size);
  tcase_add_test(tc, sampler_samples_exist);
  tcase_add_test(tc, sampler_small_attribution);
  tcase_add_test(tc, sampler_new_threads_sampled_at_once);
  tcase_add_test(tc, sampler_no_phantom_period);
  tcase_add_test(tc, sampler_late_start_running_thread);
  tcase_add_test(tc, sampler_start_with_running_threads);
  tcase_add_test(tc, sampler_restart_new_rate);
  tcase_add_test(tc, sampler_rate_one);
  tcase_add_test(tc, sampler_interval_distribution);
  tcase_add_test(tc, sampler_mixed_sizes_unbiased);
  tcase_add_test(tc, sampler_guard_keeps_countdown);
  tcase_add_test(tc, sampler_guard_small_allocs_keep_countdown);
  suite_add_tcase(s, tc);
  return s;
}

#endif
