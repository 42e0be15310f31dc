/* accuracy_edges.c - the workloads of bench/accuracy at the edges of the sampling rule: a profiler memory
 * budget far too small for the program's stacks (budget), the children of one forking parent
 * (fork_children), and requests of 0 bytes (zero).  Truth is counted as in accuracy_work.c (accuracy.h);
 * the sizes come from a fixed generator of this file, the same in every run.
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mimalloc-prof.h"

#include "accuracy.h"

static uint64_t sizes_state = 0x2545f4914f6cdd1dull;

static uint64_t next_size_random(void)
{
  sizes_state ^= sizes_state << 13, sizes_state ^= sizes_state >> 7, sizes_state ^= sizes_state << 17;
  return sizes_state;
}

/* 64 .. 4159 bytes. */
static size_t next_size(void) { return 64 + (size_t)(next_size_random() >> 52); }

/* ---------------------------------------------------------------------------------------------------
   budget: 50,000 distinct stacks under MIMALLOC_PROF_MAX_BYTES=1m (bench/accuracy sets it)
--------------------------------------------------------------------------------------------------- */

/* Each stack is a path through BUDGET_LEVELS levels of two functions, budget_left and budget_right (the
 * path's bits, innermost first), ending in site_budget: 2^16 distinct stacks of 35 frames or more.
 * BUDGET_ROUNDS rounds over BUDGET_PATHS paths allocate 64..4159 bytes each (2.1 KB on average: 105 MB
 * a round), and one block in `keep` is kept, keep = 2^18 / RATE (at least 2): about 1600 blocks are
 * live samples at the dump at any rate (6.5 MB kept at rate 4096, 105 MB at 65536), which the record
 * table holds in a quarter of the budget.  The stacks sampled want far more than the budget (each about
 * 1.7 KiB with its label set, its lifetime buckets and their share of a dump; ~10,000 stacks are sampled
 * at rate 65536, all 50,000 at 4096), so most samples are recorded under "[dropped (memory)]":
 * site_budget's own row shares its samples with that one and is not gated ("spills"), [total] is, and
 * the acceptance check is [total]'s in-use within 5% of the truth. */
#define BUDGET_LEVELS 16
#define BUDGET_PATHS  50000u
#define BUDGET_ROUNDS 4

ACC_SITE void *site_budget(size_t n) { return malloc(n); }

static void *budget_walk(unsigned path, int level, size_t size);
ACC_SITE void *budget_left(unsigned path, int level, size_t size) { return budget_walk(path, level, size); }
ACC_SITE void *budget_right(unsigned path, int level, size_t size) { return budget_walk(path, level, size); }

static __attribute__((noinline)) void *budget_walk(unsigned path, int level, size_t size)
{
  if (level == 0) return site_budget(size);
  return (path & 1 ? budget_right : budget_left)(path >> 1, level - 1, size);
}

void acc_w_budget(uint64_t rate, uint64_t seed, size_t div)
{
  size_t keep = rate < ((uint64_t)1 << 17) ? (size_t)(((uint64_t)1 << 18) / rate) : 2;
  acc_start(rate, seed);
  acc_use(ACC_budget);
  acc_spills(ACC_budget);
  for (size_t r = 0, rounds = acc_scaled(BUDGET_ROUNDS, div, 1); r < rounds; r++) {
    for (unsigned i = 0; i < BUDGET_PATHS; i++) {
      size_t size = next_size();
      void *p = acc_check(budget_walk(i, BUDGET_LEVELS, size));
      acc_alloc(ACC_budget, size);
      if (next_size_random() % keep == 0) acc_keep(p, size, ACC_budget);
      else free(p);
    }
  }
  mi_prof_stats_t st;
  if (!mi_prof_stats(&st, sizeof st)) acc_die("mi_prof_stats");
  acc_line("info dropped_memory %llu", (unsigned long long)st.dropped[MI_PROF_DROP_MEMORY]);
  acc_line("info live_samples %llu", (unsigned long long)st.live_samples);
  acc_line("accept budget-inuse-space-%llu [total] inuse_space rel 0.05", (unsigned long long)rate);
  acc_line("accept budget-inuse-objects-%llu [total] inuse_objects rel 0.05", (unsigned long long)rate);
}

/* ---------------------------------------------------------------------------------------------------
   fork_children: 100 children of one parent
--------------------------------------------------------------------------------------------------- */

/* The parent samples a while at site_fork_parent (so its generator is mid-stream), then forks
 * FORK_CHILDREN children one after the other.  Each child allocates CHILD_N blocks of 64..4159 bytes at
 * site_fork_child (the same sizes in every child: the generator is a copy of the parent's), keeps one in
 * 8 until it has read mi_prof_stats again, and sends the parent the change of its four estimates and a
 * hash of which of its allocations were sampled (the observer numbers them), then exits.  The parent adds
 * the children's estimates to site_fork_child's row ("estimate" lines: a child's freed estimate is its
 * allocated less its in-use one, exactly what its profile would count) and their truth (each child's, as
 * many times).  So the row is the sum of 100 children: unbiased when each child is, and with sd theory
 * (the sum of 100 independent children's variances) only if they are independent; were they copies of
 * each other its sd would be 10 times that (check fork-children-independent: sd meas within what
 * chi^2 allows).  The distinct sample sets among a run's children are info fork_children_distinct, and
 * every run must have 100 (check fork-children-distinct).  ARG "entropy": the session is started with
 * seed 0 (the kernel's entropy; the run's seed is not used). */
#define FORK_CHILDREN 100
#define CHILD_N       20000u
#define CHILD_KEEP    8

ACC_SITE void *site_fork_parent(size_t n) { return malloc(n); }
ACC_SITE void *site_fork_child(size_t n) { return malloc(n); }

typedef struct child_report_s {
  uint64_t alloc_objects, alloc_bytes, inuse_objects, inuse_bytes, hash;
} child_report_t;

static uint64_t child_index, child_hash;
static void *child_kept[CHILD_N / CHILD_KEEP + 1];   /* static: never sampled */

static void child_on_sample(void *p, size_t size, size_t weight, size_t rate, uint64_t tid, void *arg)
{
  (void)p, (void)size, (void)weight, (void)rate, (void)tid, (void)arg;
  child_hash = (child_hash ^ child_index) * 0x100000001b3ull;
}

static _Noreturn void fork_child(int fd)
{
  mi_prof_stats_t a, b;
  if (!mi_prof_stats(&a, sizeof a)) _exit(1);
  child_hash = 0xcbf29ce484222325ull;
  size_t kept = 0;
  for (child_index = 0; child_index < CHILD_N; child_index++) {
    void *p = site_fork_child(next_size());
    if (p == NULL) _exit(1);
    if (child_index % CHILD_KEEP == 0) child_kept[kept++] = p;
    else free(p);
  }
  if (!mi_prof_stats(&b, sizeof b)) _exit(1);
  child_report_t out = {b.alloc_objects - a.alloc_objects, b.alloc_bytes - a.alloc_bytes,
                        b.inuse_objects - a.inuse_objects, b.inuse_bytes - a.inuse_bytes, child_hash};
  for (size_t i = 0; i < kept; i++) free(child_kept[i]);
  _exit(write(fd, &out, sizeof out) == (ssize_t)sizeof out ? 0 : 1);
}

void acc_w_fork_children(uint64_t rate, uint64_t seed, size_t div, const char *arg)
{
  (void)div;                            /* 2 M allocations in children: not scaled */
  bool entropy = arg != NULL && strcmp(arg, "entropy") == 0;
  if (arg != NULL && !entropy) acc_die("fork_children: the argument is \"entropy\" or nothing");
  int fds[2];
  if (pipe(fds) != 0) acc_die("pipe");
  acc_start(rate, entropy ? 0 : seed);
  acc_use(ACC_fork_parent), acc_use(ACC_fork_child);
  if (!mi_prof_set_observer(child_on_sample, NULL, NULL)) acc_die("mi_prof_set_observer");
  for (size_t i = 0; i < 4000; i++) {
    void *p = acc_check(site_fork_parent(256));
    acc_alloc(ACC_fork_parent, 256);
    if (i % 2 == 0) acc_keep(p, 256, ACC_fork_parent);
    else free(p);
  }
  const uint64_t sizes_at_fork = sizes_state;
  static child_report_t got[FORK_CHILDREN];
  child_report_t sum = {0};
  for (int c = 0; c < FORK_CHILDREN; c++) {
    pid_t pid = fork();
    if (pid < 0) acc_die("fork");
    if (pid == 0) fork_child(fds[1]);
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
      acc_die("a child failed");
    if (read(fds[0], &got[c], sizeof got[c]) != (ssize_t)sizeof got[c]) acc_die("a child's report");
    sum.alloc_objects += got[c].alloc_objects, sum.alloc_bytes += got[c].alloc_bytes;
    sum.inuse_objects += got[c].inuse_objects, sum.inuse_bytes += got[c].inuse_bytes;
  }
  close(fds[0]), close(fds[1]);
  if (!mi_prof_set_observer(NULL, NULL, NULL)) acc_die("mi_prof_set_observer");
  for (int c = 0; c < FORK_CHILDREN; c++) {   /* each child's truth: the same sizes */
    sizes_state = sizes_at_fork;
    for (size_t i = 0; i < CHILD_N; i++) {
      size_t size = next_size();
      acc_alloc(ACC_fork_child, size);
      if (i % CHILD_KEEP == 0) acc_live(ACC_fork_child, size);
    }
  }
  int distinct = 0;
  for (int c = 0; c < FORK_CHILDREN; c++) {
    bool seen = false;
    for (int d = 0; d < c && !seen; d++) seen = got[d].hash == got[c].hash;
    distinct += !seen;
  }
  acc_line("estimate site_fork_child %llu %llu %llu %llu", (unsigned long long)sum.alloc_objects,
           (unsigned long long)sum.alloc_bytes, (unsigned long long)sum.inuse_objects,
           (unsigned long long)sum.inuse_bytes);
  acc_line("info fork_children_distinct %d", distinct);
  acc_line("require fork-children-distinct fork_children_distinct %d", FORK_CHILDREN);
  acc_line("accept fork-children-independent site_fork_child alloc_space sd 0");
  acc_line("accept fork-children-independent site_fork_child inuse_space sd 0");
}

/* ---------------------------------------------------------------------------------------------------
   zero: requests of 0 bytes count in no total
--------------------------------------------------------------------------------------------------- */

/* mimalloc_prof(3): a request of 0 bytes is never sampled and counts in no total, so the objects
 * estimates count requests of at least one byte.  malloc(0), calloc(0, 16), calloc(16, 0),
 * posix_memalign(64, 0) and realloc(p, 0) each from a site whose truth is 0 (every estimate there must be
 * exactly 0), half of their blocks kept; realloc(p, 0)'s free half does count: p, from site_zero_base,
 * leaves its in-use.  site_zero_mix makes a 0-byte request and one of 1..4096 bytes in turn: its truth
 * is the latter only, and its estimates must be unbiased for it. */
ACC_SITE void *site_zero_malloc(void) { return malloc(0); }
ACC_SITE void *site_zero_calloc(size_t n, size_t size) { return calloc(n, size); }
ACC_SITE void *site_zero_aligned(void)
{
  void *p = NULL;
  return posix_memalign(&p, 64, 0) == 0 ? p : NULL;
}
ACC_SITE void *site_zero_base(size_t n) { return malloc(n); }
ACC_SITE void *site_zero_realloc(void *p) { return realloc(p, 0); }
ACC_SITE void *site_zero_mix(size_t n) { return malloc(n); }

/* 0-byte blocks kept live until the exit, outside the truth (acc_keep would count them in use). */
static void *zero_held[5 * 50000];
static size_t n_zero_held;

static void *zero_check(void *p)
{
  if (p == NULL) acc_die("a 0-byte request failed");
  return p;                           /* not touched: it has no byte */
}

static void zero_keep(size_t i, void *p)
{
  if (i % 2 == 0 && n_zero_held < sizeof zero_held / sizeof zero_held[0]) zero_held[n_zero_held++] = p;
  else free(p);
}

void acc_w_zero(uint64_t rate, uint64_t seed, size_t div)
{
  static const int zero_sites[] = {ACC_zero_malloc, ACC_zero_calloc, ACC_zero_aligned, ACC_zero_realloc};
  acc_start(rate, seed);
  for (size_t k = 0; k < sizeof zero_sites / sizeof zero_sites[0]; k++) acc_use(zero_sites[k]);
  acc_use(ACC_zero_base), acc_use(ACC_zero_mix);
  for (size_t i = 0, n = acc_scaled(100000, div, 1); i < n; i++) {
    zero_keep(i, zero_check(site_zero_malloc()));
    zero_keep(i, zero_check(site_zero_calloc(i % 4 < 2 ? 0 : 16, i % 4 < 2 ? 16 : 0)));
    zero_keep(i, zero_check(site_zero_aligned()));
    void *p = acc_check(site_zero_base(1000));
    acc_alloc(ACC_zero_base, 1000);
    zero_keep(i, zero_check(site_zero_realloc(p)));
    zero_keep(i, zero_check(site_zero_mix(0)));
    size_t size = 1 + (size_t)(next_size_random() >> 52);
    p = acc_check(site_zero_mix(size));
    acc_alloc(ACC_zero_mix, size);
    if (i % 2 == 0) acc_keep(p, size, ACC_zero_mix);
    else free(p);
  }
}
