/* test_tool_memreal.c - the memory-over-time views on real programs (tests/memtime_probe) run under
 * `mimalloc-prof run`: the transient peak in top -s peak_space, top's header, run's summary and the
 * timeline chart; top --temporary on blocks freed at once and blocks held for 20 ms; top --by thread on
 * two named threads.
 *
 * Sampling: -r 64k with blocks of 64 KiB and 1 MiB.  A block of s bytes is sampled with probability
 * p = 1 - exp(-s/65536) and stands for s/p bytes: for 1 MiB, p = 1 - e^-16, so every block is sampled
 * (a miss has probability 1e-5 in the whole test) and counts 1 MiB; the program allocates nothing else
 * (static pointer arrays, no stdio), so the totals below are exact but for what the C library allocates
 * before main (a tolerance of 0.5 MiB covers 8 such samples).  For 64 KiB blocks p = 0.63: the tests
 * only compare orders and shares that hold whatever the draw (a site with no temporary bytes has 0). */
#define _GNU_SOURCE
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suites.h"
#include "tool_util.h"

#if MPROF_PPROF

#define MiB (1024.0 * 1024.0)

/* Runs memtime_probe MODE under `mimalloc-prof run -r 64k` (and `extra`, NULL or an option) into path;
 * returns what run printed on stderr (malloc'd). */
static char *run_probe(const char *mode, const char *extra, const char *path)
{
  const char *probe = probe_getenv("MPROF_TEST_MEMTIME_PROBE");
  const char *args[10] = {"run", "-r", "64k", "-o", path};
  size_t n = 5;
  if (extra != NULL) args[n++] = extra;
  args[n++] = probe;
  args[n++] = mode;
  args[n] = NULL;
  probe_run_t r = tool_run(args, NULL);
  probe_assert_exit0(&r, "mimalloc-prof run memtime_probe");
  ck_assert_str_eq(r.out, "done\n");
  char *err = strdup(r.err);
  probe_run_free(&r);
  return err;
}

static probe_run_t run_ok(const char *const *args)
{
  probe_run_t r = tool_run(args, NULL);
  probe_assert_exit0(&r, args[0]);
  return r;
}

/* The first line of `out` at or after `from` whose last word is `name`; NULL when there is none. */
static const char *row_of(const char *from, const char *name)
{
  size_t k = strlen(name);
  for (const char *l = from; l != NULL && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
    const char *nl = strchr(l, '\n');
    size_t n = nl ? (size_t)(nl - l) : strlen(l);
    if (n > k && memcmp(l + n - k, name, k) == 0 && l[n - k - 1] == ' ') return l;
  }
  return NULL;
}

/* The start of the line of `out` that contains `words`. */
static const char *line_with(const char *out, const char *words)
{
  const char *at = strstr(out, words);
  ck_assert_msg(at != NULL, "no '%s' in:\n%s", words, out);
  while (at > out && at[-1] != '\n') at--;
  return at;
}

/* An amount of bytes as the command prints it ("100 MiB", "512 KiB", "0 B") at s. */
static double bytes_at(const char *s)
{
  char *end;
  while (*s == ' ') s++;
  double v = strtod(s, &end);
  while (*end == ' ') end++;
  static const char *const units[] = {"B", "KiB", "MiB", "GiB"};
  for (int u = 0; u < 4; u++) {
    size_t k = strlen(units[u]);
    if (strncmp(end, units[u], k) == 0 && (end[k] == ' ' || end[k] == '\n' || end[k] == ',')) return v;
    v *= 1024;
  }
  ck_abort_msg("not an amount: %.40s", s);
  return 0;
}

/* The transient program: build_big's 100 MiB are the peak, keep_small's 10 MiB are in use at exit; the
 * timeline rises, peaks, falls and rises to a tenth in that order. */
START_TEST(tool_memreal_transient)
{
  char dir[PATH_MAX], p[PATH_MAX + 32];
  tool_tmpdir(dir, sizeof dir);
  snprintf(p, sizeof p, "%s/transient.pb.gz", dir);
  char *summary = run_probe("transient", NULL, p);
  /* run's summary: the peak, in use at exit, allocated, and build_big first at the peak. */
  const char *peak = strstr(summary, "\n  peak ");
  ck_assert_msg(peak != NULL && strstr(peak, " after the start\n") != NULL, "%s", summary);
  ck_assert_double_eq_tol(bytes_at(peak + 7), 100 * MiB, 2 * MiB);
  ck_assert_double_eq_tol(bytes_at(strstr(summary, "\n  at exit ") + 10), 10 * MiB, 0.5 * MiB);
  ck_assert_double_eq_tol(bytes_at(strstr(summary, "\n  allocated ") + 12), 110 * MiB, 1 * MiB);
  const char *sites = strstr(summary, "at the peak, by allocation site");
  ck_assert_msg(sites != NULL, "%s", summary);
  const char *first = strchr(sites, '\n') + 1;
  ck_assert_msg(row_of(first, "build_big") == first, "build_big not first at the peak:\n%s", summary);
  free(summary);

  /* top -s peak_space: build_big with its 100 MiB; top (in use): keep_small, and the way to the peak. */
  probe_run_t r = run_ok((const char *const[]){"top", "-s", "peak_space", p, NULL});
  const char *table = strstr(r.out, "function\n");
  ck_assert_msg(table != NULL, "%s", r.out);
  table += 9;
  ck_assert_msg(row_of(table, "build_big") == table, "build_big is not first:\n%s", r.out);
  ck_assert_double_eq_tol(bytes_at(table), 100 * MiB, 2 * MiB);
  ck_assert_msg(row_of(table, "keep_small") == NULL, "keep_small at the peak:\n%s", r.out);
  probe_run_free(&r);
  r = run_ok((const char *const[]){"top", p, NULL});
  table = strstr(r.out, "function\n") + 9;
  ck_assert_msg(row_of(table, "keep_small") == table, "keep_small is not first:\n%s", r.out);
  ck_assert_double_eq_tol(bytes_at(table), 10 * MiB, 0.5 * MiB);
  ck_assert_msg(strstr(r.out, "-s peak_space shows the sites at the peak") != NULL, "%s", r.out);
  probe_run_free(&r);

  /* The timeline, phase by phase (20 ms apart): up to the peak ('#', the full height), then a column
   * that ends with (nearly) nothing in use, then a tenth to the end.  A column's ':' rows are what was
   * in use at its end, its '.' rows the highest before that. */
  r = run_ok((const char *const[]){"timeline", "--height", "20", p, NULL});
  int end_rows[72] = {0}, peak_col = -1;
  const char *l = strstr(r.out, "MiB\n");
  ck_assert_msg(l != NULL, "%s", r.out);
  for (l = strchr(l, '\n') + 1; strncmp(l, "     0+", 7) != 0; l = strchr(l, '\n') + 1) {
    const char *nl = strchr(l, '\n');
    for (const char *s = l + 7; s < nl && s - l - 7 < 72; s++) {
      if (*s == ':' || *s == '#') end_rows[s - l - 7]++;
      if (*s == '#') peak_col = (int)(s - l - 7);
    }
  }
  ck_assert_msg(peak_col > 0 && end_rows[peak_col] == 20, "no peak:\n%s", r.out);
  int fall = peak_col + 1;
  while (fall < 72 && end_rows[fall] > 1) fall++;
  ck_assert_msg(fall < 72, "no fall after the peak:\n%s", r.out);
  int kept = fall;
  while (kept < 72 && end_rows[kept] != 2) kept++;
  ck_assert_msg(kept < 72, "nothing kept after the fall:\n%s", r.out);
  for (int k = kept; k < 72; k++) ck_assert_msg(end_rows[k] == 2, "column %d is not a tenth:\n%s", k, r.out);
  ck_assert_msg(strstr(r.out, "allocation sites at the peak") != NULL && row_of(r.out, "build_big") != NULL,
                "%s", r.out);
  probe_run_free(&r);
}
END_TEST

/* churn's blocks live microseconds, hold's at least 20 ms: --temporary puts churn first with (nearly)
 * all its bytes, hold at 0 B. */
START_TEST(tool_memreal_temporary)
{
  char dir[PATH_MAX], p[PATH_MAX + 32];
  tool_tmpdir(dir, sizeof dir);
  snprintf(p, sizeof p, "%s/lifetimes.pb.gz", dir);
  free(run_probe("lifetimes", "--lifetimes", p));
  probe_run_t r = run_ok((const char *const[]){"top", "--temporary", p, NULL});
  const char *table = strstr(r.out, "function\n");
  ck_assert_msg(table != NULL, "%s", r.out);
  table += 9;
  ck_assert_msg(row_of(table, "churn") == table, "churn is not first:\n%s", r.out);
  /* its share of the site: a block whose free came more than 1 ms after its malloc (the thread was
   * preempted in between) is not temporary; allow 10% of them */
  double of_site = strtod(strchr(strchr(table, '%') + 1, ' '), NULL);
  ck_assert_msg(of_site >= 90.0, "churn: %.1f%% temporary:\n%s", of_site, r.out);
  const char *h = row_of(table, "hold");
  ck_assert_msg(h != NULL && bytes_at(h) == 0, "hold is not at 0 B:\n%s", r.out);
  probe_run_free(&r);
  /* Without --lifetimes: the message. */
  snprintf(p, sizeof p, "%s/plain.pb.gz", dir);
  free(run_probe("lifetimes", NULL, p));
  r = tool_run((const char *const[]){"top", "--temporary", p, NULL}, NULL);
  ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 1 && strstr(r.err, "run --lifetimes") != NULL,
                "status %d:\n%s", r.status, r.err);
  probe_run_free(&r);
}
END_TEST

/* Two named threads: --by thread gives each its bytes and its own site. */
START_TEST(tool_memreal_by_thread)
{
  char dir[PATH_MAX], p[PATH_MAX + 32];
  tool_tmpdir(dir, sizeof dir);
  snprintf(p, sizeof p, "%s/threads.pb.gz", dir);
  free(run_probe("threads", NULL, p));
  probe_run_t r = run_ok((const char *const[]){"top", "--by", "thread", p, NULL});
  const char *a = line_with(r.out, " alpha-worker "), *b = line_with(r.out, " beta-worker ");
  ck_assert_msg(a < b && strstr(a, " alpha_site (") < strchr(a, '\n'), "%s", r.out);
  ck_assert_msg(strstr(b, " beta_site (") < strchr(b, '\n'), "%s", r.out);
  ck_assert_double_eq_tol(bytes_at(a), 8 * MiB, 0.5 * MiB);
  ck_assert_double_eq_tol(bytes_at(b), 4 * MiB, 0.5 * MiB);
  probe_run_free(&r);
  r = run_ok((const char *const[]){"folded", "--tag", "thread=beta-worker", p, NULL});
  ck_assert_msg(strstr(r.out, "beta_site") != NULL && strstr(r.out, "alpha_site") == NULL, "%s", r.out);
  probe_run_free(&r);
}
END_TEST

Suite *tool_memreal_suite(void)
{
  Suite *s = suite_create("tool_memreal");
  TCase *tc = tcase_create("tool_memreal");
  tcase_add_unchecked_fixture(tc, tool_dirs_setup, tool_dirs_teardown);
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, tool_memreal_transient);
  tcase_add_test(tc, tool_memreal_temporary);
  tcase_add_test(tc, tool_memreal_by_thread);
  suite_add_tcase(s, tc);
  return s;
}

#endif
