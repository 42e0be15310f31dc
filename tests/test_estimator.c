/* test_estimator.c - the estimates are unbiased where a sampling rule could easily bias them: the fast
 * and slow paths' one convention, realloc in place, a fork in progress, rounding of small weights, and
 * samples that cannot be fully recorded (lib/sampler.c, lib/slow.c).
 *
 * Each test uses a fixed seed (MPROF_TEST_SEED=<n> replaces it) and allows 4 standard deviations of the
 * quantity it checks, derived in its comment; each mechanism it guards against, left in, moves its
 * quantity many standard deviations (bench/accuracy checks the same over 30 seeds).  Nothing is asserted while a session samples (see sampling_util.h).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sampling_util.h"
#include "subprocess.h"
#include "suites.h"

#if MPROF_PPROF == 1

#define SEED 0xe57e17a7e5ull

static uint64_t seed(void) { return test_seed_or(SEED); }

/* ---------------------------------------------------------------------------------------------------
   One convention: P(sampled) = 1 - exp(-s/R), independently of the allocation before
--------------------------------------------------------------------------------------------------- */

static volatile uint64_t conv_index;      /* index of the allocation in progress */
static uint64_t conv_samples, conv_pairs, conv_last;

static void conv_on_sample(void *p, size_t size, size_t weight, size_t rate, uint64_t tid, void *arg)
{
  (void)p, (void)size, (void)weight, (void)rate, (void)tid, (void)arg;
  conv_pairs += conv_samples != 0 && conv_last + 1 == conv_index;
  conv_last = conv_index;
  conv_samples++;
}

#define CONV_N 1000000u

/* N = 10^6 allocations of s bytes at rate R, each freed at once.  Sampled: X ~ Binomial(N, p), sd
 * sqrt(N p (1-p)).  Consecutive pairs Y = sum of I_i I_(i+1): E = (N-1) p^2, and since neighbouring
 * pairs share an allocation, Var = N p^2 (1 - p^2) + 2 N (p^3 - p^4) = N p^2 (1 + 2p - 3p^2).  The old
 * off-by-one sampled the allocation after a sample with 1 - exp(-(s-1)/R): at rate 1 / size 1 that is 0
 * (fraction 0.387, 510 sd off), at rate 64 / size 64 fraction 0.6284 instead of 0.6321 (7.7 sd). */
START_TEST(estimator_one_convention)
{
  static const size_t cases[][2] = {{1, 1}, {8, 4}, {64, 64}};   /* rate, size */
  double frac[3], pairs[3];
  ck_assert(mi_prof_set_observer(conv_on_sample, NULL, NULL));
  for (size_t c = 0; c < 3; c++) {
    conv_samples = conv_pairs = conv_last = 0;
    start_seeded(cases[c][0], seed());
    for (uint64_t i = 0; i < CONV_N; i++) {
      conv_index = i;
      free(malloc(cases[c][1]));
    }
    mi_prof_stop();
    frac[c] = (double)conv_samples;
    pairs[c] = (double)conv_pairs;
  }
  ck_assert(mi_prof_set_observer(NULL, NULL, NULL));
  for (size_t c = 0; c < 3; c++) {
    double p = prob_of(cases[c][1], cases[c][0]);
    char what[64];
    snprintf(what, sizeof what, "rate %zu size %zu: samples", cases[c][0], cases[c][1]);
    ck_assert_within_4sd(what, frac[c], CONV_N * p, CONV_N * p * (1 - p));
    snprintf(what, sizeof what, "rate %zu size %zu: consecutive samples", cases[c][0], cases[c][1]);
    ck_assert_within_4sd(what, pairs[c], (CONV_N - 1) * p * p, CONV_N * p * p * (1 + 2 * p - 3 * p * p));
  }
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   Weights rounded without bias
--------------------------------------------------------------------------------------------------- */

/* Rate 1, N = 10^6 one-byte blocks: p = 1 - e^-1 = 0.632 and a sample stands for 1/p = 1.582 bytes
 * (and objects), which whole-byte rounding made 2 (+26%).  Rounded at random, the estimate of N bytes
 * has Var = N (1-p)/p (sampling) + N p f(1-f) (rounding, f = frac(1/p) = 0.582) = N (0.582 + 0.154);
 * 4 sd = 3432 bytes, 0.34%.  Objects likewise (their rounding to 1/1024 object adds nothing visible). */
START_TEST(estimator_small_weights_unrounded)
{
  start_seeded(1, seed());
  for (uint64_t i = 0; i < CONV_N; i++) free(malloc(1));
  mi_prof_stats_t st = stats_or_abort();
  mi_prof_stop();
  double p = prob_of(1, 1), f = 1 / p - floor(1 / p);
  double var = CONV_N * ((1 - p) / p + p * f * (1 - f));
  ck_assert_within_4sd("alloc_bytes", st.alloc_bytes, CONV_N, var);
  ck_assert_within_4sd("alloc_objects", st.alloc_objects, CONV_N, var);
  ck_assert_uint_eq(st.inuse_bytes, 0);                 /* and in-use back to exactly zero */
  ck_assert_uint_eq(st.inuse_objects, 0);
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   realloc: an allocation of its new size, in place or not
--------------------------------------------------------------------------------------------------- */

#define CHAINS     40000
#define CHAIN_RATE 65536
static void *chains[CHAINS];

/* Live samples per step of the chain, told apart by size (1000, 1010, 1020). */
static int64_t chain_count[3];

static int step_of(size_t size) { return size == 1000 ? 0 : size == 1010 ? 1 : size == 1020 ? 2 : -1; }

static void chain_on_sample(void *p, size_t size, size_t weight, size_t rate, uint64_t tid, void *arg)
{
  (void)p, (void)weight, (void)rate, (void)tid, (void)arg;
  int k = step_of(size);
  if (k >= 0) chain_count[k]++;
}

static void chain_on_free(void *p, size_t size, void *arg)
{
  (void)p, (void)arg;
  int k = step_of(size);
  if (k >= 0) chain_count[k]--;
}

/* 40,000 chains malloc(1000) -> realloc(p, 1010) -> realloc(p, 1020), all three in the same 1 KiB
 * block, kept live, at rate 65536.  Under the rule (a realloc allocates its new size and frees the old
 * block) the truth is: allocated 3 objects and 3030 bytes per chain, in use 1 object of 1020 bytes at
 * the last realloc, nothing at the first two steps.  Each step is an independent draw of p(s):
 *   in-use bytes:  Var = N 1020^2 (1-p)/p, p = p(1020) = 0.01544: 4 sd = 4 * 326 KiB, 8.0% of 40.8 MB
 *   alloc bytes:   Var = sum over the three sizes, 4 sd = 4.6%
 * The old rule read 2.90x the in-use bytes here, and left ~40 MB "in use" at the first malloc.  The
 * first two steps' live samples are exactly 0: their records go at the next realloc. */
START_TEST(estimator_realloc_in_place)
{
  ck_assert(mi_prof_set_observer(chain_on_sample, chain_on_free, NULL));
  memset(chain_count, 0, sizeof chain_count);
  start_seeded(CHAIN_RATE, seed());
  unsigned moved = 0;
  for (int i = 0; i < CHAINS; i++) {
    char *p = malloc(1000), *q = realloc(p, 1010), *r = realloc(q, 1020);
    moved += q != p || r != q;
    chains[i] = r;
  }
  mi_prof_stats_t st = stats_or_abort();
  int64_t count[3] = {chain_count[0], chain_count[1], chain_count[2]};
  for (int i = 0; i < CHAINS; i++) free(chains[i]);
  mi_prof_stats_t after = stats_or_abort();
  mi_prof_stop();
  ck_assert(mi_prof_set_observer(NULL, NULL, NULL));
  (void)moved;           /* in place or moved: the rule is the same (unsampled blocks stay in mimalloc) */
  ck_assert_int_eq(count[0], 0);
  ck_assert_int_eq(count[1], 0);
  ck_assert_within_4sd("in-use bytes", st.inuse_bytes, CHAINS * 1020.0, var_bytes(CHAINS, 1020, CHAIN_RATE));
  ck_assert_within_4sd("in-use objects", st.inuse_objects, CHAINS, var_objects(CHAINS, 1020, CHAIN_RATE));
  double var_alloc = var_bytes(CHAINS, 1000, CHAIN_RATE) + var_bytes(CHAINS, 1010, CHAIN_RATE) +
                     var_bytes(CHAINS, 1020, CHAIN_RATE);
  ck_assert_within_4sd("alloc bytes", st.alloc_bytes, CHAINS * 3030.0, var_alloc);
  ck_assert_uint_eq(after.inuse_bytes, 0);
  ck_assert_uint_eq(after.live_samples, 0);
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   A fork in progress
--------------------------------------------------------------------------------------------------- */

#define FORK_THREADS 4
#define FORKS        100
#define FORK_SIZE    256
#define FORK_RATE    4096

static int fork_done;                     /* main has forked FORKS times (atomic) */

static void *fork_worker(void *arg)
{
  uint64_t *allocs = arg;
  while (!__atomic_load_n(&fork_done, __ATOMIC_ACQUIRE)) {
    for (int k = 0; k < 64; k++) free(malloc(FORK_SIZE));
    *allocs += 64;
  }
  return NULL;
}

/* Four threads allocate 256-byte blocks while the main thread forks 100 times back to back (each child
 * exits at once), rate 4096.  Samples taken while a fork is being prepared cannot be unwound; they count
 * under a "dropped" stack, so the totals keep their weight (without them the estimate is 0.12x the truth
 * with fp, 0.03x with libunwind).  With n allocations in all, p = p(256) = 0.0606: Var = n 256^2 (1-p)/p,
 * 4 sd about 4 sqrt(15.5 / n), 1.6% of the truth at n = 10^6. */
START_TEST(estimator_fork_keeps_weight)
{
  pthread_t th[FORK_THREADS];
  uint64_t allocs[FORK_THREADS] = {0};
  __atomic_store_n(&fork_done, 0, __ATOMIC_RELAXED);
  start_seeded(FORK_RATE, seed());
  mi_prof_stats_t st0 = stats_or_abort();
  for (int i = 0; i < FORK_THREADS; i++) pthread_create(&th[i], NULL, fork_worker, &allocs[i]);
  int forked = 0;
  for (int i = 0; i < FORKS; i++) {
    pid_t pid = fork();
    if (pid == 0) _exit(0);
    if (pid > 0 && waitpid(pid, NULL, 0) == pid) forked++;
  }
  __atomic_store_n(&fork_done, 1, __ATOMIC_RELEASE);
  for (int i = 0; i < FORK_THREADS; i++) pthread_join(th[i], NULL);
  mi_prof_stats_t st = stats_or_abort();
  mi_prof_stop();
  double n = 0;
  for (int i = 0; i < FORK_THREADS; i++) n += (double)allocs[i];
  ck_assert_int_eq(forked, FORKS);
  ck_assert_double_gt(n, 1e5);
  /* Other allocations of the session (thread creation) are a few KiB: far inside the 4 sd. */
  ck_assert_within_4sd("alloc bytes", (double)(st.alloc_bytes - st0.alloc_bytes), n * FORK_SIZE,
                       var_bytes(n, FORK_SIZE, FORK_RATE));
}
END_TEST

/* Children of one parent sample independently of each other.  A child starts as a copy of the forking
 * thread, sampler state included; were it kept, every child would take the same samples.  The parent
 * samples a while (so its state is mid-distance), then forks CHILDREN children that each allocate
 * CHILD_N blocks of 256 bytes at rate 4096 and send back the change of their allocated estimate and a hash
 * of which of their allocations were sampled (the observer numbers them).  Independent children: two
 * equal hashes need two equal sets of ~1,200 sampled indexes out of 20,000 (probability ~0), so all 100
 * differ; with the copied state all 100 are equal.  Unbiased: the mean of the 100 estimates has variance
 * var_bytes(CHILD_N, 256, 4096) / 100, and lies within 4 sd of CHILD_N * 256. */
#define CHILDREN 100
#define CHILD_N  20000

static uint64_t child_index, child_hash;

static void child_on_sample(void *p, size_t size, size_t weight, size_t rate, uint64_t tid, void *arg)
{
  (void)p, (void)size, (void)weight, (void)rate, (void)tid, (void)arg;
  child_hash = (child_hash ^ child_index) * 0x100000001b3ull;
}

START_TEST(estimator_fork_children_independent)
{
  int fds[2];
  ck_assert_int_eq(pipe(fds), 0);
  ck_assert(mi_prof_set_observer(child_on_sample, NULL, NULL));
  start_seeded(FORK_RATE, seed());
  for (int i = 0; i < 1000; i++) free(malloc(FORK_SIZE));
  for (int c = 0; c < CHILDREN; c++) {
    pid_t pid = fork();
    if (pid == 0) {
      mi_prof_stats_t a, b;
      if (!mi_prof_stats(&a, sizeof a)) _exit(1);
      child_hash = 0xcbf29ce484222325ull;
      for (child_index = 0; child_index < CHILD_N; child_index++) free(malloc(FORK_SIZE));
      if (!mi_prof_stats(&b, sizeof b)) _exit(1);
      uint64_t out[2] = {b.alloc_bytes - a.alloc_bytes, child_hash};
      _exit(write(fds[1], out, sizeof out) == (ssize_t)sizeof out ? 0 : 1);
    }
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
      ck_abort_msg("child %d failed", c);
  }
  mi_prof_stop();
  uint64_t got[CHILDREN][2];
  ck_assert_int_eq(read(fds[0], got, sizeof got), (ssize_t)sizeof got);
  close(fds[0]), close(fds[1]);
  int distinct = 0;
  double sum = 0;
  for (int c = 0; c < CHILDREN; c++) {
    int seen = 0;
    for (int d = 0; d < c; d++) seen |= got[d][1] == got[c][1];
    distinct += !seen;
    sum += (double)got[c][0];
  }
  ck_assert_int_eq(distinct, CHILDREN);
  ck_assert_within_4sd("mean alloc bytes of a child", sum / CHILDREN, (double)CHILD_N * FORK_SIZE,
                       var_bytes(CHILD_N, FORK_SIZE, FORK_RATE) / CHILDREN);
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   Samples that cannot be recorded keep their weight
--------------------------------------------------------------------------------------------------- */

/* With a 4 MiB window for slots, FIT + 52 live blocks of two slices (128 KiB; 64 KiB on 32-bit
 * platforms) at rate 4096 (p >= 1 - e^-16: all sampled): each of the window's 4 chunks of 1 MiB holds
 * a slot of that size per two slices but the first (its header's), so FIT = 28 (60) fit and the rest are
 * served by mimalloc as dropped samples (arena_full).  Every one still counts: the allocated estimate is
 * N x SIZE to within the probe's other allocations, and the "dropped (arena_full)" stack holds the
 * weight of all but the ones that fit. */
START_TEST(estimator_arena_full_keeps_weight)
{
  const uint64_t size = sizeof(void *) == 8 ? 128 * KiB : 64 * KiB, fit = 4 * (MiB / size - 1), n = fit + 52;
  char n_arg[32], size_arg[32];
  snprintf(n_arg, sizeof n_arg, "%llu", (unsigned long long)n);
  snprintf(size_arg, sizeof size_arg, "%llu", (unsigned long long)size);
  probe_opts_t opts = {.env = (const char *const[]){"MIMALLOC_PROF_ARENA_SIZE=4m", NULL}};
  probe_run_t run = probe_run(probe_getenv("MPROF_TEST_PROF_PROBE"),
                              (const char *const[]){"keep", n_arg, size_arg, "4096", NULL}, &opts);
  probe_assert_exit0(&run, NULL);
  uint64_t alloc = probe_value(&run, "alloc_bytes"), full = probe_value(&run, "dropped_arena_full");
  uint64_t dropped_stack = probe_value(&run, "dropped_stack_alloc_bytes");
  ck_assert_uint_eq(probe_value(&run, "bad_blocks"), 0);
  ck_assert_uint_ge(alloc, n * size);
  ck_assert_uint_le(alloc, n * size + 64 * KiB);
  ck_assert_uint_ge(full, n - fit);
  ck_assert_uint_le(full, n);
  ck_assert_uint_ge(dropped_stack, full * size);
  ck_assert_uint_le(dropped_stack, full * size + full);
  ck_assert_uint_eq(probe_value(&run, "inuse_after_free"), 0);
  probe_run_free(&run);
}
END_TEST

Suite *estimator_suite(void)
{
  Suite *s = suite_create("estimator");
  TCase *tc = tcase_create("estimator");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, estimator_one_convention);
  tcase_add_test(tc, estimator_small_weights_unrounded);
  tcase_add_test(tc, estimator_realloc_in_place);
  tcase_add_test(tc, estimator_fork_keeps_weight);
  tcase_add_test(tc, estimator_fork_children_independent);
  tcase_add_test(tc, estimator_arena_full_keeps_weight);
  suite_add_tcase(s, tc);
  return s;
}

#endif
