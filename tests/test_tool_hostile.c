/* test_tool_hostile.c - the mimalloc-prof command on hostile profiles, as tests/fuzz/hostile writes them:
 * every command handles each one within 2 s of CPU and 200 MiB, or refuses it with a one-line message
 * and exit status 1; merge gives the same profile whatever the order of its files.
 *
 * Time bounds do not belong in tests, but here the bound is the requirement itself ("every hostile
 * profile handled in under 2 s and 200 MB"), so it is asserted, as a generous multiple of what was
 * measured: the CPU time (user + system, from getrusage of the child: the machine is shared, so wall time
 * says little) and the maximum resident set of each command, of which the largest on the development
 * machine (amd64, 2 cores) were 0.32 s (merge of `mappings`) and 50 MiB (symbolize of `mappings`): 6 and
 * 4 times under the bounds.  Under an emulator (qemu-user runs the arm64 cross build 10 to 50 times
 * slower, and its own memory counts as the program's) the bounds are not asserted.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "suites.h"
#include "tool_util.h"

#if MPROF_PPROF

#define CPU_BOUND_S 2.0
#define RSS_BOUND_KIB (200 * 1024)

/* Writes hostile profile `kind` as dir/name with tests/fuzz/hostile. */
static const char *hostile(const char *dir, const char *kind, const char *name, char *path, size_t len)
{
  snprintf(path, len, "%s/%s", dir, name);
  const char *const args[] = {kind, path, NULL};
  probe_run_t r = probe_run(probe_getenv("MPROF_TEST_HOSTILE"), args, NULL);
  probe_assert_exit0(&r, kind);
  probe_run_free(&r);
  return path;
}

/* Whether the command runs under an emulator (then time and memory say nothing of the program): asked of
 * a `top` that waits for its profile on stdin. */
static bool emulated(void)
{
  static int known = -1;
  if (known < 0) {
    probe_opts_t o = {.with_stdin = true, .watchdog_s = 60};
    const char *const args[] = {"top", "/dev/stdin", NULL};
    probe_child_t c = probe_start(probe_getenv("MPROF_TEST_TOOL"), args, &o);
    known = probe_emulated(c.pid);
    probe_run_t r = probe_finish(&c);
    probe_run_free(&r);
  }
  return known;
}

/* Runs mimalloc-prof ARGS; asserts the bounds, and exit status 0, or 1 with a one-line message containing
 * `refusal` when that is not NULL. */
static void bounded(const char *const *args, const char *refusal)
{
  probe_run_t r = tool_run(args, NULL);
  char what[512];                                  /* "top --lines long.pb": files without directories */
  size_t o = 0;
  for (size_t i = 0; args[i] != NULL && o < sizeof what; i++) {
    const char *slash = strrchr(args[i], '/');
    o += (size_t)snprintf(what + o, sizeof what - o, "%s%s", i ? " " : "", slash ? slash + 1 : args[i]);
  }
  double cpu = (double)r.usage.ru_utime.tv_sec + (double)r.usage.ru_utime.tv_usec / 1e6 +
               (double)r.usage.ru_stime.tv_sec + (double)r.usage.ru_stime.tv_usec / 1e6;
  if (refusal == NULL) {
    probe_assert_exit0(&r, what);
  } else {
    ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 1, "%s: status %d, stderr:\n%s", what,
                  r.status, r.err);
    ck_assert_msg(strstr(r.err, refusal) != NULL && probe_count_lines(r.err) == 1,
                  "%s: not one line saying '%s':\n%s", what, refusal, r.err);
  }
  if (!emulated()) {
    ck_assert_msg(cpu < CPU_BOUND_S, "%s: %.2f s of CPU", what, cpu);
    ck_assert_msg(r.usage.ru_maxrss < RSS_BOUND_KIB, "%s: %ld KiB resident", what, r.usage.ru_maxrss);
  }
  probe_run_free(&r);
}

/* Every command that reads one profile, on p (diff from a small profile of the same sample type); the
 * reports refused with `refusal` (NULL: handled). */
static void every_command(const char *dir, const char *p, const char *refusal)
{
  char out[PATH_MAX + 16], base[PATH_MAX + 32];
  snprintf(out, sizeof out, "%s/out", dir);
  hostile(dir, "order-a", "base.pb", base, sizeof base);
  bounded((const char *const[]){"top", p, NULL}, refusal);
  bounded((const char *const[]){"top", "--lines", "--fold-alloc", "--focus", ".", "-s", "inuse_space", p,
                                NULL}, refusal);
  bounded((const char *const[]){"tree", p, NULL}, refusal);
  bounded((const char *const[]){"tree", "--callees", "--min", "0", p, NULL}, refusal);
  bounded((const char *const[]){"flame", "-o", out, p, NULL}, refusal);
  bounded((const char *const[]){"folded", p, NULL}, refusal);
  bounded((const char *const[]){"diff", base, p, NULL}, refusal);
}

/* Profiles whose reading stops: every command refuses them, merge and symbolize too. */
static void refused_by_all(const char *dir, const char *p, const char *refusal)
{
  char out[PATH_MAX + 16];
  snprintf(out, sizeof out, "%s/out", dir);
  every_command(dir, p, refusal);
  bounded((const char *const[]){"merge", "-o", out, p, p, NULL}, refusal);
  bounded((const char *const[]){"symbolize", "-o", out, p, NULL}, refusal);
}

/* merge and symbolize, which walk no stacks: they handle what the reports refuse. */
static void merged_and_symbolized(const char *dir, const char *p)
{
  char out[PATH_MAX + 16];
  snprintf(out, sizeof out, "%s/out.pb.gz", dir);
  bounded((const char *const[]){"merge", "-o", out, p, p, NULL}, NULL);
  bounded((const char *const[]){"symbolize", "-q", "-o", out, p, NULL}, NULL);
}

/* Hostile profile `kind`, written into a fresh directory: the reports refuse it with `refusal` (NULL:
 * they handle it), merge and symbolize handle it. */
static void reports_and_writers(const char *kind, const char *refusal, char *path, size_t len)
{
  char dir[PATH_MAX];
  tool_tmpdir(dir, sizeof dir);
  hostile(dir, kind, "hostile.pb", path, len);
  every_command(dir, path, refusal);
  merged_and_symbolized(dir, path);
}

/* A 2 KB profile that makes a stack of 450,000 frames: one location of 450 lines named 1,000 times.  Over
 * the limit of frames per stack: refused. */
START_TEST(tool_hostile_repeated_frames)
{
  char p[PATH_MAX + 32];
  reports_and_writers("repeated-frames", "a stack of more than 131072 frames", p, sizeof p);
}
END_TEST

/* Just under the limits: 16 stacks of 64,001 frames, 1,024,016 in all, from 5.5 KB, each stack one
 * frame repeated (a hash of (parent, name) that ignores the parent puts them all in a few slots):
 * handled, in time linear in the frames. */
START_TEST(tool_hostile_deep_stacks)
{
  char p[PATH_MAX + 32];
  reports_and_writers("deep-stacks", NULL, p, sizeof p);
}
END_TEST

/* 390 KB that inflates to 256 MiB: stopped while inflating, at 16 MiB. */
START_TEST(tool_hostile_gzip_bomb)
{
  char dir[PATH_MAX], p[PATH_MAX + 32];
  tool_tmpdir(dir, sizeof dir);
  hostile(dir, "gzip-bomb", "bomb.pb.gz", p, sizeof p);
  refused_by_all(dir, p, "inflates to more than 64 times its size: a gzip bomb?");
}
END_TEST

/* 2 MiB of empty messages, each 40 to 100 bytes once decoded: refused while protobuf-c unpacks it. */
START_TEST(tool_hostile_empty_parts)
{
  char dir[PATH_MAX], p[PATH_MAX + 32];
  tool_tmpdir(dir, sizeof dir);
  hostile(dir, "empty-parts", "empty.pb", p, sizeof p);
  refused_by_all(dir, p, "has too many parts for its size");
}
END_TEST

/* A 64 KiB name on 60,000 frames: 3.9 GB as folded text, twice that as a flame graph.  Refused by the
 * reports; merge and symbolize handle it. */
START_TEST(tool_hostile_long_names)
{
  char p[PATH_MAX + 32];
  reports_and_writers("long-names", "bytes of frame names in all", p, sizeof p);
}
END_TEST

/* 20,000 locations whose addresses differ only above bit 31: one bucket for a hash that keeps the low
 * bits, and merge, diff and symbolize quadratic in their number. */
START_TEST(tool_hostile_colliding)
{
  char p[PATH_MAX + 32];
  reports_and_writers("colliding", NULL, p, sizeof p);
}
END_TEST

/* 60,000 mappings of files that do not exist, and one location: symbolize looks for one file. */
START_TEST(tool_hostile_mappings)
{
  char p[PATH_MAX + 32];
  reports_and_writers("mappings", NULL, p, sizeof p);
}
END_TEST

/* A 64 KiB string as each of 1,000,000 comments: hashed once, not once per comment. */
START_TEST(tool_hostile_comments)
{
  char p[PATH_MAX + 32];
  reports_and_writers("comments", NULL, p, sizeof p);
}
END_TEST

/* A function whose file is 1 MiB of slashes, then src/f.c, on 60,000 lines: with --lines, 60,000 frame
 * names, for which the path is shortened once, not once per name (2.5 s of strrchr). */
START_TEST(tool_hostile_long_path)
{
  char p[PATH_MAX + 32];
  reports_and_writers("long-path", NULL, p, sizeof p);
}
END_TEST

/* A 669-byte mangled name that stands for 2^40 copies of "A" (__cxa_demangle takes 1.9 s and 310 MB for
 * 22 levels, 4 times that for each 2 more): shown mangled. */
START_TEST(tool_hostile_mangled)
{
  char p[PATH_MAX + 32];
  reports_and_writers("mangled", NULL, p, sizeof p);
  probe_run_t r = tool_run((const char *const[]){"top", p, NULL}, NULL);
  probe_assert_exit0(&r, "top");
  ck_assert_msg(strstr(r.out, "  _Z1fISt4pairI1AS0_ESt4pairIS2_S2_E") != NULL, "%s", r.out);
  probe_run_free(&r);
}
END_TEST

/* Values at the ends of int64_t, and ids that are not 1..n: handled. */
START_TEST(tool_hostile_values_and_ids)
{
  char p[PATH_MAX + 32];
  reports_and_writers("values", NULL, p, sizeof p);
  reports_and_writers("ids", NULL, p, sizeof p);
}
END_TEST

/* merge A B and merge B A: the same time (the earliest start), duration (to the latest end), period and
 * stacks with their values; read back, and as `folded` prints them. */
static void assert_same_merges(const char *dir, const char *a, const char *b)
{
  char ab[PATH_MAX + 16], ba[PATH_MAX + 16];
  snprintf(ab, sizeof ab, "%s/ab.pb.gz", dir);
  snprintf(ba, sizeof ba, "%s/ba.pb.gz", dir);
  bounded((const char *const[]){"merge", "-o", ab, a, b, NULL}, NULL);
  bounded((const char *const[]){"merge", "-o", ba, b, a, NULL}, NULL);
  profile_t *x = tool_profile(ab), *y = tool_profile(ba);
  ck_assert_int_eq(x->time_nanos, y->time_nanos);
  ck_assert_int_eq(x->duration_nanos, y->duration_nanos);
  ck_assert_int_eq(x->period, y->period);
  ck_assert_uint_eq(x->n_sample, y->n_sample);
  profile_free(x);
  profile_free(y);
  for (int lines = 0; lines < 2; lines++) {
    const char *opt = lines ? "--lines" : "--fold-alloc";
    probe_run_t rx = tool_run((const char *const[]){"folded", opt, ab, NULL}, NULL);
    probe_run_t ry = tool_run((const char *const[]){"folded", opt, ba, NULL}, NULL);
    probe_assert_exit0(&rx, "folded A B");
    probe_assert_exit0(&ry, "folded B A");
    ck_assert_str_eq(rx.out, ry.out);
    probe_run_free(&rx);
    probe_run_free(&ry);
  }
}

/* Merged times: A from 100 s for 50 s, B from 120 s for 100 s: 100 s to 220 s in either order; and the
 * ends of int64_t: INT64_MAX for INT64_MAX with INT64_MIN for 1 spans everything, the duration saturated
 * (end - start overflows: UBSan would report it). */
START_TEST(tool_hostile_merge_order)
{
  char dir[PATH_MAX], a[PATH_MAX + 32], b[PATH_MAX + 32], m[PATH_MAX + 32];
  tool_tmpdir(dir, sizeof dir);
  hostile(dir, "order-a", "a.pb", a, sizeof a);
  hostile(dir, "order-b", "b.pb", b, sizeof b);
  assert_same_merges(dir, a, b);
  snprintf(m, sizeof m, "%s/ab.pb.gz", dir);
  profile_t *p = tool_profile(m);
  ck_assert_int_eq(p->time_nanos, 100000000000);
  ck_assert_int_eq(p->duration_nanos, 120000000000);
  profile_free(p);
  hostile(dir, "time-max", "a.pb", a, sizeof a);
  hostile(dir, "time-min", "b.pb", b, sizeof b);
  assert_same_merges(dir, a, b);
  p = tool_profile(m);
  ck_assert_int_eq(p->time_nanos, INT64_MIN);
  ck_assert_int_eq(p->duration_nanos, INT64_MAX);
  profile_free(p);
  hostile(dir, "typical", "a.pb", a, sizeof a);
  hostile(dir, "typical-b", "b.pb", b, sizeof b);
  assert_same_merges(dir, a, b);
  p = tool_profile(m);
  ck_assert_int_eq(p->time_nanos, 1700000000000000000);
  ck_assert_int_eq(p->duration_nanos, 90000000000);          /* to 60 s + 30 s */
  profile_free(p);
  hostile(dir, "values", "a.pb", a, sizeof a);
  hostile(dir, "ids", "b.pb", b, sizeof b);
  assert_same_merges(dir, a, b);
}
END_TEST

/* MIMALLOC_PROF_READ_LIMIT: a profile over it is refused, naming the variable; one at it is read; a
 * malformed value is an error.  The typical profile is 995 bytes, not compressed. */
START_TEST(tool_hostile_read_limit)
{
  char dir[PATH_MAX], p[PATH_MAX + 32];
  tool_tmpdir(dir, sizeof dir);
  hostile(dir, "typical", "t.pb", p, sizeof p);
  struct stat st;
  ck_assert_int_eq(stat(p, &st), 0);
  char at[64], under[64];
  snprintf(at, sizeof at, "MIMALLOC_PROF_READ_LIMIT=%lld", (long long)st.st_size);
  snprintf(under, sizeof under, "MIMALLOC_PROF_READ_LIMIT=%lld", (long long)st.st_size - 1);
  probe_run_t r = tool_run((const char *const[]){"top", p, NULL}, (const char *const[]){at, NULL});
  probe_assert_exit0(&r, "top at the limit");
  probe_run_free(&r);
  r = tool_run((const char *const[]){"top", p, NULL}, (const char *const[]){under, NULL});
  ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 1 && probe_count_lines(r.err) == 1 &&
                strstr(r.err, "is larger than 994 bytes decompressed, the limit (MIMALLOC_PROF_READ_LIMIT"),
                "%s", r.err);
  probe_run_free(&r);
  const char *const mib[] = {"MIMALLOC_PROF_READ_LIMIT=1M", NULL};
  r = tool_run((const char *const[]){"top", p, NULL}, mib);
  probe_assert_exit0(&r, "top, 1m");
  probe_run_free(&r);
  const char *const lots[] = {"MIMALLOC_PROF_READ_LIMIT=lots", NULL};
  r = tool_run((const char *const[]){"top", p, NULL}, lots);
  ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 1 &&
                strstr(r.err, "MIMALLOC_PROF_READ_LIMIT='lots': expected a size") != NULL, "%s", r.err);
  probe_run_free(&r);
}
END_TEST

Suite *tool_hostile_suite(void)
{
  Suite *s = suite_create("tool_hostile");
  TCase *tc = tcase_create("tool_hostile");
  tcase_set_timeout(tc, 120);                     /* wall time, on a shared machine: CPU is what is bounded */
  tcase_add_unchecked_fixture(tc, tool_dirs_setup, tool_dirs_teardown);
  tcase_add_test(tc, tool_hostile_repeated_frames);
  tcase_add_test(tc, tool_hostile_deep_stacks);
  tcase_add_test(tc, tool_hostile_gzip_bomb);
  tcase_add_test(tc, tool_hostile_empty_parts);
  tcase_add_test(tc, tool_hostile_long_names);
  tcase_add_test(tc, tool_hostile_colliding);
  tcase_add_test(tc, tool_hostile_mappings);
  tcase_add_test(tc, tool_hostile_comments);
  tcase_add_test(tc, tool_hostile_long_path);
  tcase_add_test(tc, tool_hostile_mangled);
  tcase_add_test(tc, tool_hostile_values_and_ids);
  tcase_add_test(tc, tool_hostile_merge_order);
  tcase_add_test(tc, tool_hostile_read_limit);
  suite_add_tcase(s, tc);
  return s;
}

#endif
