/* test_pprof.c - the heap profile format (lib/pprof.c, lib/objects.c): catalogue D29-D31, the dump part of
 * C22 (rate 1), timestamps, dropped samples' locations, and the writer's memory bound.
 *
 * In-process tests compare a dump with mi_prof_stats and mi_prof_visit taken around it with nothing
 * allocated in between; Check's passing assertions allocate (and may be sampled), so every measurement is
 * taken first and asserted afterwards.  The writer's own rules are tested on synthetic snapshots by
 * tests/writer_probe (linked with the static library; skipped when that is not built).  Decoding and the
 * rules of profile.proto: tests/pprof_util.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "mimalloc-prof.h"
#include "pprof_util.h"

#if MPROF_PPROF

#define SEED 0x9a0f11eull

static uint64_t monotonic_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---------------------------------------------------------------------------------------------------
   D29 proto_roundtrip
--------------------------------------------------------------------------------------------------- */

#define SEEN_STACKS 64
#define SEEN_FRAMES 256

typedef struct seen_stack_s {
  size_t depth;
  uintptr_t frames[SEEN_FRAMES];
  mi_prof_stack_counts_t counts;
} seen_stack_t;

static seen_stack_t seen[SEEN_STACKS];      /* static: the visitor allocates nothing */
static size_t n_seen;
static bool seen_overflow;

static bool collect_stack(void *const *frames, size_t depth, const mi_prof_stack_counts_t *counts, void *arg)
{
  (void)arg;
  if (n_seen == SEEN_STACKS || depth > SEEN_FRAMES) {
    seen_overflow = true;
    return false;
  }
  seen[n_seen].depth = depth;
  for (size_t i = 0; i < depth; i++) seen[n_seen].frames[i] = (uintptr_t)frames[i];
  seen[n_seen].counts = *counts;
  n_seen++;
  return true;
}

/* The visited stack whose return addresses are the sample's location addresses + 1; NULL if none. */
static const seen_stack_t *seen_for(const profile_t *p, const sample_t *s)
{
  for (size_t k = 0; k < n_seen; k++) {
    if (seen[k].depth != s->n_location_id) continue;
    size_t i = 0;
    for (; i < s->n_location_id; i++) {
      const location_t *l = location_by_id(p, s->location_id[i]);
      if (l == NULL || l->address != seen[k].frames[i] - 1) break;
    }
    if (i == s->n_location_id) return &seen[k];
  }
  return NULL;
}

static void *rt_small[2000], *rt_mid[1000], *rt_large[50];

/* Three sites at rate 4096 (seed fixed): 2000 x 100 B (p = 1 - e^(-100/4096) = 0.024, E[samples] = 48.2),
 * 1000 x 3000 B with every other one freed (p = 0.52, E = 519, so P(all of a stack's samples freed) is
 * about 2^-519: every stack keeps something in use, and the sums below hold whatever
 * MIMALLOC_PROF_ACCUM says), 50 x 100 KiB (p = 1).  The stats and a visit are taken right before and
 * after the dump with nothing allocated in between, so the profile must equal them exactly: sums of
 * inuse_space and alloc_space equal to the byte; objects up to the rounding of each stack's count to
 * whole objects (<= 1/2 per stack, plus 1/2 for the rounded total). */
START_TEST(pprof_proto_roundtrip)
{
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/roundtrip.pb.gz", tmp_dir_make());
  char exe[PATH_MAX];
  ssize_t exe_len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  ck_assert_int_gt(exe_len, 0);
  exe[exe_len] = '\0';

  uint64_t m0 = monotonic_ns();
  bool started = mi_prof_start_seeded(4096, SEED);
  uint64_t m1 = monotonic_ns();
  alloc_into(rt_small, 2000, 100);
  alloc_into(rt_mid, 1000, 3000);
  for (size_t i = 0; i < 1000; i += 2) free(rt_mid[i]), rt_mid[i] = NULL;
  alloc_into(rt_large, 50, 100 << 10);
  mi_prof_stats_t before, after;
  bool stats_ok = mi_prof_stats(&before, sizeof before);
  errno = 0;
  uint64_t t2 = realtime_ns(), m2 = monotonic_ns();
  bool dumped = mi_prof_dump(path);
  uint64_t t3 = realtime_ns(), m3 = monotonic_ns();
  int dump_errno = errno;
  stats_ok &= mi_prof_stats(&after, sizeof after);
  bool visited = mi_prof_visit(collect_stack, NULL);

  ck_assert(started);
  ck_assert(stats_ok);
  ck_assert_msg(dumped, "mi_prof_dump: errno %d", dump_errno);
  ck_assert(visited);
  ck_assert(!seen_overflow);
  /* The dump itself allocated nothing that was sampled. */
  ck_assert_uint_eq(after.samples, before.samples);
  ck_assert_uint_eq(after.inuse_bytes, before.inuse_bytes);
  ck_assert_uint_eq(after.alloc_bytes, before.alloc_bytes);

  profile_t *p = profile_load(path);
  ck_assert_int_eq(p->period, 4096);
  int64_t sum[N_VALUES];
  profile_sums(p, sum);
  ck_assert_uint_eq((uint64_t)sum[V_INUSE_SPACE], before.inuse_bytes);
  ck_assert_uint_eq((uint64_t)sum[V_ALLOC_SPACE], before.alloc_bytes);
  double slack = (double)(p->n_sample + 1) / 2;
  ck_assert_double_le(fabs((double)sum[V_INUSE_OBJECTS] - (double)before.inuse_objects), slack);
  ck_assert_double_le(fabs((double)sum[V_ALLOC_OBJECTS] - (double)before.alloc_objects), slack);
  ck_assert_uint_ge(p->n_sample, 3);                   /* three call sites: three stacks at least */

  /* Each sample is one visited stack, with its counts; location address = return address - 1. */
  ck_assert_uint_eq(p->n_sample, n_seen);
  for (size_t i = 0; i < p->n_sample; i++) {
    const sample_t *s = p->sample[i];
    const seen_stack_t *v = seen_for(p, s);
    ck_assert_msg(v != NULL, "sample %zu matches no visited stack", i);
    ck_assert_int_eq(s->value[V_ALLOC_OBJECTS], v->counts.alloc_objects);
    ck_assert_int_eq(s->value[V_ALLOC_SPACE], v->counts.alloc_bytes);
    ck_assert_int_eq(s->value[V_INUSE_OBJECTS], v->counts.inuse_objects);
    ck_assert_int_eq(s->value[V_INUSE_SPACE], v->counts.inuse_bytes);
  }

  /* The program (mapping[0] where the loader put it lowest; pprof_main_mapping_first checks the rule
   * everywhere) and libc carry their GNU build IDs (Debian links with --build-id). */
  const mapping_t *main_map = mapping_named(p, exe);
  ck_assert_ptr_nonnull(main_map);
  ck_assert_uint_ge(strlen(test_pstr(p, main_map->build_id)), 16);
  const mapping_t *libc = mapping_named(p, "/libc.so.6");
  ck_assert_ptr_nonnull(libc);
  ck_assert_uint_ge(strlen(test_pstr(p, libc->build_id)), 16);

  /* time_nanos: when the dump collected (CLOCK_REALTIME, within the call); duration_nanos: CLOCK_MONOTONIC
   * from the session's start (within the start call) to then (within the dump call). */
  ck_assert_uint_ge((uint64_t)p->time_nanos, t2);
  ck_assert_uint_le((uint64_t)p->time_nanos, t3);
  ck_assert_uint_ge((uint64_t)p->duration_nanos, m2 - m1);
  ck_assert_uint_le((uint64_t)p->duration_nanos, m3 - m0);

  /* Comments: dropped samples (none here) and the sample count. */
  uint64_t dropped = 0;
  for (int i = 0; i < MI_PROF_DROP_REASONS; i++) dropped += before.dropped[i];
  ck_assert_uint_eq(dropped, 0);
  ck_assert_uint_eq(comment_number(p, "dropped samples:", "total"), dropped);
  ck_assert_uint_eq(comment_number(p, "dropped samples:", "memory"), 0);
  ck_assert_uint_eq(comment_number(p, "samples=", "live"), before.live_samples);
  test_profile_free(p);

  free_all(rt_small, 2000);
  free_all(rt_mid, 1000);
  free_all(rt_large, 50);
  ck_assert(mi_prof_stop());
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   D30 empty_profile
--------------------------------------------------------------------------------------------------- */

static void assert_empty(const profile_t *p)
{
  ck_assert_uint_eq(p->n_sample, 0);
  ck_assert_uint_eq(p->n_location, 0);
  ck_assert_uint_eq(p->n_function, 0);
}

/* A profile's time: time_nanos is when it was collected, within [t0, t1]; with no session its duration is
 * 0. */
static void assert_times(const profile_t *p, uint64_t t0, uint64_t t1, const char *what)
{
  ck_assert_msg((uint64_t)p->time_nanos >= t0 && (uint64_t)p->time_nanos <= t1 && p->duration_nanos == 0,
                "%s: time_nanos %" PRId64 " duration_nanos %" PRId64 ", written between %" PRIu64 " and %" PRIu64,
                what, p->time_nanos, p->duration_nanos, t0, t1);
}

/* A profile with no samples: while stopped in a process that never started a session (documented: a
 * valid profile with no samples), and just after a start with nothing allocated yet.  Both decode, with a
 * real time, and `go tool pprof -raw` accepts both when go is on PATH (without go that part is skipped:
 * the test still checks the decoding). */
START_TEST(pprof_empty_profile)
{
  const char *dir = tmp_dir_make();
  char stopped_path[PATH_MAX], started_path[PATH_MAX];
  snprintf(stopped_path, sizeof stopped_path, "%s/stopped.pb.gz", dir);
  snprintf(started_path, sizeof started_path, "%s/started.pb.gz", dir);

  bool was_enabled = mi_prof_is_enabled();
  uint64_t t0 = realtime_ns();
  bool stopped_ok = mi_prof_dump(stopped_path);
  int stopped_errno = errno;
  uint64_t t1 = realtime_ns();
  bool started = mi_prof_start_seeded(65536, SEED);
  bool started_ok = mi_prof_dump(started_path);
  int started_errno = errno;
  bool stop = mi_prof_stop();

  ck_assert(!was_enabled);
  ck_assert_msg(stopped_ok, "dump while stopped: errno %d", stopped_errno);
  ck_assert(started);
  ck_assert_msg(started_ok, "dump after start: errno %d", started_errno);
  ck_assert(stop);
  profile_t *stopped = profile_load(stopped_path);
  assert_empty(stopped);
  profile_t *p = profile_load(started_path);
  assert_empty(p);
  ck_assert_int_eq(p->period, 65536);
  test_profile_free(p);

  char go[PATH_MAX];
  if (go_find(go, sizeof go)) {                        /* without go: skipped, see above */
    const char *paths[] = {stopped_path, started_path};
    for (size_t i = 0; i < 2; i++) {
      probe_run_t r = go_pprof(go, (const char *const[]){"-raw", paths[i], NULL});
      probe_assert_exit0(&r, "go tool pprof -raw");
      ck_assert_msg(strstr(r.out, "PeriodType: space bytes") != NULL, "go tool pprof -raw:\n%s\n%s", r.out,
                    r.err);
      probe_run_free(&r);
    }
  }
  assert_times(stopped, t0, t1, "dumped before any session");
  test_profile_free(stopped);
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   D31 symbolized_top
--------------------------------------------------------------------------------------------------- */

/* tests/pprof_probe keeps 12288 x 4 KiB from alpha_site (in the program) and 4096 x 4 KiB from
 * pprof_site_beta (in tests/libpprof_site.so) live until exit, sampled at rate 16 KiB (seed fixed) with
 * a final dump.  All samples have the same weight s/p (p = 1 - e^(-4096/16384) = 0.2212), so alpha's
 * share of the two is K_a / (K_a + K_b): given K = K_a + K_b samples (E[K] = 16384 p = 3624), K_a is
 * binomial(K, 0.75), sigma of the share = sqrt(0.75 * 0.25 / 3624) = 0.0072 = 0.72 points; 5 sigma =
 * 3.6 points.  The probe's other live blocks (stdio's buffer, start-up allocations: a few KiB, each
 * sampled one weighing under its size + 16 KiB) move the shares of the whole profile by under 0.2
 * points.  So each flat% must lie within 3.8 points of 75 and 25.  The total: K is binomial(16384, p),
 * sigma = sqrt(16384 p (1 - p)) = 53.1 = 1.47% of E[K], so the estimate lies within 4 sigma = 5.9%
 * (+ 0.2% for the other blocks) of the 64 MiB allocated. */
START_TEST(pprof_symbolized_top)
{
  const char *dir = tmp_dir_make();
  char prefix[PATH_MAX];
  prefix_var(prefix, sizeof prefix, dir);
  const char *vars[] = {"MIMALLOC_PROF=1", "MIMALLOC_PROF_SAMPLE_RATE=16384", "MIMALLOC_PROF_SEED=31",
                        "MIMALLOC_PROF_FINAL=1", prefix, NULL};
  probe_run_t r = run_probe(vars, (const char *const[]){"shares", "12288", "4096", "4096", NULL});
  probe_assert_exit0(&r, NULL);
  ck_assert_str_eq(r.err, "");
  ck_assert_uint_eq(probe_value(&r, "allocated"), 16384);
  char exe[PATH_MAX];
  out_string(&r, "exe", exe, sizeof exe);

  dump_file_t files[MAX_DUMPS];
  ck_assert_uint_eq(dumps_list(dir, r.pid, files), 1);
  ck_assert_int_eq(files[0].kind, 'f');
  profile_t *p = profile_load(files[0].path);
  ck_assert_int_eq(p->period, 16384);
  int64_t sum[N_VALUES];
  profile_sums(p, sum);
  double total = 64.0 * (1 << 20);
  ck_assert_double_le(fabs((double)sum[V_INUSE_SPACE] - total) / total, 0.061);

  /* The program and the shared library have their mappings with build IDs; each site's samples start
   * inside the right one, named by the profile (dladdr: both functions are exported). */
  const mapping_t *main_map = mapping_named(p, exe);
  ck_assert_ptr_nonnull(main_map);
  ck_assert_str_ne(test_pstr(p, main_map->build_id), "");
  const mapping_t *site = mapping_named(p, "/libpprof_site.so");
  ck_assert_ptr_nonnull(site);
  ck_assert_str_ne(test_pstr(p, site->build_id), "");
  for (size_t i = 0; i < p->n_sample; i++) {
    const location_t *leaf = sample_leaf(p, p->sample[i]);
    const char *name = location_name(p, leaf);
    if (strcmp(name, "alpha_site") == 0) ck_assert_uint_eq(leaf->mapping_id, main_map->id);
    if (strcmp(name, "pprof_site_beta") == 0) ck_assert_uint_eq(leaf->mapping_id, site->id);
  }
  ck_assert_int_gt(leaf_total(p, "alpha_site", V_INUSE_SPACE), 0);
  ck_assert_int_gt(leaf_total(p, "pprof_site_beta", V_INUSE_SPACE), 0);
  test_profile_free(p);

  char go[PATH_MAX];
  if (go_find(go, sizeof go)) {                        /* without go: skipped */
    probe_run_t top =
      go_pprof(go, (const char *const[]){"-top", "-sample_index=inuse_space", exe, files[0].path, NULL});
    probe_assert_exit0(&top, "go tool pprof -top");
    double alpha = top_flat_percent(top.out, "alpha_site"), beta = top_flat_percent(top.out, "pprof_site_beta");
    ck_assert_msg(alpha >= 0 && beta >= 0, "go tool pprof -top:\n%s\n%s", top.out, top.err);
    ck_assert_double_eq_tol(alpha, 75.0, 3.8);
    ck_assert_double_eq_tol(beta, 25.0, 3.8);
    probe_run_free(&top);
  }
  probe_run_free(&r);
}
END_TEST

/* Where process_vm_readv is refused (a seccomp filter: EPERM as in Docker's default policy, ENOSYS as
 * under qemu-user), the library reads the symbol tables through a pipe instead: the same profile names
 * both sites (alpha_site, pprof_site_beta) at the leaf of their samples.  Fewer blocks than above (the
 * names are the point): 300 x 4 KiB at rate 16384, p = 0.22 per block, E = 66 samples per site;
 * P(none) = 0.78^300 ~ 1e-32. */
START_TEST(pprof_names_without_process_vm_readv)
{
  static const char *const errs[] = {"ENOSYS", "EPERM"};
  for (size_t e = 0; e < 2; e++) {
    const char *dir = tmp_dir_make();
    char prefix[PATH_MAX];
    prefix_var(prefix, sizeof prefix, dir);
    const char *vars[] = {"MIMALLOC_PROF=1", "MIMALLOC_PROF_SAMPLE_RATE=16384", "MIMALLOC_PROF_SEED=31",
                          "MIMALLOC_PROF_FINAL=1", prefix, NULL};
    probe_run_t r = run_probe(vars, (const char *const[]){"shares", "300", "300", "4096", errs[e], NULL});
    probe_assert_exit0(&r, errs[e]);
    if (strstr(r.out, "skipped 1") != NULL) {
      probe_run_free(&r);
      MPROF_TEST_SKIP("no seccomp filters here (qemu-user does not emulate them; process_vm_readv is "
                      "refused there anyway, and pprof_symbolized_top reads names that way)");
    }
    ck_assert_str_eq(r.err, "");
    ck_assert_uint_eq(probe_value(&r, "refused"), 1);
    dump_file_t files[MAX_DUMPS];
    ck_assert_uint_eq(dumps_list(dir, r.pid, files), 1);
    profile_t *p = profile_load(files[0].path);
    ck_assert_msg(leaf_total(p, "alpha_site", V_INUSE_SPACE) > 0, "%s: alpha_site not named", errs[e]);
    ck_assert_msg(leaf_total(p, "pprof_site_beta", V_INUSE_SPACE) > 0, "%s: pprof_site_beta not named", errs[e]);
    test_profile_free(p);
    probe_run_free(&r);
  }
}
END_TEST

/* The main program must be mapping[0] wherever the loader put it: with an unlimited stack, Linux lays
 * out memory the legacy way (shared libraries from a third of the address space up, a PIE at two
 * thirds), so the program is not the lowest mapping.  `go tool pprof PROGRAM FILE` gives PROGRAM
 * to mapping[0]. */
START_TEST(pprof_main_mapping_first)
{
  struct rlimit rl;
  ck_assert_int_eq(getrlimit(RLIMIT_STACK, &rl), 0);
  if (rl.rlim_max != RLIM_INFINITY) return;            /* cannot raise the limit: nothing to check */
  const char *dir = tmp_dir_make();
  char prefix[PATH_MAX];
  prefix_var(prefix, sizeof prefix, dir);
  const char *vars[] = {"MIMALLOC_PROF=1", "MIMALLOC_PROF_SAMPLE_RATE=4096", "MIMALLOC_PROF_FINAL=1", prefix, NULL};
  const char *const args[] = {"shares", "16", "16", "4096", NULL};
  probe_opts_t opts = {.env = vars, .stack_limit = RLIM_INFINITY};
  probe_run_t r = probe_run(probe_getenv("MPROF_TEST_PPROF_PROBE"), args, &opts);
  probe_assert_exit0(&r, NULL);
  char exe[PATH_MAX];
  out_string(&r, "exe", exe, sizeof exe);
  dump_file_t files[MAX_DUMPS];
  ck_assert_uint_eq(dumps_list(dir, r.pid, files), 1);
  profile_t *p = profile_load(files[0].path);
  const mapping_t *main_map = mapping_named(p, exe);
  ck_assert_ptr_nonnull(main_map);
  ck_assert_msg(main_map == p->mapping[0], "mapping[0] is %s, the program (%#" PRIx64 ") is mapping id %" PRIu64,
                test_pstr(p, p->mapping[0]->filename), main_map->memory_start, main_map->id);
  test_profile_free(p);
  probe_run_free(&r);
}
END_TEST

/* A build ID whose length is not a multiple of 4 (GNU ld's --build-id=0x..., lld's) ends its segment
 * without padding; the library's mapping still carries it, whole. */
START_TEST(pprof_build_id_unpadded)
{
  const char *dir = tmp_dir_make();
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/oddid.pb.gz", dir);
  const char *vars[] = {"MIMALLOC_PROF=1", "MIMALLOC_PROF_SAMPLE_RATE=1", NULL};
  probe_opts_t opts = {.env = vars};
  const char *prog = probe_getenv("MPROF_TEST_ODDID_PROBE");
  probe_run_t r = probe_run(prog, (const char *const[]){path, NULL}, &opts);
  probe_assert_exit0(&r, NULL);
  profile_t *p = profile_load(path);
  const mapping_t *lib = mapping_named(p, "/liboddid.so");
  ck_assert_ptr_nonnull(lib);
  ck_assert_str_eq(test_pstr(p, lib->build_id), "0102030405");
  test_profile_free(p);
  probe_run_free(&r);
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   C22, the dump part
--------------------------------------------------------------------------------------------------- */

static void *r1_blocks[500];

/* Rate 1: P(an interval exceeds 64 bytes) = e^-64, so every 64-byte allocation is sampled, and
 * p = 1 - e^-64 rounds to 1.0 in double, so each stands for exactly one object of 64 bytes.  With
 * nothing else allocated between start and dump, the profile is exactly one stack holding 500 objects
 * and 32000 bytes.  After freeing them: nothing in use; the stack stays with its allocated counts when the
 * profile says accum=1 (MIMALLOC_PROF_ACCUM), and is gone otherwise. */
START_TEST(pprof_rate_one_decodes)
{
  const char *dir = tmp_dir_make();
  char live_path[PATH_MAX], freed_path[PATH_MAX];
  snprintf(live_path, sizeof live_path, "%s/live.pb.gz", dir);
  snprintf(freed_path, sizeof freed_path, "%s/freed.pb.gz", dir);

  bool started = mi_prof_start_seeded(1, SEED);
  alloc_into(r1_blocks, 500, 64);
  mi_prof_stats_t live, freed;
  mi_prof_stats(&live, sizeof live);
  bool live_ok = mi_prof_dump(live_path);
  free_all(r1_blocks, 500);
  mi_prof_stats(&freed, sizeof freed);
  bool freed_ok = mi_prof_dump(freed_path);
  bool stopped = mi_prof_stop();

  ck_assert(started);
  ck_assert(live_ok);
  ck_assert(freed_ok);
  ck_assert(stopped);
  ck_assert_uint_eq(live.live_samples, 500);
  ck_assert_uint_eq(live.inuse_objects, 500);
  ck_assert_uint_eq(live.inuse_bytes, 32000);
  ck_assert_uint_eq(freed.live_samples, 0);
  ck_assert_uint_eq(freed.inuse_bytes, 0);

  profile_t *p = profile_load(live_path);
  ck_assert_int_eq(p->period, 1);
  ck_assert_uint_eq(p->n_sample, 1);
  const int64_t *v = p->sample[0]->value;
  ck_assert_int_eq(v[V_ALLOC_OBJECTS], 500);
  ck_assert_int_eq(v[V_ALLOC_SPACE], 32000);
  ck_assert_int_eq(v[V_INUSE_OBJECTS], 500);
  ck_assert_int_eq(v[V_INUSE_SPACE], 32000);
  test_profile_free(p);

  p = profile_load(freed_path);
  bool accum = comment_number(p, "samples=", "accum") != 0;
  ck_assert_uint_eq(p->n_sample, accum ? 1 : 0);
  int64_t sum[N_VALUES];
  profile_sums(p, sum);
  ck_assert_int_eq(sum[V_INUSE_OBJECTS], 0);
  ck_assert_int_eq(sum[V_INUSE_SPACE], 0);
  ck_assert_int_eq(sum[V_ALLOC_OBJECTS], accum ? 500 : 0);
  ck_assert_int_eq(sum[V_ALLOC_SPACE], accum ? 32000 : 0);
  test_profile_free(p);
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   Timestamps
--------------------------------------------------------------------------------------------------- */

/* Go prints a profile's time as "2006-01-02 15:04:05.999999999 +0000 UTC" (TZ=UTC, trailing zeros of
 * the fraction dropped); in nanoseconds since the Epoch, or 0 when the line is not there. */
static uint64_t go_time_ns(const char *raw)
{
  const char *at = strstr(raw, "\nTime: ");
  if (at == NULL) return 0;
  struct tm tm;
  memset(&tm, 0, sizeof tm);
  int used = 0;
  if (sscanf(at + 7, "%d-%d-%d %d:%d:%d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
             &tm.tm_sec, &used) != 6)
    return 0;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  uint64_t ns = (uint64_t)timegm(&tm) * 1000000000u, scale = 100000000u;
  const char *f = at + 7 + used;
  if (*f == '.')
    for (f++; *f >= '0' && *f <= '9'; f++, scale /= 10) ns += (uint64_t)(*f - '0') * scale;
  return strncmp(f, " +0000 UTC", 10) == 0 ? ns : 0;
}

/* Successive dumps: time_nanos is each one's collection time (CLOCK_REALTIME, within its call), so it
 * grows from one dump to the next; duration_nanos, the monotonic time since the session started, grows
 * too.  `go tool pprof -raw` prints each time to the nanosecond (skipped without go). */
START_TEST(pprof_timestamps_increase)
{
  enum { DUMPS = 3 };
  const char *dir = tmp_dir_make();
  char path[DUMPS][PATH_MAX];
  uint64_t t[DUMPS][2];
  bool ok[DUMPS];
  for (size_t i = 0; i < DUMPS; i++) snprintf(path[i], sizeof path[i], "%s/%zu.pb.gz", dir, i);
  bool started = mi_prof_start_seeded(65536, SEED);
  for (size_t i = 0; i < DUMPS; i++) {
    t[i][0] = realtime_ns();
    ok[i] = mi_prof_dump(path[i]);
    t[i][1] = realtime_ns();
  }
  bool stopped = mi_prof_stop();
  ck_assert(started);
  ck_assert(stopped);

  int64_t time_ns[DUMPS], duration_ns[DUMPS];
  char go[PATH_MAX];
  bool have_go = go_find(go, sizeof go);
  for (size_t i = 0; i < DUMPS; i++) {
    ck_assert(ok[i]);
    profile_t *p = profile_load(path[i]);
    time_ns[i] = p->time_nanos;
    duration_ns[i] = p->duration_nanos;
    test_profile_free(p);
    ck_assert_uint_ge((uint64_t)time_ns[i], t[i][0]);
    ck_assert_uint_le((uint64_t)time_ns[i], t[i][1]);
    if (i > 0) {
      ck_assert_int_gt(time_ns[i], time_ns[i - 1]);
      ck_assert_int_gt(duration_ns[i], duration_ns[i - 1]);
    }
    if (!have_go) continue;
    probe_run_t r = go_pprof(go, (const char *const[]){"-raw", path[i], NULL});
    probe_assert_exit0(&r, "go tool pprof -raw");
    ck_assert_msg(go_time_ns(r.out) == (uint64_t)time_ns[i], "time_nanos %" PRId64 "; go tool pprof -raw:\n%s",
                  time_ns[i], r.out);
    ck_assert_ptr_nonnull(strstr(r.out, "\nDuration: "));
    probe_run_free(&r);
  }
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   The writer on synthetic snapshots (tests/writer_probe)
--------------------------------------------------------------------------------------------------- */

/* The writer probe, or false when it is not built (no static library): the test has nothing to run. */
static bool writer_probe(const char *const *args, probe_run_t *out)
{
  const char *path = probe_getenv("MPROF_TEST_WRITER_PROBE");
  if (access(path, X_OK) != 0) return false;
  *out = probe_run(path, args, NULL);
  probe_assert_exit0(out, "writer_probe");
  return true;
}

static const char *const reason_names[MI_PROF_DROP_REASONS] = {
  "memory", "too_large", "alignment", "no_arena", "unwind", "stacks", "fork", "arena_full"};

/* A snapshot of one stack per drop reason (stack r: r + 1 objects of 1000 bytes, its one frame
 * MI_PROF_FRAME_DROPPED(r)), one at writer_site and one at an address in no mapping.  A dropped sample's
 * location has no mapping, no address and one line whose function is "[mimalloc-prof: dropped (REASON)]"
 * (shown so by `go tool pprof -top`, skipped without go);
 * an address in no mapping stays, with mapping id 0 and no line; writer_site's is in the program's
 * mapping and named.  The dropped-samples comment lists every reason.  The leak report of the same
 * snapshot names the dropped frames the same way. */
START_TEST(pprof_dropped_locations)
{
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/dropped.pb.gz", tmp_dir_make());
  probe_run_t r;
  if (!writer_probe((const char *const[]){"dropped", path, NULL}, &r)) return;
  profile_t *p = profile_load(path);
  ck_assert_uint_eq(p->n_sample, MI_PROF_DROP_REASONS + 2);
  for (size_t i = 0; i < p->n_sample; i++) {
    const sample_t *s = p->sample[i];
    const location_t *l = sample_leaf(p, s);
    int64_t k = s->value[V_ALLOC_OBJECTS] - 1;     /* which stack: r + 1 objects */
    ck_assert_uint_eq(s->n_location_id, 1);
    ck_assert_int_eq(s->value[V_INUSE_SPACE], (k + 1) * 1000);
    if (k < MI_PROF_DROP_REASONS) {
      char want[64];
      snprintf(want, sizeof want, DROPPED_PREFIX "%s)]", reason_names[k]);
      ck_assert_uint_eq(l->mapping_id, 0);
      ck_assert_uint_eq(l->address, 0);
      ck_assert_str_eq(location_name(p, l), want);
    } else if (k == MI_PROF_DROP_REASONS) {
      ck_assert_uint_eq(l->address, probe_value(&r, "writer_site"));
      ck_assert_uint_ne(l->mapping_id, 0);
      ck_assert_str_eq(location_name(p, l), "writer_site");
    } else {
      ck_assert_uint_eq(l->address, probe_value(&r, "unmapped"));
      ck_assert_uint_eq(l->mapping_id, 0);
      ck_assert_uint_eq(l->n_line, 0);
    }
  }
  for (size_t k = 0; k < MI_PROF_DROP_REASONS; k++)
    ck_assert_uint_eq(comment_number(p, "dropped samples:", reason_names[k]), k + 1);
  ck_assert_uint_eq(comment_number(p, "dropped samples:", "total"), 36);   /* 1 + 2 + ... + 8 */
  test_profile_free(p);
  for (size_t k = 0; k < MI_PROF_DROP_REASONS; k++) {
    char want[80];
    snprintf(want, sizeof want, "    #0 " DROPPED_PREFIX "%s)]\n", reason_names[k]);
    ck_assert_msg(strstr(r.out, want) != NULL, "no \"%s\" in the leak report:\n%s", want, r.out);
  }
  ck_assert_msg(strstr(r.out, "(writer_site+0x1)\n") != NULL, "leak report:\n%s", r.out);

  char go[PATH_MAX];
  if (go_find(go, sizeof go)) {           /* pprof shows each reason on its own row (not cut as C++) */
    probe_run_t top = go_pprof(go, (const char *const[]){"-top", path, NULL});
    probe_assert_exit0(&top, "go tool pprof -top");
    for (size_t k = 0; k < MI_PROF_DROP_REASONS; k++) {
      char want[64];
      snprintf(want, sizeof want, "  " DROPPED_PREFIX "%s)]\n", reason_names[k]);
      ck_assert_msg(strstr(top.out, want) != NULL, "no \"%s\" in go tool pprof -top:\n%s", want, top.out);
    }
    probe_run_free(&top);
  }
  probe_run_free(&r);
}
END_TEST

/* The tables keep MPROF_DUMP_FIXED_BYTES + MPROF_DUMP_STACK_BYTES per stack + MPROF_DUMP_FRAME_BYTES per
 * frame free for one dump (lib/pmem.h); the dump must never take more.  Worst case for the writer: no
 * frame shared, so every frame is its own location and name.  20000 stacks of 16 frames: the most
 * temporary profiler memory the write took (with the snapshot and the object list) stays within that
 * reserve, and the object list within its allowance. */
START_TEST(pprof_writer_memory_bound)
{
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/bound.pb.gz", tmp_dir_make());
  probe_run_t r;
  if (!writer_probe((const char *const[]){"bound", "20000", "16", path, NULL}, &r)) return;
  uint64_t peak = probe_value(&r, "temp_peak"), reserve = probe_value(&r, "reserve");
  ck_assert_msg(peak <= reserve, "a dump took %" PRIu64 " bytes, %" PRIu64 " are kept for it", peak, reserve);
  ck_assert_uint_le(probe_value(&r, "objects_bytes"), 32u << 10);   /* MPROF_DUMP_OBJECTS_BYTES */
  profile_t *p = profile_load(path);
  ck_assert_uint_eq(p->n_sample, 20000);
  ck_assert_uint_eq(p->n_location, 20000 * 16);
  test_profile_free(p);
  probe_run_free(&r);
}
END_TEST

Suite *pprof_suite(void)
{
  Suite *s = suite_create("pprof");
  TCase *tc = tcase_create("pprof");
  tcase_set_timeout(tc, 120);
  tcase_add_unchecked_fixture(tc, run_dir_setup, run_dir_teardown);
  tcase_add_test(tc, pprof_proto_roundtrip);
  tcase_add_test(tc, pprof_empty_profile);
  tcase_add_test(tc, pprof_symbolized_top);
  tcase_add_test(tc, pprof_names_without_process_vm_readv);
  tcase_add_test(tc, pprof_main_mapping_first);
  tcase_add_test(tc, pprof_build_id_unpadded);
  tcase_add_test(tc, pprof_rate_one_decodes);
  tcase_add_test(tc, pprof_timestamps_increase);
  tcase_add_test(tc, pprof_dropped_locations);
  tcase_add_test(tc, pprof_writer_memory_bound);
  suite_add_tcase(s, tc);
  return s;
}

#endif
