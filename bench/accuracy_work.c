/* accuracy_work.c - the workloads of bench/accuracy: programs whose true allocations per site are known
 * exactly, so the estimates in their heap profile can be compared with the truth.
 *
 * Usage: accuracy_work WORKLOAD[:ARG] RATE SEED PROFILE [SCALE]
 *   Starts a session with mi_prof_start_seeded(RATE, SEED) (the restart workload starts two), runs the
 *   workload, writes the heap profile with mi_prof_dump(PROFILE) while the blocks it keeps are still
 *   live, and then (stdio is only used after the dump, so it allocates nothing the profile could see)
 *   prints the truth on stdout:
 *
 *     workload NAME / rate R / seed S
 *     site NAME AO AB IO IB V... K... EA EI [notruth|spills]
 *         true alloc_objects, alloc_space, inuse_objects, inuse_space; the theoretical variance (4 V)
 *         and third cumulant (4 K) of the estimate of each (see accuracy.h); expected samples among the
 *         allocations and among the live blocks.  "notruth": the site's estimate has no known
 *         expectation (neither it nor [total] is gated); "spills": some of its samples are recorded
 *         under a "[dropped (REASON)]" frame (the site is not gated, [total] is).
 *     estimate NAME AO AB IO IB   estimates of the site that are not in the profile (fork children's,
 *         sent to the parent), added to its row and [total]; its freed_* estimate is AO - IO, AB - IB
 *     peak NAME PO PB VO VB KO KB E   the peak workloads: the site's live objects and bytes at the true
 *         peak, the variance and third cumulant of half B's estimate of each there, its expected samples
 *     temp NAME TO TB VO VB KO KB E   the lifetime workload: the site's freed objects and bytes that
 *         lived less than ACC_TEMP_NS, the variance and third cumulant of their estimate, expected samples
 *     group NAME SITE...          a row for the sum of these sites
 *     share NAME NUM SITE...      a row for site NUM's share of NUM + SITE... (each sample type)
 *     accept LABEL ROW TYPE rel|abs|sd TOL   an acceptance check on a row: its mean within TOL of the
 *         truth (relative or absolute), or (sd) its measured sd within what chi^2 allows of sd theory
 *     info KEY VALUE              a fact about the run (printed as its mean over the seeds)
 *     require LABEL KEY MIN       an acceptance check: info KEY is at least MIN in every run
 *
 *   SCALE divides the workloads' sizes (bench/accuracy QUICK=1 uses 4).  Exit status 1 with a line on
 *   stderr when something the workload needs fails.
 *
 * Built by bench/accuracy with frame pointers, -fno-builtin (no malloc/free pair is optimised away),
 * no inlining, sibling calls or identical-code folding (every site keeps its own frame and address),
 * -rdynamic (dladdr names the sites), and linked with the library.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mimalloc-prof.h"

#include "accuracy.h"

static _Noreturn void die(const char *what)
{
  fprintf(stderr, "accuracy_work: %s (errno %d)\n", what, errno);
  exit(1);
}

/* ---------------------------------------------------------------------------------------------------
   Truth
--------------------------------------------------------------------------------------------------- */

enum { AO, AB, IO, IB };              /* alloc_objects, alloc_space, inuse_objects, inuse_space */

typedef struct tally_s {
  uint64_t n[4];                      /* true counts, in the order above */
  double   var[4];                    /* variance of the estimate of each */
  double   k3[4];                     /* its third cumulant (how skewed it is) */
  double   expect[2];                 /* expected samples: among allocations, among live blocks */
} tally_t;

static const char *const site_name[ACC_NSITES] = {
#define X(name) "site_" #name,
  ACC_SITES(X)
#undef X
};

uint64_t acc_rate;
static __thread tally_t thread_tally[ACC_NSITES];
static tally_t tally[ACC_NSITES];
static pthread_mutex_t tally_lock = PTHREAD_MUTEX_INITIALIZER;
static bool site_used[ACC_NSITES], site_no_truth[ACC_NSITES], site_spills[ACC_NSITES];

void acc_use(int site) { site_used[site] = true; }

/* One block of `size` bytes (sign -1: one less) into t's counts (base AO: allocated, IO: live), for an
 * estimate at rate `rate`.  Its estimate is w B with B ~ Bernoulli(p) and w = 1/p objects or s/p bytes:
 * variance w^2 p (1-p), third cumulant w^3 p (1-p) (1-2p). */
static void count_at(tally_t *t, int base, size_t size, double rate, int sign)
{
  double s = (double)size, x = s / rate;
  double p = -expm1(-x), odds = exp(-x) / p;          /* p and (1-p)/p, accurate at both ends */
  double k3 = odds * (1 - 2 * p) / p;                 /* (1-p)(1-2p)/p^2 */
  /* The library rounds each sample's weights at random to whole units (1/1024 object, 1 byte), up with
   * probability f = the fraction: that adds p f (1-f) units^2 of variance per allocation. */
  double wo = 1024 / p, fo = wo - floor(wo), wb = s / p, fb = wb - floor(wb);
  t->n[base] += (uint64_t)(int64_t)sign;
  t->n[base + 1] += (uint64_t)(int64_t)sign * size;
  t->var[base] += sign * (odds + p * fo * (1 - fo) / (1024.0 * 1024.0));
  t->var[base + 1] += sign * (s * s * odds + p * fb * (1 - fb));
  t->k3[base] += sign * k3;
  t->k3[base + 1] += sign * s * s * s * k3;
  t->expect[base / 2] += sign * p;
}

static void count(tally_t *t, int base, size_t size) { count_at(t, base, size, (double)acc_rate, 1); }

void acc_alloc(int site, size_t size) { count(&thread_tally[site], AO, size); }

void acc_live(int site, size_t size) { count(&thread_tally[site], IO, size); }

/* The peak workloads' truth: the live blocks per site as half B sees them (rate 2R), and their copy at
 * the highest total; the temporaries of the lifetime workload.  Single-threaded workloads only. */
static tally_t live_tally[ACC_NSITES], peak_tally[ACC_NSITES], temp_tally[ACC_NSITES];
static uint64_t live_total, peak_total;
static bool peak_used[ACC_NSITES], temp_used[ACC_NSITES];

void acc_peak_live(int site, size_t size, int sign)
{
  peak_used[site] = true;
  count_at(&live_tally[site], AO, size, 2.0 * (double)acc_rate, sign);
  live_total += (uint64_t)(int64_t)sign * size;
  if (live_total > peak_total) {
    peak_total = live_total;
    memcpy(peak_tally, live_tally, sizeof peak_tally);
  }
}

void acc_temp(int site, size_t size)
{
  temp_used[site] = true;
  count(&temp_tally[site], AO, size);
}

static void print_extra(const char *tag, const tally_t *t, const bool *used)
{
  for (int s = 0; s < ACC_NSITES; s++) {
    if (!used[s]) continue;
    printf("%s %s %" PRIu64 " %" PRIu64 " %.17g %.17g %.17g %.17g %.17g\n", tag, site_name[s], t[s].n[AO],
           t[s].n[AB], t[s].var[AO], t[s].var[AB], t[s].k3[AO], t[s].k3[AB], t[s].expect[0]);
  }
}

void acc_flush(void)
{
  pthread_mutex_lock(&tally_lock);
  for (int s = 0; s < ACC_NSITES; s++) {
    tally_t *from = &thread_tally[s];
    for (int k = 0; k < 4; k++)
      tally[s].n[k] += from->n[k], tally[s].var[k] += from->var[k], tally[s].k3[k] += from->k3[k];
    for (int k = 0; k < 2; k++) tally[s].expect[k] += from->expect[k];
    memset(from, 0, sizeof *from);
  }
  pthread_mutex_unlock(&tally_lock);
}

/* Blocks kept live until the dump: counted as in use when the truth is printed. */
typedef struct kept_s {
  void    *p;
  size_t   size;
  int      site;
} kept_t;

#define KEPT_MAX (1u << 21)
static kept_t kept[KEPT_MAX];         /* static: the bookkeeping is never sampled */
static atomic_size_t n_kept;

void acc_keep(void *p, size_t size, int site)
{
  size_t i = atomic_fetch_add_explicit(&n_kept, 1, memory_order_relaxed);
  if (i >= KEPT_MAX) die("too many kept blocks");
  kept[i] = (kept_t){p, size, site};
}

/* Lines a workload adds to the truth (groups, shares, checks), kept in static memory until the dump is
 * written: stdio would allocate its buffer, which the profile would then see. */
static char lines[4096];
static size_t lines_len;

void acc_line(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(lines + lines_len, sizeof lines - lines_len - 1, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof lines - lines_len - 1) die("truth lines too long");
  lines_len += (size_t)n;
  lines[lines_len++] = '\n';
  lines[lines_len] = '\0';
}

static void print_truth(const char *workload, uint64_t rate, uint64_t seed)
{
  acc_flush();
  for (size_t i = 0; i < n_kept; i++) count(&tally[kept[i].site], IO, kept[i].size);
  printf("workload %s\nrate %" PRIu64 "\nseed %" PRIu64 "\n", workload, rate, seed);
  for (int s = 0; s < ACC_NSITES; s++) {
    if (!site_used[s]) continue;
    const tally_t *t = &tally[s];
    printf("site %s %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64, site_name[s], t->n[AO], t->n[AB], t->n[IO],
           t->n[IB]);
    for (int k = 0; k < 4; k++) printf(" %.17g", t->var[k]);
    for (int k = 0; k < 4; k++) printf(" %.17g", t->k3[k]);
    printf(" %.17g %.17g%s\n", t->expect[0], t->expect[1],
           site_no_truth[s] ? " notruth" : site_spills[s] ? " spills" : "");
  }
  print_extra("peak", peak_tally, peak_used);
  print_extra("temp", temp_tally, temp_used);
  fputs(lines, stdout);
}

/* ---------------------------------------------------------------------------------------------------
   Helpers
--------------------------------------------------------------------------------------------------- */

static uint64_t prng = 0x9e3779b97f4a7c15ull;   /* the workloads' own sizes: the same in every run */

static uint64_t next_random(void)
{
  prng ^= prng << 13, prng ^= prng >> 7, prng ^= prng << 17;
  return prng;
}

void acc_start(uint64_t rate, uint64_t seed)
{
  acc_rate = rate;
  if (!mi_prof_start_seeded(rate, seed)) die("mi_prof_start_seeded");
}

void acc_no_truth(int site) { site_no_truth[site] = true; }

void acc_spills(int site) { site_spills[site] = true; }

void *acc_check(void *p)
{
  if (p == NULL) die("allocation failed");
  *(volatile char *)p = 1;            /* touched, not filled: huge blocks stay cheap */
  return p;
}

void acc_die(const char *what) { die(what); }

/* Keeps even-numbered blocks live and frees the others at once. */
static void keep_or_free(size_t i, void *p, size_t size, int site)
{
  if (i % 2 == 0) acc_keep(p, size, site);
  else free(p);
}

size_t acc_scaled(size_t n, size_t div, size_t min)
{
  return n / div > min ? n / div : min;
}

/* ---------------------------------------------------------------------------------------------------
   Sites (one allocator call each; see accuracy.h)
--------------------------------------------------------------------------------------------------- */

ACC_SITE void *site_sizes_small(size_t n) { return malloc(n); }
ACC_SITE void *site_sizes_medium(size_t n) { return malloc(n); }
ACC_SITE void *site_sizes_large(size_t n) { return malloc(n); }
ACC_SITE void *site_sizes_huge(size_t n) { return malloc(n); }
ACC_SITE void *site_churn(size_t n) { return malloc(n); }
ACC_SITE void *site_calloc_array(size_t n, size_t size) { return calloc(n, size); }
ACC_SITE void *site_calloc_one(size_t n, size_t size) { return calloc(n, size); }
ACC_SITE void *site_calloc_tiny(size_t n, size_t size) { return calloc(n, size); }
ACC_SITE void *site_aligned_posix(size_t align, size_t n)
{
  void *p = NULL;
  return posix_memalign(&p, align, n) == 0 ? p : NULL;
}
ACC_SITE void *site_aligned_c11(size_t align, size_t n) { return aligned_alloc(align, n); }
ACC_SITE void *site_aligned_memalign(size_t align, size_t n) { return memalign(align, n); }
ACC_SITE void *site_xthread_small(size_t n) { return malloc(n); }
ACC_SITE void *site_xthread_big(size_t n) { return malloc(n); }
ACC_SITE void *site_varied(size_t n) { return malloc(n); }
ACC_SITE void *site_restart_old(size_t n) { return malloc(n); }
ACC_SITE void *site_restart_both(size_t n) { return malloc(n); }
ACC_SITE void *site_restart_new(size_t n) { return malloc(n); }
ACC_SITE void *site_restart_warmup(size_t n) { return malloc(n); }
ACC_SITE void *site_restart_worker(size_t n) { return malloc(n); }
ACC_SITE void *site_rip_malloc(size_t n) { return malloc(n); }
ACC_SITE void *site_rip_grow1(void *p, size_t n) { return realloc(p, n); }
ACC_SITE void *site_rip_grow2(void *p, size_t n) { return realloc(p, n); }
ACC_SITE void *site_mx_malloc(size_t n) { return malloc(n); }
ACC_SITE void *site_mx_grow(void *p, size_t n) { return realloc(p, n); }
ACC_SITE void *site_mx_grow2(void *p, size_t n) { return realloc(p, n); }
ACC_SITE void *site_mx_shrink(void *p, size_t n) { return realloc(p, n); }
ACC_SITE void *site_mx_shrink2(void *p, size_t n) { return realloc(p, n); }
ACC_SITE void *site_mx_array(void *p, size_t n, size_t size) { return reallocarray(p, n, size); }
ACC_SITE void *site_mx_array2(void *p, size_t n, size_t size) { return reallocarray(p, n, size); }
ACC_SITE void *site_bun_small(size_t n) { return malloc(n); }
ACC_SITE void *site_bun_large(size_t n) { return malloc(n); }
ACC_SITE void *site_tiny_kept(size_t n) { return malloc(n); }
ACC_SITE void *site_tiny_freed(size_t n) { return malloc(n); }
ACC_SITE void *site_round_1(size_t n) { return malloc(n); }
ACC_SITE void *site_round_2(size_t n) { return malloc(n); }
ACC_SITE void *site_round_3(size_t n) { return malloc(n); }
ACC_SITE void *site_round_5(size_t n) { return malloc(n); }
ACC_SITE void *site_fork_worker(size_t n) { return malloc(n); }
ACC_SITE void *site_peak_build(size_t n) { return malloc(n); }
ACC_SITE void *site_peak_keep(size_t n) { return malloc(n); }
ACC_SITE void *site_life_short(size_t n) { return malloc(n); }
ACC_SITE void *site_life_long(size_t n) { return malloc(n); }
ACC_SITE void *site_life_kept(size_t n) { return malloc(n); }

/* ---------------------------------------------------------------------------------------------------
   Single-threaded workloads
--------------------------------------------------------------------------------------------------- */

typedef void *site_fn(size_t);

/* `count` blocks of `size` bytes from one site; even-numbered ones kept. */
static void blocks(site_fn *fn, int site, size_t n, size_t size)
{
  acc_use(site);
  for (size_t i = 0; i < n; i++) {
    void *p = acc_check(fn(size));
    acc_alloc(site, size);
    keep_or_free(i, p, size, site);
  }
}

/* Small, medium, large and huge blocks in mimalloc's terms (<= 1 KiB, <= 128 KiB, <= 16 MiB, above),
 * about 32 MiB from each of the first three: ~64 expected samples per run at rate 524288. */
static void w_sizes(uint64_t rate, uint64_t seed, size_t div)
{
  acc_start(rate, seed);
  blocks(site_sizes_small, ACC_sizes_small, acc_scaled(700000, div, 1), 48);
  blocks(site_sizes_medium, ACC_sizes_medium, acc_scaled(1600, div, 1), 20000);
  blocks(site_sizes_large, ACC_sizes_large, acc_scaled(32, div, 4), 1 << 20);
  blocks(site_sizes_huge, ACC_sizes_huge, 4, 24 << 20);
}

/* A window of 16384 live blocks of 256..4096 bytes; each step frees a random slot and refills it. */
#define CHURN_WINDOW 16384
static struct { void *p; size_t size; } window[CHURN_WINDOW];

static void w_churn(uint64_t rate, uint64_t seed, size_t div)
{
  acc_start(rate, seed);
  acc_use(ACC_churn);
  size_t steps = acc_scaled(400000, div, CHURN_WINDOW);
  for (size_t i = 0; i < steps; i++) {
    uint64_t x = next_random();
    size_t slot = i < CHURN_WINDOW ? i : (size_t)(x >> 32) % CHURN_WINDOW, size = 256 + (size_t)(x % 3841);
    free(window[slot].p);
    window[slot].p = acc_check(site_churn(size));
    window[slot].size = size;
    acc_alloc(ACC_churn, size);
  }
  for (size_t i = 0; i < CHURN_WINDOW; i++) acc_keep(window[i].p, window[i].size, ACC_churn);
}

/* calloc counts count * size. */
static void w_calloc(uint64_t rate, uint64_t seed, size_t div)
{
  static const struct { void *(*fn)(size_t, size_t); int site; size_t n, count, size; } c[] = {
    {site_calloc_array, ACC_calloc_array, 32000, 10, 100},
    {site_calloc_one, ACC_calloc_one, 1000, 1, 30000},
    {site_calloc_tiny, ACC_calloc_tiny, 800000, 3, 7},
  };
  acc_start(rate, seed);
  for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
    acc_use(c[k].site);
    for (size_t i = 0, n = acc_scaled(c[k].n, div, 1); i < n; i++) {
      void *p = acc_check(c[k].fn(c[k].count, c[k].size));
      acc_alloc(c[k].site, c[k].count * c[k].size);
      keep_or_free(i, p, c[k].count * c[k].size, c[k].site);
    }
  }
}

/* Aligned requests count the requested size. */
static void w_aligned(uint64_t rate, uint64_t seed, size_t div)
{
  static const struct { void *(*fn)(size_t, size_t); int site; size_t n, align, size; } a[] = {
    {site_aligned_posix, ACC_aligned_posix, 160000, 64, 200},
    {site_aligned_c11, ACC_aligned_c11, 6400, 4096, 5000},
    {site_aligned_memalign, ACC_aligned_memalign, 32000, 256, 1000},
  };
  acc_start(rate, seed);
  for (size_t k = 0; k < sizeof a / sizeof a[0]; k++) {
    acc_use(a[k].site);
    for (size_t i = 0, n = acc_scaled(a[k].n, div, 1); i < n; i++) {
      void *p = acc_check(a[k].fn(a[k].align, a[k].size));
      if ((uintptr_t)p % a[k].align != 0) die("misaligned block");
      acc_alloc(a[k].site, a[k].size);
      keep_or_free(i, p, a[k].size, a[k].site);
    }
  }
}

/* Widely varying sizes on one stack: 8 B .. 1 MiB with density proportional to 1/s^2, so that every
 * octave holds the same bytes (and gets the same expected samples: ~8 per octave per run at rate
 * 524288) while the small sizes are many.  Log-uniform sizes would leave the object estimate to a
 * rare sample of a small block weighing thousands of objects (a skewed, unusable row). */
static void w_varied(uint64_t rate, uint64_t seed, size_t div)
{
  const double lo = 8, hi = 1 << 20;
  acc_start(rate, seed);
  acc_use(ACC_varied);
  for (size_t i = 0, n = acc_scaled(700000, div, 1); i < n; i++) {
    double u = (double)(next_random() >> 11) * 0x1.0p-53;
    size_t size = (size_t)(1 / (1 / lo - u * (1 / lo - 1 / hi)));
    void *p = acc_check(site_varied(size));
    acc_alloc(ACC_varied, size);
    keep_or_free(i, p, size, ACC_varied);
  }
}

/* The accounting rule for realloc the truth assumes (a choice the library makes; this is the rule
 * jemalloc and the library's own documentation use): realloc(p, n) is a free of p and an allocation of n
 * bytes at the realloc's site, sampled like any other, whether the block moves or not.
 * So a chain's blocks are in use only at the site of its last realloc.  Another rule changes this
 * function (and the variance: what is sampled with which p). */
static void count_realloc(int site, size_t size) { acc_alloc(site, size); }

/* Realloc in place: each chain stays inside mimalloc's 1024-byte block. */
static void w_realloc_inplace(uint64_t rate, uint64_t seed, size_t div)
{
  acc_start(rate, seed);
  acc_use(ACC_rip_malloc), acc_use(ACC_rip_grow1), acc_use(ACC_rip_grow2);
  for (size_t i = 0, n = acc_scaled(40000, div, 1); i < n; i++) {
    void *p = acc_check(site_rip_malloc(1000));
    acc_alloc(ACC_rip_malloc, 1000);
    p = acc_check(site_rip_grow1(p, 1010));
    count_realloc(ACC_rip_grow1, 1010);
    p = acc_check(site_rip_grow2(p, 1020));
    count_realloc(ACC_rip_grow2, 1020);
    acc_keep(p, 1020, ACC_rip_grow2);
  }
  acc_line("group chain site_rip_malloc site_rip_grow1 site_rip_grow2");
  if (rate == 65536) {
    acc_line("accept realloc-in-place-chain-inuse-space chain inuse_space rel 0.05");
    acc_line("accept realloc-in-place-chain-inuse-objects chain inuse_objects rel 0.05");
  }
}

/* realloc that moves (grow past the size class, shrink below half), shrinks in place, and
 * reallocarray (from NULL, then growing). */
static void w_realloc_mixed(uint64_t rate, uint64_t seed, size_t div)
{
  static const struct { int site; size_t size; } step[] = {
    {ACC_mx_grow, 4000}, {ACC_mx_grow2, 16000}, {ACC_mx_shrink, 9000}, {ACC_mx_shrink2, 600}};
  static void *(*const fn[])(void *, size_t) = {site_mx_grow, site_mx_grow2, site_mx_shrink, site_mx_shrink2};
  acc_start(rate, seed);
  acc_use(ACC_mx_malloc), acc_use(ACC_mx_array), acc_use(ACC_mx_array2);
  for (size_t k = 0; k < 4; k++) acc_use(step[k].site);
  for (size_t i = 0, n = acc_scaled(20000, div, 1); i < n; i++) {
    void *p = acc_check(site_mx_malloc(1000));
    acc_alloc(ACC_mx_malloc, 1000);
    for (size_t k = 0; k < 4; k++) {
      p = acc_check(fn[k](p, step[k].size));
      count_realloc(step[k].site, step[k].size);
    }
    acc_keep(p, 600, ACC_mx_shrink2);
    void *q = acc_check(site_mx_array(NULL, 100, 8));
    count_realloc(ACC_mx_array, 800);
    q = acc_check(site_mx_array2(q, 150, 8));
    count_realloc(ACC_mx_array2, 1200);
    acc_keep(q, 1200, ACC_mx_array2);
  }
  acc_line("group chain site_mx_malloc site_mx_grow site_mx_grow2 site_mx_shrink site_mx_shrink2");
  acc_line("group array site_mx_array site_mx_array2");
}

/* Bun's attribution case: 20000 rounds of 40 x 64 B and 1 x 1100 B, all kept.  The 64 B site holds
 * 2560/3660 = 0.69945 of the in-use bytes.  Not scaled down: the acceptance limit (+/- 0.01 on the mean
 * share) is for this size (sd of one run's share ~0.014 at rate 65536). */
static void w_bun(uint64_t rate, uint64_t seed, size_t div)
{
  (void)div;
  acc_start(rate, seed);
  acc_use(ACC_bun_small), acc_use(ACC_bun_large);
  for (size_t r = 0; r < 20000; r++) {
    for (int i = 0; i < 40; i++) {
      acc_keep(acc_check(site_bun_small(64)), 64, ACC_bun_small);
      acc_alloc(ACC_bun_small, 64);
    }
    acc_keep(acc_check(site_bun_large(1100)), 1100, ACC_bun_large);
    acc_alloc(ACC_bun_large, 1100);
  }
  acc_line("share small_share site_bun_small site_bun_large");
  if (rate == 65536) acc_line("accept bun-share small_share inuse_space abs 0.01");
}

/* Tiny blocks at tiny rates: two sites of SIZE bytes, alternating, one kept
 * and one freed at once, so each allocation follows one of the other site. */
static void w_tiny(uint64_t rate, uint64_t seed, size_t div, size_t size)
{
  acc_start(rate, seed);
  acc_use(ACC_tiny_kept), acc_use(ACC_tiny_freed);
  for (size_t i = 0, n = acc_scaled(100000, div, 1); i < n; i++) {
    acc_keep(acc_check(site_tiny_kept(size)), size, ACC_tiny_kept);
    acc_alloc(ACC_tiny_kept, size);
    free(acc_check(site_tiny_freed(size)));
    acc_alloc(ACC_tiny_freed, size);
  }
}

/* Weight rounding: sizes 1, 2, 3 and 5 bytes at rate 2, whose weights s/p are 2.54, 3.16, 3.86 and
 * 5.45 bytes (rounded to whole bytes: +18%, -5%, +3.6%, -8%). */
static void w_rounding(uint64_t rate, uint64_t seed, size_t div)
{
  static site_fn *const fn[] = {site_round_1, site_round_2, site_round_3, site_round_5};
  static const int site[] = {ACC_round_1, ACC_round_2, ACC_round_3, ACC_round_5};
  static const size_t size[] = {1, 2, 3, 5};
  acc_start(rate, seed);
  for (int k = 0; k < 4; k++) acc_use(site[k]);
  for (size_t i = 0, n = acc_scaled(50000, div, 1); i < n; i++) {
    for (int k = 0; k < 4; k++) {
      void *p = acc_check(fn[k](size[k]));
      acc_alloc(site[k], size[k]);
      keep_or_free(i, p, size[k], site[k]);
    }
  }
}

/* The peak workloads: 1600 blocks of 64 KiB (100 MiB) from site_peak_build, then, with
 * `turnovers`, a plateau over which a random one is freed and replaced at the same site as many times as
 * there are blocks, `turnovers` times over (a cache turning over: the in-use truth stays at 100 MiB, the
 * estimate's noise is drawn again each time); all freed; then 40 x 256 KiB from site_peak_keep, kept.
 * The true peak is the end of the build (100 MiB at site_peak_build, nothing at site_peak_keep); the
 * acceptance check is the mean peak estimate within 5% of it, for the site and in total. */
#define PEAK_BLOCKS 1600
static void *peak_blocks[PEAK_BLOCKS];

static void *peak_block(void)
{
  void *p = acc_check(site_peak_build(64 << 10));
  acc_alloc(ACC_peak_build, 64 << 10);
  acc_peak_live(ACC_peak_build, 64 << 10, 1);
  return p;
}

static void w_peak(uint64_t rate, uint64_t seed, size_t div, unsigned turnovers)
{
  acc_start(rate, seed);
  acc_use(ACC_peak_build), acc_use(ACC_peak_keep);
  size_t n = acc_scaled(PEAK_BLOCKS, div, 16);
  for (size_t i = 0; i < n; i++) peak_blocks[i] = peak_block();
  for (size_t k = 0; k < turnovers * n; k++) {
    size_t i = (size_t)(next_random() >> 33) % n;
    free(peak_blocks[i]);
    acc_peak_live(ACC_peak_build, 64 << 10, -1);
    peak_blocks[i] = peak_block();
  }
  for (size_t i = 0; i < n; i++) {
    free(peak_blocks[i]);
    acc_peak_live(ACC_peak_build, 64 << 10, -1);
  }
  for (size_t i = 0, m = acc_scaled(40, div, 4); i < m; i++) {
    acc_keep(acc_check(site_peak_keep(256 << 10)), 256 << 10, ACC_peak_keep);
    acc_alloc(ACC_peak_keep, 256 << 10);
    acc_peak_live(ACC_peak_keep, 256 << 10, 1);
  }
  if (rate == 65536) {
    const char *w = turnovers ? "plateau" : "transient";
    acc_line("accept peak-%s-site site_peak_build peak_space rel 0.05", w);
    acc_line("accept peak-%s-total [total] peak_space rel 0.05", w);
  }
}

static void w_peak_transient(uint64_t rate, uint64_t seed, size_t div) { w_peak(rate, seed, div, 0); }
static void w_peak_plateau(uint64_t rate, uint64_t seed, size_t div) { w_peak(rate, seed, div, 10); }

static uint64_t mono_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Lifetimes (run with MIMALLOC_PROF_LIFETIMES=1, as every workload is): 256 x 16 KiB from site_life_long
 * live while site_life_short allocates 200000 blocks of 1 KiB, each freed at once, then freed themselves;
 * 16 x 64 KiB from site_life_kept, kept.  A short block counts as temporary when the time from before its
 * malloc to after its free (CLOCK_MONOTONIC, the library's clock) is under ACC_TEMP_NS: the library's own
 * measure lies within that, so the block is then temporary for it too (a block descheduled in between
 * may be one for the library and not here: one weight, rarely).  A long block lives at least the short
 * phase, which must be longer than ACC_TEMP_NS. */
static void w_lifetimes(uint64_t rate, uint64_t seed, size_t div)
{
  static void *blocks[256];
  acc_start(rate, seed);
  acc_use(ACC_life_short), acc_use(ACC_life_long), acc_use(ACC_life_kept);
  for (size_t i = 0; i < 256; i++) {
    blocks[i] = acc_check(site_life_long(16 << 10));
    acc_alloc(ACC_life_long, 16 << 10);
  }
  uint64_t t0 = mono_ns();
  for (size_t i = 0, n = acc_scaled(200000, div, 1); i < n; i++) {
    uint64_t before = mono_ns();
    free(acc_check(site_life_short(1024)));
    if (mono_ns() - before < ACC_TEMP_NS) acc_temp(ACC_life_short, 1024);
    acc_alloc(ACC_life_short, 1024);
  }
  if (mono_ns() - t0 < ACC_TEMP_NS) die("the short phase took less than ACC_TEMP_NS");
  for (size_t i = 0; i < 256; i++) free(blocks[i]);
  temp_used[ACC_life_long] = temp_used[ACC_life_kept] = true;   /* no temporaries: truth 0 */
  for (size_t i = 0; i < 16; i++) {
    acc_keep(acc_check(site_life_kept(64 << 10)), 64 << 10, ACC_life_kept);
    acc_alloc(ACC_life_kept, 64 << 10);
  }
}

/* ---------------------------------------------------------------------------------------------------
   main
--------------------------------------------------------------------------------------------------- */

static uint64_t arg_u64(const char *s)
{
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0 || *end != '\0' || end == s) die("bad numeric argument");
  return v;
}

int main(int argc, char **argv)
{
  static const struct { const char *name; void (*run)(uint64_t, uint64_t, size_t); } workloads[] = {
    {"sizes", w_sizes}, {"churn", w_churn}, {"calloc", w_calloc}, {"aligned", w_aligned},
    {"cxx", acc_w_cxx}, {"xthread", acc_w_xthread}, {"varied", w_varied}, {"restart", acc_w_restart},
    {"realloc_inplace", w_realloc_inplace}, {"realloc_mixed", w_realloc_mixed}, {"bun", w_bun},
    {"rounding", w_rounding}, {"fork", acc_w_fork}, {"peak_transient", w_peak_transient},
    {"peak_plateau", w_peak_plateau}, {"lifetimes", w_lifetimes}, {"budget", acc_w_budget},
    {"zero", acc_w_zero},
  };
  if (argc < 5) die("usage: accuracy_work WORKLOAD[:ARG] RATE SEED PROFILE [SCALE]");
  const char *name = argv[1];
  uint64_t rate = arg_u64(argv[2]), seed = arg_u64(argv[3]);
  size_t div = argc > 5 ? (size_t)arg_u64(argv[5]) : 1;
  if (div == 0) die("SCALE must be at least 1");
  if (strncmp(name, "tiny:", 5) == 0) {
    size_t size = (size_t)arg_u64(name + 5);
    w_tiny(rate, seed, div, size);
  } else if (strncmp(name, "fork_children", 13) == 0 && (name[13] == '\0' || name[13] == ':')) {
    acc_w_fork_children(rate, seed, div, name[13] == ':' ? name + 14 : NULL);
  } else {
    size_t k = 0, n = sizeof workloads / sizeof workloads[0];
    while (k < n && strcmp(workloads[k].name, name) != 0) k++;
    if (k == n) die("unknown workload");
    workloads[k].run(rate, seed, div);
  }
  if (!mi_prof_dump(argv[4])) die("mi_prof_dump");
  print_truth(name, rate, seed);
  return 0;
}
