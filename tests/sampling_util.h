/* sampling_util.h - what the statistical suites share: seeded sessions, counters without assertions,
 * and the sampling probability the bounds are derived from.
 *
 * Check's own assertions allocate (each passing ck_assert sends a location message), and those
 * allocations could be sampled: these helpers assert only on failure, so a test can measure with no
 * passing assertion between mi_prof_start and its last counter read. */
#ifndef MPROF_TEST_SAMPLING_UTIL_H
#define MPROF_TEST_SAMPLING_UTIL_H

#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "mimalloc-prof.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

/* The suite's fixed seed, or MPROF_TEST_SEED=<n> from the environment (to check bounds on other seeds). */
static inline uint64_t test_seed_or(uint64_t fixed)
{
  const char *s = getenv("MPROF_TEST_SEED");
  uint64_t seed = s != NULL ? strtoull(s, NULL, 0) : 0;
  return seed != 0 ? seed : fixed;
}

/* Starts a session with `seed`; only a failure reaches Check. */
static inline void start_seeded(size_t rate, uint64_t seed)
{
  if (!mi_prof_start_seeded(rate, seed)) ck_abort_msg("mi_prof_start_seeded(%zu) failed: errno %d", rate, errno);
}

static inline mi_prof_stats_t stats_or_abort(void)
{
  mi_prof_stats_t st;
  if (!mi_prof_stats(&st, sizeof st)) ck_abort_msg("mi_prof_stats failed: errno %d", errno);
  return st;
}

/* Probability that an allocation of `size` bytes is sampled at `rate`, and the bytes its sample stands
 * for. */
static inline double prob_of(size_t size, size_t rate) { return -expm1(-(double)size / (double)rate); }
static inline double weight_of(size_t size, size_t rate) { return (double)size / prob_of(size, rate); }

/* Variance of the estimate of n allocations of `size` bytes: each contributes w = size/p with
 * probability p, so Var = n size^2 (1-p)/p for bytes and n (1-p)/p for objects. */
static inline double var_bytes(double n, size_t size, size_t rate)
{
  double p = prob_of(size, rate);
  return n * (double)size * (double)size * (1 - p) / p;
}
static inline double var_objects(double n, size_t size, size_t rate)
{
  double p = prob_of(size, rate);
  return n * (1 - p) / p;
}

/* Asserts |estimate - truth| <= 4 sd, naming what is compared. */
#define ck_assert_within_4sd(what, estimate, truth, variance)                                              \
  do {                                                                                                    \
    double e_ = (double)(estimate), t_ = (double)(truth), sd_ = sqrt(variance);                          \
    ck_assert_msg(fabs(e_ - t_) <= 4 * sd_, "%s: estimate %.0f, truth %.0f, 4 sd = %.1f (z = %.2f)", what, \
                  e_, t_, 4 * sd_, sd_ > 0 ? (e_ - t_) / sd_ : 0.0);                                     \
  } while (0)

#endif
