/* test_labels.c - the labels of heap profile samples (lib/sampler.c, lib/stacktab.c): `thread` and `bytes`
 * on every sample, the bound on label sets per stack, and with MIMALLOC_PROF_LIFETIMES the freed samples
 * with their `lifetime`, on tests/peak_probe's programs (MPROF_TEST_PEAK_PROBE): a fresh process each,
 * profiled with a fixed seed, its profile decoded and checked (pprof_util.c); `go tool pprof -tags` and
 * `-tagfocus` read the labels when go is on PATH.
 */
#include "config.h"

#include <check.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pprof_util.h"
#include "suites.h"

#if MPROF_PPROF

/* The name of the sample's innermost frame without "peak_site_" ("" when another function). */
static const char *site_of(const profile_t *p, const sample_t *s)
{
  const char *name = location_name(p, sample_leaf(p, s));
  return strncmp(name, "peak_site_", 10) == 0 ? name + 10 : "";
}

static bool is_freed(const sample_t *s)
{
  return s->n_value > V_FREED_SPACE && (s->value[V_FREED_OBJECTS] != 0 || s->value[V_FREED_SPACE] != 0);
}

/* `go tool pprof A B C PROGRAM FILE`'s stdout (c may be NULL; the test fails when pprof does). */
static char *go_output(const char *go, const char *a, const char *b, const char *c, const char *file)
{
  const char *program = probe_getenv("MPROF_TEST_PEAK_PROBE");
  probe_run_t r = go_pprof(go, c != NULL ? (const char *const[]){a, b, c, program, file, NULL}
                                         : (const char *const[]){a, b, program, file, NULL});
  probe_assert_exit0(&r, "go tool pprof");
  char *out = strdup(r.out);
  probe_run_free(&r);
  return out;
}

/* peak_probe threads (rate 65536, seed 7): threads named "alpha" and "beta" and an unnamed one allocate
 * 2000 x 4 KiB each at their own site, and main as many at peak_site_main.  E[samples] per site = 2000 p,
 * p = 1 - e^(-4096/65536) = 0.0606: 121, none with probability e^-121.  Each site's samples carry its
 * thread's label: the name where the thread has one, "tid N" for the unnamed one (its kernel id), the
 * process's name for main; and bytes = 4096 (a power of two: its own bucket). */
START_TEST(labels_threads)
{
  profile_t *p;
  char path[PATH_MAX], comm[32], gamma[32];
  probe_run_t r = run_peak_probe("threads", "65536", "7", NULL, &p, path);
  out_string(&r, "comm", comm, sizeof comm);
  snprintf(gamma, sizeof gamma, "tid %" PRIu64, probe_value(&r, "gamma_tid"));
  static const char *const sites[] = {"alpha", "beta", "gamma", "main"};
  const char *want[] = {"alpha", "beta", gamma, comm};
  size_t seen[4] = {0};
  for (size_t i = 0; i < p->n_sample; i++) {
    const sample_t *s = p->sample[i];
    for (size_t k = 0; k < 4; k++) {
      if (strcmp(site_of(p, s), sites[k]) != 0) continue;
      const char *thread = label_str(p, s, "thread");
      ck_assert_msg(thread != NULL && strcmp(thread, want[k]) == 0, "peak_site_%s: thread %s, want %s",
                    sites[k], thread != NULL ? thread : "(none)", want[k]);
      int64_t bytes;
      ck_assert(label_num(p, s, "bytes", &bytes));
      ck_assert_int_eq(bytes, 4096);
      seen[k]++;
    }
  }
  for (size_t k = 0; k < 4; k++) ck_assert_msg(seen[k] >= 1, "peak_site_%s: no sample", sites[k]);

  char go[PATH_MAX];
  if (go_find(go, sizeof go)) {                        /* without go: skipped */
    char *tags = go_output(go, "-tags", "-sample_index=inuse_space", NULL, path);
    ck_assert_msg(strstr(tags, " thread: ") != NULL && strstr(tags, ": alpha\n") != NULL &&
                  strstr(tags, ": beta\n") != NULL && strstr(tags, " bytes: ") != NULL, "-tags:\n%s", tags);
    free(tags);
    char *top = go_output(go, "-top", "-tagfocus=thread=alpha", NULL, path);
    ck_assert_msg(top_flat_percent(top, "peak_site_alpha") > 0 && top_flat_percent(top, "peak_site_beta") < 0,
                  "-tagfocus=thread=alpha -top:\n%s", top);
    free(top);
  }
  test_profile_free(p);
  probe_run_free(&r);
}
END_TEST

/* The size's bucket: all but its three highest bits cleared. */
static int64_t bucket(int64_t size)
{
  int drop = 0;
  while ((size >> drop) >= 8) drop++;
  return size >> drop << drop;
}

/* peak_probe sizes at rate 1 (seed 3): one stack allocates one block of each size 1..4096, whose buckets
 * are 44 (1..7, four per power of two from 8 to 2048, and 4096); every block of 8 bytes or more is
 * sampled (p = 1 - e^-8 at least: all 4089 of them with probability 0.9986; below 8 bytes some are not,
 * which does not matter here).  The stack gets MPROF_LABEL_SETS = 32 label sets of its own buckets, in
 * the order of the sizes, and the others go to sets of thread "[other]", each a power of two.  Nothing
 * is lost: the sets' in-use bytes add up to the sizes allocated, sum(1..4096) = 8390656, within the
 * estimate's error (blocks under 8 bytes: variance sum s^2 (1-p)/p < 1.3 bytes^2) and pprof's rounding
 * of nothing (bytes are whole). */
START_TEST(labels_sizes_bounded)
{
  profile_t *p;
  char path[PATH_MAX];
  probe_run_t r = run_peak_probe("sizes", "1", "3", NULL, &p, path);
  size_t own = 0, other = 0;
  int64_t inuse = 0, last_own = 0;
  for (size_t i = 0; i < p->n_sample; i++) {
    const sample_t *s = p->sample[i];
    if (strcmp(site_of(p, s), "sizes") != 0) continue;
    const char *thread = label_str(p, s, "thread");
    int64_t bytes;
    ck_assert(thread != NULL && label_num(p, s, "bytes", &bytes));
    inuse += s->value[V_INUSE_SPACE];
    if (strcmp(thread, "[other]") == 0) {
      ck_assert_msg((bytes & (bytes - 1)) == 0, "[other] bytes %" PRId64, bytes);
      other++;
    } else {
      ck_assert_int_eq(bytes, bucket(bytes));
      if (bytes > last_own) last_own = bytes;
      own++;
    }
  }
  ck_assert_uint_eq(own, 32);
  ck_assert_uint_ge(other, 1);
  ck_assert_uint_le(other, 64);
  ck_assert_int_le(llabs(inuse - 8390656), 8);
  test_profile_free(p);
  probe_run_free(&r);
}
END_TEST

/* peak_probe lifetimes with MIMALLOC_PROF_LIFETIMES=1 (rate 65536, seed 11): peak_site_long keeps 64 x 64
 * KiB while peak_site_short allocates 100000 x 1 KiB, each freed at once; then the long blocks are freed;
 * 16 x 64 KiB from peak_site_kept stay.  Eight sample types; a freed sample (values in freed_* only) has
 * a lifetime label, no other sample has one.  Each site's freed estimate is the sum of the weights of its
 * freed samples: exactly its allocated estimate when all its blocks were freed, 0 when none was.
 * Lifetimes: every long block lived at least long_min_ns (the program timed the short phase on the
 * library's clock, CLOCK_MONOTONIC), so each of its freed samples is in that bucket or a later one,
 * exactly.  A short block lives from its sample being recorded to its free, about a microsecond; a
 * lifetime of 1 ms or more needs the thread descheduled in that window, which a loaded 2-core machine
 * does to a few of the E = 100000 (1 - e^(-1/64)) = 1550 samples at most: at least 99% of the short
 * site's freed bytes must show under 1 ms (pprof's -tagfocus=lifetime=:1ms keeps them). */
START_TEST(labels_lifetimes)
{
  profile_t *p;
  char path[PATH_MAX];
  const char *const vars[] = {"MIMALLOC_PROF_LIFETIMES=1", NULL};
  probe_run_t r = run_peak_probe("lifetimes", "65536", "11", vars, &p, path);
  ck_assert_uint_eq(p->n_sample_type, N_VALUES);
  uint64_t min_ns = probe_value(&r, "long_min_ns"), min_floor = 1;
  while (min_floor * 2 <= min_ns) min_floor *= 2;
  int64_t freed[3] = {0}, alloc[3] = {0}, short_fast = 0;
  static const char *const sites[] = {"short", "long", "kept"};
  for (size_t i = 0; i < p->n_sample; i++) {
    const sample_t *s = p->sample[i];
    int64_t lifetime;
    bool has_lifetime = label_num(p, s, "lifetime", &lifetime);
    ck_assert_int_eq(has_lifetime, is_freed(s));
    for (size_t k = 0; k < 3; k++) {
      if (strcmp(site_of(p, s), sites[k]) != 0) continue;
      freed[k] += s->value[V_FREED_SPACE];
      alloc[k] += s->value[V_ALLOC_SPACE];
      if (has_lifetime && k == 0 && lifetime < 1000000) short_fast += s->value[V_FREED_SPACE];
      if (has_lifetime && k == 1)
        ck_assert_msg((uint64_t)lifetime >= min_floor, "long block's lifetime %" PRId64 " < %" PRIu64,
                      lifetime, min_floor);
    }
  }
  ck_assert_int_gt(freed[0], 0);
  ck_assert_int_eq(freed[0], alloc[0]);
  ck_assert_int_gt(freed[1], 0);
  ck_assert_int_eq(freed[1], alloc[1]);
  ck_assert_int_eq(freed[2], 0);
  ck_assert_msg(short_fast >= freed[0] / 100 * 99, "short: %" PRId64 " of %" PRId64 " freed bytes under 1 ms",
                short_fast, freed[0]);

  char go[PATH_MAX];
  if (go_find(go, sizeof go)) {                        /* without go: skipped */
    char *top = go_output(go, "-top", "-sample_index=freed_space", "-tagfocus=lifetime=:1ms", path);
    ck_assert_msg(top_flat_percent(top, "peak_site_short") > 0 && top_flat_percent(top, "peak_site_long") < 0,
                  "-sample_index=freed_space -tagfocus=lifetime=:1ms:\n%s", top);
    free(top);
  }
  test_profile_free(p);
  probe_run_free(&r);
}
END_TEST

/* Without MIMALLOC_PROF_LIFETIMES: six sample types and no lifetime label anywhere. */
START_TEST(labels_lifetimes_off)
{
  profile_t *p;
  char path[PATH_MAX];
  probe_run_t r = run_peak_probe("lifetimes", "65536", "11", NULL, &p, path);
  ck_assert_uint_eq(p->n_sample_type, V_FREED_OBJECTS);
  for (size_t i = 0; i < p->n_sample; i++) {
    int64_t lifetime;
    ck_assert(!label_num(p, p->sample[i], "lifetime", &lifetime));
  }
  test_profile_free(p);
  probe_run_free(&r);
}
END_TEST

Suite *labels_suite(void)
{
  Suite *s = suite_create("labels");
  TCase *tc = tcase_create("labels");
  tcase_set_timeout(tc, 120);
  tcase_add_unchecked_fixture(tc, run_dir_setup, run_dir_teardown);
  tcase_add_test(tc, labels_threads);
  tcase_add_test(tc, labels_sizes_bounded);
  tcase_add_test(tc, labels_lifetimes);
  tcase_add_test(tc, labels_lifetimes_off);
  suite_add_tcase(s, tc);
  return s;
}

#endif
