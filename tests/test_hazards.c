/* test_hazards.c - sampling where allocators usually break: many threads, thread-exit destructors that
 * allocate, fork while other threads sample, mi_collect(true) during sampling, huge or over-aligned
 * requests, signal handlers that free sampled blocks, and a process whose malloc is not ours.  Each test starts its own seeded session and checks the books balance afterwards (every
 * sampled block freed is reported freed; no live record is left behind).
 */
#include <limits.h>
#include <malloc.h>
#include <mimalloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mimalloc-prof.h"
#include "subprocess.h"
#include "suites.h"

#if MPROF_PPROF == 1

/* ---------------------------------------------------------------------------------------------------
   A counting observer shared by the tests
--------------------------------------------------------------------------------------------------- */

static unsigned long obs_samples, obs_frees;    /* atomics */
static uintptr_t obs_min = UINTPTR_MAX, obs_max; /* lowest and highest sampled address (atomics) */
/* Per thread.  volatile: the callback changes them inside malloc, and GCC assumes a function declared
 * with __attribute__((malloc)) (as glibc declares malloc, even under -fno-builtin) neither reads nor
 * writes the caller's variables, so it would drop "mark = 1; malloc(); mark = 0" to the last store. */
static __thread volatile int obs_mark;          /* set by a thread whose samples should be noted */
static __thread volatile unsigned long obs_marked; /* its samples while marked */
static __thread void *volatile obs_last_ptr;    /* its last sample */
static __thread volatile size_t obs_last_size;

static void count_sample(void *ptr, size_t size, size_t weight, size_t rate, uint64_t tid, void *arg)
{
  (void)weight, (void)rate, (void)tid, (void)arg;
  __atomic_add_fetch(&obs_samples, 1, __ATOMIC_RELAXED);
  uintptr_t a = (uintptr_t)ptr, cur = __atomic_load_n(&obs_min, __ATOMIC_RELAXED);
  while (a < cur && !__atomic_compare_exchange_n(&obs_min, &cur, a, true, __ATOMIC_RELAXED,
                                                 __ATOMIC_RELAXED)) {
  }
  cur = __atomic_load_n(&obs_max, __ATOMIC_RELAXED);
  while (a > cur && !__atomic_compare_exchange_n(&obs_max, &cur, a, true, __ATOMIC_RELAXED,
                                                 __ATOMIC_RELAXED)) {
  }
  if (obs_mark) obs_marked++;
  obs_last_ptr = ptr;
  obs_last_size = size;
}

static void count_free(void *ptr, size_t size, void *arg)
{
  (void)ptr, (void)size, (void)arg;
  __atomic_add_fetch(&obs_frees, 1, __ATOMIC_RELAXED);
}

static unsigned long samples_seen(void) { return __atomic_load_n(&obs_samples, __ATOMIC_RELAXED); }
static unsigned long frees_seen(void) { return __atomic_load_n(&obs_frees, __ATOMIC_RELAXED); }

static void start_counting(size_t rate, uint64_t seed)
{
  ck_assert(mi_prof_set_observer(count_sample, count_free, NULL));
  ck_assert(mi_prof_start_seeded(rate, seed));
}

static size_t live_records(void)
{
  size_t live = SIZE_MAX;
  ck_assert(mi_prof_debug_stats(&live, NULL));
  return live;
}

static mi_prof_stats_t stats_now(void)
{
  mi_prof_stats_t st;
  ck_assert(mi_prof_stats(&st, sizeof st));
  return st;
}

static uint64_t next_rand(uint64_t *x)
{
  *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
  return *x;
}

/* ---------------------------------------------------------------------------------------------------
   A5: 4 threads x 100k
--------------------------------------------------------------------------------------------------- */

#define T4_THREADS 4
#define T4_ROUNDS  100000
#define T4_KEEP    64

static unsigned char *t4_ring[T4_THREADS][T4_KEEP];
static unsigned long t4_bad[T4_THREADS];
static pthread_barrier_t t4_go;

/* Replaces a random block of its ring each round; the ring outlives the thread (main frees it). */
static void *t4_worker(void *arg)
{
  unsigned t = (unsigned)(uintptr_t)arg;
  uint64_t x = 0x9e3779b97f4a7c15ull * (t + 1);
  pthread_barrier_wait(&t4_go);
  for (unsigned r = 0; r < T4_ROUNDS; r++) {
    size_t size = 16 + (size_t)(next_rand(&x) % 1024);
    unsigned i = (unsigned)(x >> 40) % T4_KEEP;
    if (t4_ring[t][i] != NULL && t4_ring[t][i][0] != (unsigned char)i) t4_bad[t]++;
    free(t4_ring[t][i]);
    t4_ring[t][i] = malloc(size);
    t4_ring[t][i][0] = (unsigned char)i;
  }
  return NULL;
}

START_TEST(hazards_threads_4x100k)
{
  /* The threads exist before the session, so nothing pthread_create allocates (the DTV) is sampled;
   * they allocate only after it started. */
  pthread_t th[T4_THREADS];
  ck_assert_int_eq(pthread_barrier_init(&t4_go, NULL, T4_THREADS + 1), 0);
  for (unsigned t = 0; t < T4_THREADS; t++)
    ck_assert_int_eq(pthread_create(&th[t], NULL, t4_worker, (void *)(uintptr_t)t), 0);
  start_counting(4096, 0xa5a5);
  size_t live0 = live_records();
  pthread_barrier_wait(&t4_go);
  for (unsigned t = 0; t < T4_THREADS; t++) ck_assert_int_eq(pthread_join(th[t], NULL), 0);
  for (unsigned t = 0; t < T4_THREADS; t++) {
    ck_assert_uint_eq(t4_bad[t], 0);
    for (unsigned i = 0; i < T4_KEEP; i++) free(t4_ring[t][i]);
  }
  ck_assert_uint_eq(live0, 0);
  ck_assert_uint_eq(live_records(), 0);
  /* 400k allocations of 16..1039 B at 4096: E[samples] ~ 400000 * (1 - e^(-527/4096)) ~ 48000; the
   * floor only asserts the threads were sampled at all (> 100 sigma below E). */
  mi_prof_stats_t st;
  bool ok = mi_prof_stats(&st, sizeof st);
  unsigned long seen = samples_seen();   /* read before any ck_assert: each one allocates */
  ck_assert(ok);
  ck_assert_uint_gt(st.samples, 10000);
  ck_assert_uint_eq(st.live_samples, 0);
  ck_assert_uint_eq(st.inuse_bytes, 0);
  ck_assert_uint_eq(seen, st.samples);
  ck_assert_uint_eq(frees_seen(), samples_seen());
  ck_assert(mi_prof_stop());
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   E34: thread-exit destructors that allocate
--------------------------------------------------------------------------------------------------- */

#define TSD_THREADS 8
#define TSD_ROUNDS  3          /* each destructor re-arms its key until this round (glibc runs up to 4) */
#define TSD_HANDOFF (TSD_THREADS * 2 * TSD_ROUNDS)

static pthread_key_t key_before, key_after;
static void *tsd_handoff[TSD_HANDOFF];
static unsigned tsd_handed;                   /* atomic */
static unsigned long tsd_dtor_samples;         /* atomic: samples taken inside destructors */
static pthread_barrier_t tsd_go;

/* Allocates and frees a spread of sizes, then hands one grown block to the main thread. */
static void tsd_churn(pthread_key_t key, void *value)
{
  uintptr_t round = (uintptr_t)value;
  unsigned long before = obs_marked;
  obs_mark = 1;
  for (unsigned i = 0; i < 24; i++) {
    unsigned char *p = malloc((size_t)8 << (i % 14));
    p[0] = (unsigned char)i;
    free(p);
  }
  void *q = calloc(1, 100);
  q = realloc(q, 5000);
  unsigned slot = __atomic_fetch_add(&tsd_handed, 1, __ATOMIC_RELAXED);
  if (slot < TSD_HANDOFF) tsd_handoff[slot] = q;
  else free(q);
  obs_mark = 0;
  __atomic_add_fetch(&tsd_dtor_samples, obs_marked - before, __ATOMIC_RELAXED);
  if (round < TSD_ROUNDS) pthread_setspecific(key, (void *)(round + 1));
}

static void dtor_before(void *value) { tsd_churn(key_before, value); }
static void dtor_after(void *value) { tsd_churn(key_after, value); }

static void *tsd_worker(void *arg)
{
  (void)arg;
  pthread_barrier_wait(&tsd_go);
  pthread_setspecific(key_before, (void *)1);
  pthread_setspecific(key_after, (void *)1);
  free(malloc(100));
  return NULL;
}

START_TEST(hazards_tsd_destructor_allocates)
{
  pthread_t th[TSD_THREADS];
  ck_assert_int_eq(pthread_key_create(&key_before, dtor_before), 0);
  ck_assert_int_eq(pthread_barrier_init(&tsd_go, NULL, TSD_THREADS + 1), 0);
  for (unsigned t = 0; t < TSD_THREADS; t++)     /* before the session: see hazards_threads_4x100k */
    ck_assert_int_eq(pthread_create(&th[t], NULL, tsd_worker, NULL), 0);
  start_counting(1, 0x34);
  ck_assert_int_eq(pthread_key_create(&key_after, dtor_after), 0);
  pthread_barrier_wait(&tsd_go);
  for (unsigned t = 0; t < TSD_THREADS; t++) ck_assert_int_eq(pthread_join(th[t], NULL), 0);
  unsigned handed = __atomic_load_n(&tsd_handed, __ATOMIC_RELAXED);
  ck_assert_uint_eq(handed, TSD_HANDOFF);         /* every destructor ran every round */
  for (unsigned i = 0; i < TSD_HANDOFF; i++) free(tsd_handoff[i]);
  /* Rate 1: each destructor's 26 allocations of >= 8 B are all sampled (an interval exceeds 8 B with
   * probability e^-8 ~ 3e-4), so 48 destructor calls give about 1250 samples; > 0 is the claim. */
  ck_assert_uint_gt(__atomic_load_n(&tsd_dtor_samples, __ATOMIC_RELAXED), 0);
  ck_assert_uint_eq(live_records(), 0);
  ck_assert_uint_eq(frees_seen(), samples_seen());
  ck_assert(mi_prof_stop());
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   E35: fork while two threads sample
--------------------------------------------------------------------------------------------------- */

/* At most FORKS children; past FORKS_MIN, no new one once FORK_BUDGET_S seconds went by.  A fork with two
 * threads sampling costs ~1 ms natively but about a second under qemu-user, where 300 of them ran past the
 * test's timeout: the clock bounds the work only, nothing is asserted about time. */
#define FORKS         300
#define FORKS_MIN     20
#define FORK_BUDGET_S 30
#define PRE_COUNT     100

static int fork_stop;                    /* atomic: tells the workers to finish */
static void *pre[PRE_COUNT];             /* blocks the main thread allocated before the forks */

static pthread_barrier_t fork_go;

static void *fork_worker(void *arg)
{
  uint64_t x = 0x35ull + (uintptr_t)arg;
  void *ring[32] = {0};
  pthread_barrier_wait(&fork_go);
  while (!__atomic_load_n(&fork_stop, __ATOMIC_RELAXED)) {
    unsigned i = (unsigned)(next_rand(&x) % 32);
    free(ring[i]);
    ring[i] = malloc(16 + (size_t)(x >> 48) % 2000);
  }
  for (unsigned i = 0; i < 32; i++) free(ring[i]);
  return NULL;
}

/* Allocates, fills, checks and frees `count` blocks: false if a block is missing or changed. */
static bool churn_ok(size_t count, size_t size)
{
  unsigned char *p[256];
  for (size_t done = 0; done < count; done += 256) {
    size_t n = count - done < 256 ? count - done : 256;
    for (size_t i = 0; i < n; i++) {
      if ((p[i] = malloc(size)) == NULL) return false;
      memset(p[i], (int)i, size);
    }
    for (size_t i = 0; i < n; i++) {
      if (p[i][0] != (unsigned char)i || p[i][size - 1] != (unsigned char)i) return false;
      free(p[i]);
    }
  }
  return true;
}

/* The child: only the forking thread exists.  Returns its exit status (0, or the step that failed). */
static int fork_child(unsigned i, unsigned long pre_sampled)
{
  size_t live0, live1;
  if (!mi_prof_debug_stats(&live0, NULL)) return 10;
  for (unsigned k = 0; k < PRE_COUNT; k++) free(pre[k]);   /* sampled in the parent: records inherited */
  if (!mi_prof_debug_stats(&live1, NULL) || live0 - live1 != pre_sampled) return 11;
  if (!churn_ok(1000, 256)) return 12;
  mi_prof_stats_t st;
  if (!mi_prof_stats(&st, sizeof st) || st.sample_rate != 4096) return 13;
  if (!mi_prof_stop() || mi_prof_is_enabled()) return 14;
  if (!mi_prof_start_seeded(1024, i + 1)) return 15;
  /* 200 x 1 KiB at 1024: E[samples] = 200 * (1 - e^-1) ~ 126; P(none) = e^-200. */
  void *q[200];
  for (unsigned k = 0; k < 200; k++) q[k] = malloc(1024);
  if (!mi_prof_stats(&st, sizeof st) || st.samples == 0) return 16;
  for (unsigned k = 0; k < 200; k++) free(q[k]);
  if (!mi_prof_debug_stats(&live1, NULL) || live1 != 0) return 17;
  return 0;
}

/* The fork handlers are registered by the first API call (lib/api.c): a process forked before any call
 * has a profiler no lock of which was ever taken, and child and parent each start, sample and stop.
 * Rate 1: every allocation is sampled, so each sees exactly its own 64 samples. */
static int fork_first_session(void)
{
  if (!mi_prof_start(1)) return 10;
  void *volatile p[64];
  for (int k = 0; k < 64; k++) p[k] = malloc(4096);
  mi_prof_stats_t st = stats_now();
  for (int k = 0; k < 64; k++) free(p[k]);
  if (!mi_prof_stop()) return 11;
  return st.samples == 64 ? 0 : 12;
}

START_TEST(hazards_fork_before_any_call)
{
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) _exit(fork_first_session());
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);
  ck_assert_int_eq(fork_first_session(), 0);
}
END_TEST

START_TEST(hazards_fork_while_sampling)
{
  /* The workers exist before the session (see hazards_threads_4x100k) and start allocating after it. */
  pthread_t th[2];
  ck_assert_int_eq(pthread_barrier_init(&fork_go, NULL, 3), 0);
  for (unsigned t = 0; t < 2; t++)
    ck_assert_int_eq(pthread_create(&th[t], NULL, fork_worker, (void *)(uintptr_t)t), 0);
  start_counting(4096, 0x35);
  /* 100 x 4 KiB on the main thread, marked: obs_marked counts exactly those sampled
   * (E = 100 * (1 - e^-1) ~ 63). */
  obs_mark = 1;
  for (unsigned k = 0; k < PRE_COUNT; k++) pre[k] = malloc(4096);
  obs_mark = 0;
  unsigned long pre_sampled = obs_marked;
  ck_assert_uint_gt(pre_sampled, 0);
  pthread_barrier_wait(&fork_go);
  uint64_t samples_before = stats_now().samples;
  int first_failure = 0;
  unsigned failures = 0, forks = 0;
  struct timespec t0, now;
  ck_assert_int_eq(clock_gettime(CLOCK_MONOTONIC, &t0), 0);
  for (unsigned i = 0; i < FORKS; i++, forks++) {
    if (i >= FORKS_MIN && clock_gettime(CLOCK_MONOTONIC, &now) == 0 && now.tv_sec - t0.tv_sec >= FORK_BUDGET_S)
      break;
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) _exit(fork_child(i, pre_sampled));
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      if (failures++ == 0) first_failure = status;
    }
  }
  ck_assert_msg(failures == 0, "%u of %u children failed; first status %#x", failures, forks, first_failure);
  if (forks < FORKS) fprintf(stderr, "hazards_fork_while_sampling: %u forks in %d s\n", forks, FORK_BUDGET_S);
  /* The parent keeps sampling: 1 MiB in 4 KiB blocks on the main thread, E[samples] = 256 * (1 - e^-1)
   * ~ 162; P(none) = e^-256. */
  unsigned long marked0 = obs_marked;
  obs_mark = 1;
  ck_assert(churn_ok(256, 4096));
  obs_mark = 0;
  ck_assert_uint_gt(obs_marked, marked0);
  __atomic_store_n(&fork_stop, 1, __ATOMIC_RELAXED);
  for (unsigned t = 0; t < 2; t++) ck_assert_int_eq(pthread_join(th[t], NULL), 0);
  ck_assert_uint_gt(stats_now().samples, samples_before);
  for (unsigned k = 0; k < PRE_COUNT; k++) free(pre[k]);
  ck_assert_uint_eq(live_records(), 0);
  ck_assert_uint_eq(frees_seen(), samples_seen());
  ck_assert(mi_prof_stop());
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   E36: mi_collect(true) during sampling
--------------------------------------------------------------------------------------------------- */

#define COLLECT_ROUNDS 10
#define COLLECT_BLOCKS 2000

static void *collect_handoff[COLLECT_BLOCKS];

/* A short-lived thread: its blocks outlive it, so its mimalloc segments are abandoned when it exits
 * and mi_collect(true) on the main thread reclaims them. */
static void *collect_worker(void *arg)
{
  uint64_t x = 0x36 + (uintptr_t)arg;
  for (unsigned i = 0; i < COLLECT_BLOCKS; i++)
    collect_handoff[i] = malloc(16 + (size_t)(next_rand(&x) % 20000));
  return NULL;
}

static size_t collect_size(uint64_t *x)
{
  uint64_t r = next_rand(x);
  if (r % 100 == 0) return ((size_t)1 << 20) + (size_t)(r >> 40) % ((size_t)4 << 20);   /* 1..5 MiB */
  return 16 + (size_t)(r >> 32) % 65536;
}

/* One round: main-thread blocks and a dead thread's blocks, freed in two halves around mi_collect(true). */
static void collect_round(unsigned round)
{
  static void *p[COLLECT_BLOCKS];
  uint64_t x = 0x3636 + round;
  pthread_t th;
  ck_assert_int_eq(pthread_create(&th, NULL, collect_worker, (void *)(uintptr_t)round), 0);
  ck_assert_int_eq(pthread_join(th, NULL), 0);
  for (unsigned i = 0; i < COLLECT_BLOCKS; i++) ck_assert_ptr_nonnull(p[i] = malloc(collect_size(&x)));
  for (unsigned i = 0; i < COLLECT_BLOCKS; i += 2) free(p[i]), free(collect_handoff[i]);
  mi_collect(true);
  for (unsigned i = 1; i < COLLECT_BLOCKS; i += 2) free(p[i]), free(collect_handoff[i]);
  mi_collect(true);
}

/* All sampled blocks lie in one arena of `arena` bytes, so the arena lies within
 * (highest sample - arena, lowest sample + arena): a block outside that window is certainly not in it. */
static bool outside_arena_window(const void *p, size_t arena)
{
  uintptr_t a = (uintptr_t)p, lo = __atomic_load_n(&obs_max, __ATOMIC_RELAXED) - arena,
            hi = __atomic_load_n(&obs_min, __ATOMIC_RELAXED) + arena;
  return a <= lo || a >= hi;
}

START_TEST(hazards_mi_collect_true)
{
  /* One thread before the session: glibc caches its stack with its DTV, and the workers below reuse
   * them, so pthread_create allocates nothing that could be sampled and stay live in the cache. */
  pthread_t th;
  ck_assert_int_eq(pthread_create(&th, NULL, collect_worker, (void *)(uintptr_t)99), 0);
  ck_assert_int_eq(pthread_join(th, NULL), 0);
  for (unsigned i = 0; i < COLLECT_BLOCKS; i++) free(collect_handoff[i]);
  start_counting(512, 0x36);
  for (unsigned round = 0; round < COLLECT_ROUNDS; round++) collect_round(round);
  /* Books balance: every sampled block freed was reported once, and none is left. */
  ck_assert_uint_gt(samples_seen(), 0);
  ck_assert_uint_eq(frees_seen(), samples_seen());
  ck_assert_uint_eq(live_records(), 0);
  size_t arena = (size_t)stats_now().arena_bytes;
  ck_assert_uint_gt(arena, 0);

  /* Stopped: nothing is sampled, and after all that reclaiming and collecting no ordinary block comes
   * from the sampled arena.  Freed after a restart, none of them is reported to the observer. */
  ck_assert(mi_prof_stop());
  static void *q[10000];
  uint64_t x = 0x3600;
  for (unsigned i = 0; i < 10000; i++) {
    ck_assert_ptr_nonnull(q[i] = malloc(collect_size(&x)));
    ck_assert_msg(outside_arena_window(q[i], arena), "block %u (%p) may be in the sampled arena", i, q[i]);
  }
  mi_collect(true);
  start_counting(512, 0x37);
  unsigned long samples0 = samples_seen(), frees0 = frees_seen();
  for (unsigned i = 0; i < 10000; i++) free(q[i]);
  unsigned long samples = samples_seen() - samples0, frees = frees_seen() - frees0;
  ck_assert_uint_eq(frees, 0);
  ck_assert_uint_eq(samples, 0);                   /* frees sample nothing */
  ck_assert_uint_eq(live_records(), 0);
  ck_assert(mi_prof_stop());
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   E37: huge and over-aligned samples
--------------------------------------------------------------------------------------------------- */

/* Allocates `size` bytes aligned to `alignment` (0: malloc) at rate 1 and says what became of the sample:
 * 1 sampled (the observer saw this block), 0 dropped for reason `why` (the counter moved by one: served by
 * mimalloc, its weight counted under the "dropped" stack), -1 the allocation failed (then nothing may be
 * counted: a request nothing can serve is not a sample).  The block is written at both ends and freed.  Nothing between the allocation and
 * the reading of the counters may allocate: at rate 1 that would be sampled too (and every passing
 * ck_assert allocates a message for the Check parent, so stats_now() is not used here): the checks come
 * after. */
static int huge_case(size_t size, size_t alignment, mi_prof_drop_reason_t why)
{
  mi_prof_stats_t st0, st1;
  bool stats_ok = mi_prof_stats(&st0, sizeof st0);
  unsigned long samples0 = samples_seen();
  obs_last_ptr = NULL;
  unsigned char *p = alignment ? aligned_alloc(alignment, size) : malloc(size);
  unsigned long samples = samples_seen() - samples0;
  bool sampled = p != NULL && obs_last_ptr == p;
  size_t last_size = obs_last_size;
  stats_ok = stats_ok && mi_prof_stats(&st1, sizeof st1);
  uint64_t dropped = st1.dropped[why] - st0.dropped[why];
  if (p == NULL) {
    ck_assert(stats_ok);
    ck_assert_msg(samples == 0 && dropped == 0 && st1.samples == st0.samples,
                  "failed request of %zu bytes at alignment %zu was counted", size, alignment);
    return -1;
  }
  p[0] = 1;
  p[size - 1] = 2;
  size_t usable = malloc_usable_size(p);
  unsigned long frees0 = frees_seen();
  free(p);
  unsigned long frees = frees_seen() - frees0;
  ck_assert(stats_ok);
  ck_assert_uint_eq((uintptr_t)p % (alignment ? alignment : 16), 0);
  ck_assert_uint_ge(usable, size);
  ck_assert_msg(samples == (sampled ? 1 : 0) && dropped == (sampled ? 0 : 1),
                "size %zu alignment %zu: sampled %d, %lu samples, %lu dropped", size, alignment, sampled,
                samples, (unsigned long)dropped);
  if (sampled) ck_assert_uint_eq(last_size, size);
  ck_assert_uint_eq(frees, sampled ? 1 : 0);
  return sampled ? 1 : 0;
}

START_TEST(hazards_huge_and_overaligned)
{
  /* Rate 1: every allocation is sampled, so each outcome below is a decision, not luck. */
  start_counting(1, 0x37);
  size_t limit = (size_t)stats_now().arena_limit_bytes;
  /* The slots' address space: 64 GiB on 64-bit platforms, 1 GiB on 32-bit ones. */
  ck_assert_uint_ge(limit, sizeof(void *) == 8 ? (size_t)4 << 30 : (size_t)112 << 20);
  /* A sampled block larger than two slices is mimalloc's own, at whatever size and alignment mimalloc
   * serves: 64 MiB, 3 GiB (64-bit, when the machine grants the address space), 1 MiB aligned to 16, 32
   * and 64 MiB, 64 MiB aligned to 64 MiB.  Never dropped. */
  ck_assert_int_eq(huge_case((size_t)64 << 20, 0, MI_PROF_DROP_TOO_LARGE), 1);
  int r;
  if (sizeof(void *) == 8) {
    r = huge_case((size_t)3 << 30, 0, MI_PROF_DROP_TOO_LARGE);
    ck_assert_int_ne(r, 0);
  }
  ck_assert_int_eq(huge_case((size_t)1 << 20, (size_t)16 << 20, MI_PROF_DROP_ALIGNMENT), 1);
  ck_assert_int_eq(huge_case((size_t)1 << 20, (size_t)32 << 20, MI_PROF_DROP_ALIGNMENT), 1);
  ck_assert_int_eq(huge_case((size_t)64 << 20, (size_t)64 << 20, MI_PROF_DROP_ALIGNMENT), 1);
  /* What nothing can serve fails, counted nowhere (on 32-bit platforms 1 GiB may be granted: above
   * PTRDIFF_MAX there, which mimalloc refuses). */
  size_t never = sizeof(void *) == 8 ? SIZE_MAX / 4 : (size_t)PTRDIFF_MAX + 1;
  ck_assert_int_eq(huge_case(never, 0, MI_PROF_DROP_TOO_LARGE), -1);
  ck_assert_uint_eq(live_records(), 0);
  ck_assert(mi_prof_stop());
}
END_TEST

/* Sampled blocks asked for with alignment 16 (or 9..16) and 8 bytes or less: mimalloc's 8-byte class is
 * only 8-aligned, so the sampled heap must take its aligned path (a fresh-clone user found this). */
static int aligned16(const void *p)
{
  uintptr_t u;
  __asm__("" : "=r"(u) : "0"((uintptr_t)p));   /* hide provenance: gcc would fold the check */
  return (u & 15) == 0;
}

START_TEST(hazards_sampled_tiny_aligned_16)
{
  enum { N = 200 };
  void *blocks[3 * N];
  unsigned bad = 0;
  ck_assert(mi_prof_start_seeded(1, 0x5eed));   /* rate 1: every request of 37 bytes or more, most smaller */
  for (int i = 0; i < N; i++) {
    blocks[3 * i] = aligned_alloc(16, 8);
    blocks[3 * i + 1] = memalign(16, 1 + (size_t)i % 8);
    if (posix_memalign(&blocks[3 * i + 2], 16, 4) != 0) blocks[3 * i + 2] = NULL;
  }
  size_t live;
  ck_assert(mi_prof_debug_stats(&live, NULL));
  for (int i = 0; i < 3 * N; i++) {
    bad += blocks[i] == NULL || !aligned16(blocks[i]);
    free(blocks[i]);
  }
  ck_assert(mi_prof_stop());
  ck_assert_uint_gt(live, 0);                   /* some of them were sampled */
  ck_assert_uint_eq(bad, 0);
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   Signal handlers that free sampled blocks; malloc that is not ours
--------------------------------------------------------------------------------------------------- */

/* prof_probe sigfree: 300000 sampled blocks (rate 1), a SIGPROF every 20 us of CPU freeing the ones
 * the main loop handed over, wherever the main thread is.  It must finish (a handler that took a
 * profiler lock its own thread holds would hang it until the watchdog), every block freed once, the
 * books at zero. */
START_TEST(hazards_signal_handler_frees)
{
  probe_opts_t opts = {.watchdog_s = 100};
  probe_run_t run = probe_run(probe_getenv("MPROF_TEST_PROF_PROBE"), (const char *const[]){"sigfree", "300000", NULL},
                              &opts);
  probe_assert_exit0(&run, "sigfree");
  ck_assert_uint_gt(probe_value(&run, "handler_runs"), 0);
  ck_assert_uint_gt(probe_value(&run, "handler_frees"), 0);
  ck_assert_uint_ge(probe_value(&run, "samples"), 300000);
  ck_assert_uint_eq(probe_value(&run, "live_samples"), 0);
  ck_assert_uint_eq(probe_value(&run, "inuse_bytes"), 0);
  ck_assert_str_eq(run.err, "");
  probe_run_free(&run);
}
END_TEST

/* Under valgrind's memcheck, which replaces malloc, sampling starts but no allocation ever reaches the
 * library: one warning at exit says so (the profile would otherwise look like an idle program's).
 * Needs valgrind (scripts/install-deps.sh installs it); without it, or where it cannot run this
 * architecture's programs, the test is skipped with the reason.  --trace-children: the probe is started
 * through libtool's wrapper script. */
START_TEST(hazards_malloc_not_ours_said)
{
  if (system("valgrind --version >/dev/null 2>&1") != 0) MPROF_TEST_SKIP("valgrind is not installed");
  probe_opts_t opts = {.env = (const char *const[]){"MIMALLOC_PROF=1", NULL}, .watchdog_s = 120};
  probe_run_t run = probe_run("/usr/bin/valgrind", (const char *const[]){"-q", "--tool=memcheck", "--trace-children=yes",
                              probe_getenv("MPROF_TEST_PROF_PROBE"), "stats", NULL}, &opts);
  if (run.status != 0 && (strstr(run.err, "valgrind:  Fatal error at startup") != NULL ||
                          strstr(run.err, "failed to start tool") != NULL)) {
    probe_run_free(&run);   /* valgrind itself, not the program, could not start (cross-test.sh) */
    MPROF_TEST_SKIP("valgrind cannot run this architecture's programs here (no tool for it, or its glibc "
                    "has no symbols: libc6-dbg)");
  }
  probe_assert_exit0(&run, "valgrind");
  ck_assert_uint_eq(probe_value(&run, "enabled_at_main"), 1);
  ck_assert_msg(strstr(run.err, "mimalloc-prof: warning: sampling was on, but no allocation reached this library") != NULL,
                "stderr:\n%s", run.err);
  probe_run_free(&run);
}
END_TEST

/* The converse: a program that allocates nothing after the start (true(1), as env(1) and time(1) run it)
 * gets no such warning: malloc does reach the library, there was just nothing to sample. */
START_TEST(hazards_no_allocation_not_said)
{
  /* /bin/true itself, unless it is of another architecture (a cross build): then true_probe, the same
   * program built for this one. */
  const char *prog = probe_same_arch("/bin/true") ? "/bin/true" : probe_getenv("MPROF_TEST_TRUE_PROBE");
  char preload[PATH_MAX + 16];
  snprintf(preload, sizeof preload, "LD_PRELOAD=%s", probe_getenv("MPROF_TEST_LIB"));
  probe_opts_t opts = {.env = (const char *const[]){preload, "MIMALLOC_PROF=1", NULL}};
  probe_run_t run = probe_run(prog, NULL, &opts);
  probe_assert_exit0(&run, "true");
  ck_assert_msg(run.err[0] == '\0', "stderr:\n%s", run.err);
  probe_run_free(&run);
}
END_TEST

/* fork() from a signal handler that interrupted the profiler (rate 1: often inside one of its locks), 100
 * times: the fork handlers never take a lock the interrupted thread holds (they did, and it hung).  Every
 * child returns from the handler, allocates, frees, reallocs sampled blocks of its parent (bytes kept),
 * starts (refused with ENOTRECOVERABLE where it froze the profiler), dumps, reads the stats and exits. */
START_TEST(hazards_fork_in_handler_inside_profiler)
{
  probe_opts_t opts = {.watchdog_s = 100};
  probe_run_t run = probe_run(probe_getenv("MPROF_TEST_FORK_PROBE"), (const char *const[]){"forklock", "100", NULL},
                              &opts);
  probe_assert_exit0(&run, "forklock");
  ck_assert_uint_eq(probe_value(&run, "children_ok"), 100);
  ck_assert_uint_eq(probe_value(&run, "children_bad"), 0);
  /* Some children froze the profiler (their fork found a lock held): 98 to 100 of 100 in 8 runs here with
   * the signaller's random spin (without it a run was all or nothing: 0 in about half), so none at all
   * would mean the frozen paths went untested, not bad luck. */
  ck_assert_uint_ge(probe_value(&run, "children_frozen"), 1);
  probe_run_free(&run);
}
END_TEST

/* A SIGCHLD handler that reaps and allocates, in a program that forks 1000 children at rate 1: the
 * handler often runs inside fork(2), after our prepare handler took every profiler lock on that thread
 * (hung in 2 of 3 runs at the default rate before the guard covered fork).  All children are reaped,
 * and the handler's blocks (the last one freed) leave no live sample behind. */
START_TEST(hazards_fork_sigchld_handler_allocates)
{
  probe_opts_t opts = {.watchdog_s = 100};
  probe_run_t run = probe_run(probe_getenv("MPROF_TEST_FORK_PROBE"), (const char *const[]){"forkchld", "1000", NULL},
                              &opts);
  probe_assert_exit0(&run, "forkchld");
  ck_assert_uint_eq(probe_value(&run, "reaped"), 1000);
  ck_assert_uint_eq(probe_value(&run, "live_samples"), 0);
  probe_run_free(&run);
}
END_TEST

Suite *hazards_suite(void)
{
  Suite *s = suite_create("hazards");
  TCase *tc = tcase_create("hazards");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, hazards_threads_4x100k);
  tcase_add_test(tc, hazards_tsd_destructor_allocates);
  tcase_add_test(tc, hazards_fork_before_any_call);
  tcase_add_test(tc, hazards_fork_while_sampling);
  tcase_add_test(tc, hazards_mi_collect_true);
  tcase_add_test(tc, hazards_huge_and_overaligned);
  tcase_add_test(tc, hazards_sampled_tiny_aligned_16);
  tcase_add_test(tc, hazards_signal_handler_frees);
  tcase_add_test(tc, hazards_malloc_not_ours_said);
  tcase_add_test(tc, hazards_no_allocation_not_said);
  tcase_add_test(tc, hazards_fork_in_handler_inside_profiler);
  tcase_add_test(tc, hazards_fork_sigchld_handler_allocates);
  suite_add_tcase(s, tc);
  return s;
}

#endif
