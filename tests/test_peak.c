/* test_peak.c - the heap over time (lib/peak.c): peak_objects/peak_space in the profiles, mi_prof_stats's
 * peak and when, mi_prof_reset starting a new peak, and the timeline, on tests/peak_probe's programs
 * (MPROF_TEST_PEAK_PROBE), whose peaks are known: each run is a fresh process, profiled with a fixed
 * seed, its profile decoded and checked (pprof_util.c); `go tool pprof` reads the new sample types when
 * go is on PATH.
 *
 * Sites are named by the profile (dladdr) as peak_site_<name>.  The program's phases are timed on
 * CLOCK_REALTIME by the program itself ("t_build" ... lines), which the peak's time and the timeline's
 * points are checked against.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mimalloc-prof.h"
#include "pprof_util.h"
#include "suites.h"

#if MPROF_PPROF

#define MIB (1024.0 * 1024.0)

typedef Perftools__Profiles__Timeline timeline_t;

/* The peak comment's bytes and time ("mimalloc-prof peak: BYTES bytes at TIME_NS"). */
static void peak_comment(const profile_t *p, uint64_t *bytes, uint64_t *time_ns)
{
  for (size_t i = 0; i < p->n_comment; i++) {
    if (sscanf(test_pstr(p, p->comment[i]), "mimalloc-prof peak: %" SCNu64 " bytes at %" SCNu64, bytes,
               time_ns) == 2)
      return;
  }
  ck_abort_msg("no peak comment");
}

/* The sum of value v over every sample, and over the samples of site peak_site_<name>. */
static int64_t total(const profile_t *p, int v)
{
  int64_t sum[N_VALUES];
  profile_sums(p, sum);
  return sum[v];
}

static int64_t site(const profile_t *p, const char *name, int v)
{
  char fn[64];
  snprintf(fn, sizeof fn, "peak_site_%s", name);
  return leaf_total(p, fn, v);
}

static double rel(int64_t value, double truth) { return fabs((double)value - truth) / truth; }

/* The peak's checks common to the transient and plateau programs: the sum of peak_space is the peak in
 * the comment and in mi_prof_stats, exactly, and it was reached while the build phase ran. */
static void assert_peak_consistent(const probe_run_t *r, const profile_t *p, const char *until)
{
  uint64_t bytes, when;
  peak_comment(p, &bytes, &when);
  ck_assert_int_eq(total(p, V_PEAK_SPACE), (int64_t)bytes);
  ck_assert_uint_eq(probe_value(r, "peak_inuse_bytes"), bytes);
  ck_assert_uint_eq(probe_value(r, "peak_time_ns"), when);
  ck_assert_uint_ge(when, probe_value(r, "t_build"));
  ck_assert_uint_le(when, probe_value(r, until));
  /* objects: rounded to whole objects per sample by the writer, by the stats once */
  ck_assert_uint_le((uint64_t)llabs(total(p, V_PEAK_OBJECTS) - (int64_t)probe_value(r, "peak_inuse_objects")),
                    p->n_sample);
}

/* `go tool pprof -top -sample_index=TYPE`: the flat% of peak_site_<name> (-1 when absent). */
static double go_top_percent(const char *go, const char *file, const char *type, const char *name)
{
  char index[64], fn[64];
  snprintf(index, sizeof index, "-sample_index=%s", type);
  snprintf(fn, sizeof fn, "peak_site_%s", name);
  const char *const args[] = {"-top", index, probe_getenv("MPROF_TEST_PEAK_PROBE"), file, NULL};
  probe_run_t top = go_pprof(go, args);
  probe_assert_exit0(&top, "go tool pprof -top");
  double pct = top_flat_percent(top.out, fn);
  probe_run_free(&top);
  return pct;
}

/* The transient program (peak_probe transient, rate 65536, seed 22): peak_site_build allocates 1600 x 64
 * KiB and frees them all, then peak_site_keep keeps 40 x 256 KiB.  Half A's estimate (lib/peak.c) only
 * rises while the build runs and only falls while its blocks are freed, so the peak's moment is A's last
 * sample of the build, and the peak is half B's estimate of what was in use then.  A half samples a 64 KiB
 * block with p = 1 - e^(-1/2) = 0.393, weight s/p, variance s^2 (1-p)/p = 1.54 s^2 per block: sd = 64 KiB
 * * sqrt(1600 * 1.54) = 3.25 MB = 3.1% of 100 MiB, 4 sd = 12.4%; the blocks of the build after A's last
 * sample are missing from it, E = (1-p)/p = 1.5 blocks (0.1%), P(more than 16) = 0.61^16 < 4e-4: 13% in
 * all.  peak_site_keep had nothing at the peak, and peak_site_build nothing at the dump, exactly.
 * peak_site_keep's in-use (the full estimate): 256 KiB blocks, p = 1 - e^-4 = 0.982, sd = 256 KiB *
 * sqrt(40 * 0.0187) = 2.16% of 10 MiB, 4 sd = 8.7%. */
START_TEST(peak_transient)
{
  profile_t *p;
  char path[PATH_MAX];
  probe_run_t r = run_peak_probe("transient", "65536", "22", NULL, &p, path);
  ck_assert_uint_eq(p->n_sample_type, 6);
  assert_peak_consistent(&r, p, "t_built");
  ck_assert_double_le(rel(site(p, "build", V_PEAK_SPACE), 100 * MIB), 0.13);
  ck_assert_int_eq(site(p, "build", V_INUSE_SPACE), 0);
  ck_assert_int_eq(site(p, "keep", V_PEAK_SPACE), 0);
  ck_assert_double_le(rel(site(p, "keep", V_INUSE_SPACE), 10 * MIB), 0.087);
  ck_assert_int_eq(total(p, V_INUSE_SPACE), (int64_t)probe_value(&r, "inuse_bytes"));

  char go[PATH_MAX];
  if (go_find(go, sizeof go)) {                        /* without go: skipped */
    ck_assert_double_ge(go_top_percent(go, path, "peak_space", "build"), 95.0);
    ck_assert_double_ge(go_top_percent(go, path, "inuse_space", "keep"), 95.0);
  }
  test_profile_free(p);
  probe_run_free(&r);
}
END_TEST

/* The plateau program: the transient program's build, then 200000 allocations of 1 KiB from
 * peak_site_churn, each freed at once, while the 100 MiB stay; then the same end.  Half A's estimate of
 * the 100 MiB does not move during the plateau; on top of it at most one churn block is live at any time,
 * so at the peak (A's highest moment: one of its churn samples live, if it has any) peak_site_churn has 0
 * or one block's weight in half B: 1024 / p, p = 1 - e^(-1024/131072) = 0.00778, 131588 bytes (rounded
 * at random: at most 131589).  The build's tolerance as in peak_transient. */
START_TEST(peak_plateau)
{
  profile_t *p;
  char path[PATH_MAX];
  probe_run_t r = run_peak_probe("plateau", "65536", "22", NULL, &p, path);
  assert_peak_consistent(&r, p, "t_plateau_end");
  ck_assert_double_le(rel(site(p, "build", V_PEAK_SPACE), 100 * MIB), 0.13);
  ck_assert_int_le(site(p, "churn", V_PEAK_SPACE), 131589);
  ck_assert_int_eq(site(p, "churn", V_INUSE_SPACE), 0);
  ck_assert_int_gt(site(p, "churn", V_ALLOC_SPACE), 50 * MIB);   /* 195 MiB allocated there, see above */
  ck_assert_int_eq(site(p, "keep", V_PEAK_SPACE), 0);
  ck_assert_double_le(rel(site(p, "keep", V_INUSE_SPACE), 10 * MIB), 0.087);
  test_profile_free(p);
  probe_run_free(&r);
}
END_TEST

/* mi_prof_reset starts a new peak from what is in use then: after the build and half of it freed, the
 * peak is half B's estimate of those 800 x 64 KiB (sd = 64 KiB * sqrt(800 * 1.54) = 4.4% of 50 MiB, see
 * peak_transient), the profile's sum of peak_space, exactly; the full in-use estimate has sd 1.35%: the
 * two lie within 4 (4.4 + 1.35)% = 23% of each other.  Every sample's allocated estimate is 0 (nothing is
 * allocated after); the peak's time is the reset's; the timeline starts again at the reset, with nothing
 * allocated. */
START_TEST(peak_reset)
{
  profile_t *p;
  char path[PATH_MAX];
  probe_run_t r = run_peak_probe("reset", "65536", "22", NULL, &p, path);
  uint64_t peak = probe_value(&r, "peak_inuse_bytes"), inuse = probe_value(&r, "inuse_bytes");
  ck_assert_int_eq(total(p, V_PEAK_SPACE), (int64_t)peak);
  ck_assert_double_le(rel((int64_t)peak, (double)inuse), 0.23);
  ck_assert_uint_ge(probe_value(&r, "peak_time_ns"), probe_value(&r, "t_built"));
  ck_assert_uint_le(probe_value(&r, "peak_time_ns"), probe_value(&r, "t_reset"));
  for (size_t i = 0; i < p->n_sample; i++) ck_assert_int_eq(p->sample[i]->value[V_ALLOC_SPACE], 0);
  const timeline_t *tl = p->mimalloc_prof_timeline;
  ck_assert_ptr_nonnull(tl);
  ck_assert_uint_ge((uint64_t)tl->start_nanos, probe_value(&r, "t_built"));
  ck_assert_uint_le((uint64_t)tl->start_nanos, probe_value(&r, "t_reset"));
  for (size_t i = 0; i < tl->n_alloc_bytes; i++) ck_assert_int_eq(tl->alloc_bytes[i], 0);
  test_profile_free(p);
  probe_run_free(&r);
}
END_TEST

/* The timeline of the transient program rises, peaks and falls where the program did: points in time
 * order, within the session; one is at the peak's time, exactly, and none is far above the peak (the
 * points are the full estimate, the peak half B's: each within 4 sd of the truth, 7.6% and 12.4%, see
 * peak_transient); while the build ran there is a point below half the peak (the rise), and while its
 * blocks were freed another (the fall); the last point is the state when the profile was taken (in use:
 * the profile's sum, exactly), and the allocated estimate never decreases. */
START_TEST(peak_timeline_transient)
{
  profile_t *p;
  char path[PATH_MAX];
  probe_run_t r = run_peak_probe("transient", "65536", "22", NULL, &p, path);
  const timeline_t *tl = p->mimalloc_prof_timeline;
  ck_assert_ptr_nonnull(tl);
  size_t n = tl->n_offset_nanos;
  ck_assert_uint_ge(n, 3);
  ck_assert_uint_le(n, 1025);
  ck_assert_uint_eq(tl->n_inuse_bytes, n);
  ck_assert_uint_eq(tl->n_alloc_bytes, n);
  uint64_t bytes, when;
  peak_comment(p, &bytes, &when);
  uint64_t t_build = probe_value(&r, "t_build"), t_built = probe_value(&r, "t_built");
  uint64_t t_freed = probe_value(&r, "t_freed");
  ck_assert_uint_ge((uint64_t)tl->start_nanos, probe_value(&r, "t_start"));
  bool rise = false, fall = false, at_peak = false;
  for (size_t i = 0; i < n; i++) {
    uint64_t t = (uint64_t)(tl->start_nanos + tl->offset_nanos[i]);
    if (i > 0) {
      ck_assert_int_ge(tl->offset_nanos[i], tl->offset_nanos[i - 1]);
      ck_assert_int_ge(tl->alloc_bytes[i], tl->alloc_bytes[i - 1]);
    }
    at_peak |= t == when;
    ck_assert_double_le((double)tl->inuse_bytes[i], (double)bytes * 1.25);
    rise |= t >= t_build && t <= t_built && (uint64_t)tl->inuse_bytes[i] < bytes / 2;
    fall |= t > t_built && t <= t_freed && (uint64_t)tl->inuse_bytes[i] < bytes / 2;
  }
  ck_assert_msg(at_peak && rise && fall, "peak %d, rise %d, fall %d over %zu points", at_peak, rise, fall, n);
  ck_assert_int_eq(tl->inuse_bytes[n - 1], total(p, V_INUSE_SPACE));
  ck_assert_uint_ge((uint64_t)(tl->start_nanos + tl->offset_nanos[n - 1]), probe_value(&r, "t_kept"));
  ck_assert_uint_le((uint64_t)(tl->start_nanos + tl->offset_nanos[n - 1]), probe_value(&r, "t_dump"));
  test_profile_free(p);
  probe_run_free(&r);
}
END_TEST

/* mi_prof_stats accepts the sizes of 0.1 and 0.2 callers and writes only what they know. */
START_TEST(peak_stats_versions)
{
  ck_assert(mi_prof_start_seeded(4096, 5));
  static void *blocks[256];
  alloc_into(blocks, 256, 4096);
  union {
    mi_prof_stats_t st;
    unsigned char bytes[sizeof(mi_prof_stats_t) + 8];
  } u;
  memset(&u, 0xa5, sizeof u);
  ck_assert(mi_prof_stats(&u.st, MI_PROF_STATS_SIZE_V2));
  ck_assert_uint_eq(u.bytes[MI_PROF_STATS_SIZE_V2], 0xa5);     /* the 0.3 fields untouched */
  ck_assert(mi_prof_stats(&u.st, MI_PROF_STATS_SIZE_V1));
  ck_assert(mi_prof_stats(&u.st, sizeof u.st));
  ck_assert_uint_gt(u.st.peak_inuse_bytes, 0);
  ck_assert_uint_gt(u.st.peak_time_ns, 0);
  errno = 0;
  ck_assert(!mi_prof_stats(&u.st, MI_PROF_STATS_SIZE_V2 + 8));
  ck_assert_int_eq(errno, EINVAL);
  free_all(blocks, 256);
  ck_assert(mi_prof_stop());
}
END_TEST

Suite *peak_suite(void)
{
  Suite *s = suite_create("peak");
  TCase *tc = tcase_create("peak");
  tcase_set_timeout(tc, 120);
  tcase_add_unchecked_fixture(tc, run_dir_setup, run_dir_teardown);
  tcase_add_test(tc, peak_transient);
  tcase_add_test(tc, peak_plateau);
  tcase_add_test(tc, peak_reset);
  tcase_add_test(tc, peak_timeline_transient);
  tcase_add_test(tc, peak_stats_versions);
  suite_add_tcase(s, tc);
  return s;
}

#endif
