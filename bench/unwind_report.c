/* unwind_report.c - an LD_PRELOAD-able reporter for bench/unwind.sh: how long the run took, how many
 * samples it took and how deep their stacks are.
 *
 * Preload it after the library (LD_PRELOAD="libmimalloc-prof.so.0 unwind_report.so").  Its constructor
 * reads the clocks; its destructor reads them again (so the time covers the program from its start-up
 * constructors to exit, not exec or the dynamic loader, nor the visit below), then finds mi_prof_stats
 * and mi_prof_visit with dlsym (no link-time dependency on the library) and appends one line of
 * key=value pairs to $UNWIND_REPORT_OUT (stderr when unset):
 *
 *   found            1: the library's mi_prof_stats and mi_prof_visit were found
 *   wall_ns cpu_ns   constructor to destructor: CLOCK_MONOTONIC and CLOCK_PROCESS_CPUTIME_ID
 *   rate samples dropped   from mi_prof_stats (rate 0: not running)
 *   stacks           stacks visited (run with MIMALLOC_PROF_ACCUM=1 to see every stack sampled)
 *   est_samples      samples estimated from the stacks' counters (see below), to check against samples
 *   med_sample mean_sample   depth (frames per stack), weighted per sample (estimated)
 *   med_stack mean_stack max  depth per distinct stack, unweighted; the deepest stack
 *
 * mi_prof_visit gives per stack the estimated objects O and bytes B allocated there, not its sample
 * count.  A sample of s bytes at rate R adds 1/p objects and s/p bytes, p = 1 - exp(-s/R); if every
 * sample of a stack had the same size, s = B/O and the stack's sample count is n = O * p(B/O): exact for
 * single-size stacks.  With mixed sizes it overestimates (p is concave), and so does n = B/R (each
 * sample adds B/R = x/(1 - exp(-x)) >= 1, x = s/R, about 1 + x/2 for s << R); the smaller of the two is
 * taken.  The sum est_samples, next to the true samples, shows how close the weights are.
 *
 *   at_cap           share of samples (estimated) whose stack has MIMALLOC_PROF_BT_MAX (default 64)
 *                    frames: cut off, so deeper than reported
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mimalloc-prof.h>

#define MAX_DEPTH 256                      /* MIMALLOC_PROF_BT_MAX's upper bound */

static struct timespec wall0, cpu0;
static pid_t pid0;                         /* a forked child that exits reports nothing */
static double rate;                        /* sample rate of the session */
static double w_hist[MAX_DEPTH + 1];       /* estimated samples per depth */
static unsigned long long s_hist[MAX_DEPTH + 1]; /* stacks per depth */

static long long ns(const struct timespec *a, const struct timespec *b)
{
  return (long long)(b->tv_sec - a->tv_sec) * 1000000000LL + (b->tv_nsec - a->tv_nsec);
}

__attribute__((constructor)) static void report_start(void)
{
  pid0 = getpid();
  clock_gettime(CLOCK_MONOTONIC, &wall0);
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu0);
}

static bool visit_one(void *const *frames, size_t depth, const mi_prof_stack_counts_t *c, void *arg)
{
  (void)frames, (void)arg;
  if (depth > MAX_DEPTH) depth = MAX_DEPTH;
  double n = (double)c->alloc_bytes / rate;          /* >= the sample count, close when s << R */
  if (c->alloc_objects != 0) {
    double s = (double)c->alloc_bytes / (double)c->alloc_objects;
    double n_same = (double)c->alloc_objects * -expm1(-s / rate);   /* >= it too (p is concave) */
    if (n_same < n) n = n_same;
  }
  w_hist[depth] += n;
  s_hist[depth]++;
  return true;
}

/* The depth at which the cumulative weight first reaches half the total (lower median). */
static size_t median_d(const double *w)
{
  double total = 0, acc = 0;
  for (size_t d = 0; d <= MAX_DEPTH; d++) total += w[d];
  for (size_t d = 0; d <= MAX_DEPTH; d++) {
    acc += w[d];
    if (total > 0 && acc >= total / 2) return d;
  }
  return 0;
}

__attribute__((destructor)) static void report_end(void)
{
  struct timespec wall1, cpu1;
  clock_gettime(CLOCK_MONOTONIC, &wall1);
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu1);
  if (getpid() != pid0) return;

  typedef bool stats_t(mi_prof_stats_t *, size_t);
  typedef bool visit_t(mi_prof_visit_fn *, void *);
  stats_t *stats_fn = (stats_t *)dlsym(RTLD_DEFAULT, "mi_prof_stats");
  visit_t *visit_fn = (visit_t *)dlsym(RTLD_DEFAULT, "mi_prof_visit");
  mi_prof_stats_t st;
  memset(&st, 0, sizeof st);
  if (stats_fn != NULL) stats_fn(&st, sizeof st);
  unsigned long long dropped = 0;
  for (int i = 0; i < MI_PROF_DROP_REASONS; i++) dropped += st.dropped[i];

  rate = (double)st.sample_rate;
  if (visit_fn != NULL && st.sample_rate != 0) visit_fn(visit_one, NULL);

  double est = 0, wsum = 0;
  double s_w[MAX_DEPTH + 1];
  unsigned long long stacks = 0, ssum = 0;
  size_t max = 0;
  for (size_t d = 0; d <= MAX_DEPTH; d++) {
    est += w_hist[d];
    wsum += w_hist[d] * (double)d;
    stacks += s_hist[d];
    ssum += s_hist[d] * d;
    s_w[d] = (double)s_hist[d];
    if (s_hist[d] != 0) max = d;
  }
  const char *bt = getenv("MIMALLOC_PROF_BT_MAX");
  size_t cap = bt != NULL && atoi(bt) > 0 ? (size_t)atoi(bt) : 64;
  double at_cap = 0;
  for (size_t d = cap < MAX_DEPTH ? cap : MAX_DEPTH; d <= MAX_DEPTH; d++) at_cap += w_hist[d];
  char line[512];
  int len = snprintf(line, sizeof line,
                     "found=%d wall_ns=%lld cpu_ns=%lld rate=%llu samples=%llu dropped=%llu stacks=%llu "
                     "est_samples=%.0f med_sample=%zu mean_sample=%.2f med_stack=%zu mean_stack=%.2f max=%zu at_cap=%.3f\n",
                     stats_fn != NULL && visit_fn != NULL, ns(&wall0, &wall1), ns(&cpu0, &cpu1),
                     (unsigned long long)st.sample_rate, (unsigned long long)st.samples, dropped, stacks, est,
                     median_d(w_hist), est > 0 ? wsum / est : 0.0, median_d(s_w),
                     stacks ? (double)ssum / (double)stacks : 0.0, max, est > 0 ? at_cap / est : 0.0);
  const char *path = getenv("UNWIND_REPORT_OUT");
  int fd = path != NULL ? open(path, O_WRONLY | O_CREAT | O_APPEND, 0644) : 2;
  if (fd >= 0 && len > 0) {
    ssize_t w = write(fd, line, (size_t)len);
    (void)w;
  }
  if (path != NULL && fd >= 0) close(fd);
}
