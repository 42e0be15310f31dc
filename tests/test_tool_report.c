/* test_tool_report.c - top, tree, diff, merge and folded of mimalloc-prof on synthetic profiles whose
 * values are known exactly (tool_synthetic), and symbolize's rules for what it must leave alone. */
#define _GNU_SOURCE
#include <dirent.h>
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

#define MiB (1024 * 1024)

/* inuse: grow 3 MiB, operator new 2 MiB, gamma 1 MiB, dropped 512 KiB: 6.5 MiB in all. */
static const tool_stack_t base_stacks[] = {
  {"main;alpha;grow", 4 * MiB, 3 * MiB},
  {"main;beta;gamma", 2 * MiB, 1 * MiB},
  {"main;alpha;operator new(unsigned long)", 2 * MiB, 2 * MiB},
  {"[dropped]", 1 * MiB, MiB / 2},
};

static const char *base_profile(char *dir, size_t len, char *path, size_t plen)
{
  tool_tmpdir(dir, len);
  snprintf(path, plen, "%s/base.pb.gz", dir);
  tool_synthetic(path, base_stacks, 4, 0x555500000000ull, NULL);
  return path;
}

/* The output line that ends with `name` (a row of top or diff). */
static const char *row(const char *out, const char *name, char *buf, size_t len)
{
  for (const char *l = out; *l; ) {
    const char *nl = strchr(l, '\n');
    size_t n = nl ? (size_t)(nl - l) : strlen(l);
    size_t k = strlen(name);
    if (n >= k + 2 && memcmp(l + n - k, name, k) == 0 && l[n - k - 1] == ' ') {
      snprintf(buf, len, "%.*s", (int)n, l);
      return buf;
    }
    if (nl == NULL) break;
    l = nl + 1;
  }
  ck_abort_msg("no row for %s in:\n%s", name, out);
  return NULL;
}

static void assert_row(const char *out, const char *name, const char *want)
{
  char buf[512];
  const char *r = row(out, name, buf, sizeof buf);
  char norm[512];                             /* spaces squeezed */
  size_t o = 0;
  for (const char *s = r; *s && o + 1 < sizeof norm; s++) {
    if (*s == ' ' && (o == 0 || norm[o - 1] == ' ')) continue;
    norm[o++] = *s;
  }
  norm[o] = '\0';
  ck_assert_msg(strcmp(norm, want) == 0, "row '%s', want '%s'", norm, want);
}

static probe_run_t run_ok(const char *const *args)
{
  probe_run_t r = tool_run(args, NULL);
  probe_assert_exit0(&r, args[0]);
  return r;
}

START_TEST(tool_report_top)
{
  char dir[PATH_MAX], p[PATH_MAX + 16];
  base_profile(dir, sizeof dir, p, sizeof p);
  probe_run_t r = run_ok((const char *const[]){"top", p, NULL});
  ck_assert_msg(strstr(r.out, ": inuse_space, 6.50 MiB in 4 stacks") != NULL, "%s", r.out);
  assert_row(r.out, "grow", "3.00 MiB 46.2% 46.2% 3.00 MiB 46.2% grow");
  assert_row(r.out, "operator new", "2.00 MiB 30.8% 76.9% 2.00 MiB 30.8% operator new");
  assert_row(r.out, "alpha", "0 B 0.0% 100.0% 5.00 MiB 76.9% alpha");
  assert_row(r.out, "[mimalloc-prof: dropped (unwind)]",
             "512 KiB 7.7% 100.0% 512 KiB 7.7% [mimalloc-prof: dropped (unwind)]");
  probe_run_free(&r);
  r = run_ok((const char *const[]){"top", "--fold-alloc", "-s", "alloc_space", p, NULL});
  ck_assert_msg(strstr(r.out, ": alloc_space, 9.00 MiB in 4 stacks") != NULL, "%s", r.out);
  assert_row(r.out, "alpha", "2.00 MiB 22.2% 66.7% 6.00 MiB 66.7% alpha");
  ck_assert_msg(strstr(r.out, "operator new") == NULL, "not folded:\n%s", r.out);
  probe_run_free(&r);
  r = run_ok((const char *const[]){"top", "--focus", "^be", p, NULL});
  ck_assert_msg(strstr(r.out, "1.00 MiB in 1 stacks") && strstr(r.out, "kept 15.4% of 6.50 MiB"), "%s", r.out);
  probe_run_free(&r);
  r = run_ok((const char *const[]){"top", "--ignore", "alpha", "--sort", "cum", "-n", "2", p, NULL});
  ck_assert_msg(strstr(r.out, "1.50 MiB in 2 stacks") && strstr(r.out, "(2 more sites; -n 4 shows all)"), "%s", r.out);
  assert_row(r.out, "gamma", "1.00 MiB 66.7% 66.7% 1.00 MiB 66.7% gamma");
  assert_row(r.out, "main", "0 B 0.0% 66.7% 1.00 MiB 66.7% main");
  probe_run_free(&r);
}
END_TEST

/* An exit profile with nothing in use: the default type is empty, and top says what to do. */
START_TEST(tool_report_inuse_hint)
{
  char dir[PATH_MAX], p[PATH_MAX + 16];
  tool_tmpdir(dir, sizeof dir);
  snprintf(p, sizeof p, "%s/freed.pb.gz", dir);
  static const tool_stack_t freed[] = {{"main;work", 3 * MiB, 0}};
  tool_synthetic(p, freed, 1, 0x400000, NULL);
  probe_run_t r = run_ok((const char *const[]){"top", p, NULL});
  ck_assert_msg(strstr(r.out, "(nothing was in use when the profile was written, but 3.00 MiB were allocated: add "
                              "-s alloc_space)") != NULL, "%s", r.out);
  probe_run_free(&r);
}
END_TEST

START_TEST(tool_report_folded_and_tree)
{
  char dir[PATH_MAX], p[PATH_MAX + 16];
  base_profile(dir, sizeof dir, p, sizeof p);
  probe_run_t r = run_ok((const char *const[]){"folded", p, NULL});
  ck_assert_str_eq(r.out, "[mimalloc-prof: dropped (unwind)] 524288\n"
                          "main;alpha;grow 3145728\n"
                          "main;alpha;operator new 2097152\n"
                          "main;beta;gamma 1048576\n");
  probe_run_free(&r);
  r = run_ok((const char *const[]){"tree", "-n", "1", p, NULL});
  ck_assert_msg(strstr(r.out, "\n  3.00 MiB  46.2%  grow\n  3.00 MiB  46.2%  alpha\n  3.00 MiB  46.2%  main\n") != NULL,
                "%s", r.out);
  probe_run_free(&r);
  r = run_ok((const char *const[]){"tree", "--callees", "-n", "1", p, NULL});
  ck_assert_msg(strstr(r.out, "\n  6.00 MiB  92.3%  main\n  5.00 MiB  76.9%    alpha\n  3.00 MiB  46.2%      grow\n"
                              "  2.00 MiB  30.8%      operator new\n  1.00 MiB  15.4%    beta\n"
                              "  1.00 MiB  15.4%    gamma\n") != NULL,
                "%s", r.out);
  probe_run_free(&r);
}
END_TEST

/* diff: NEW - BASE, with NEW's program at another load address (ASLR): locations still match. */
START_TEST(tool_report_diff_and_merge)
{
  char dir[PATH_MAX], p[PATH_MAX + 16], q[PATH_MAX + 16], m[PATH_MAX + 16], d[PATH_MAX + 16];
  base_profile(dir, sizeof dir, p, sizeof p);
  snprintf(q, sizeof q, "%s/new.pb.gz", dir);
  static const tool_stack_t grown[] = {
    {"main;alpha;grow", 5 * MiB, 4 * MiB},
    {"main;alpha;operator new(unsigned long)", 2 * MiB, 2 * MiB},
    {"[dropped]", 1 * MiB, MiB / 2},
  };
  tool_synthetic(q, grown, 3, 0x7f0000000000ull, NULL);
  snprintf(d, sizeof d, "%s/diff.pb.gz", dir);
  /* At the synthetic profiles' rate (512 KiB) and block size (1 KiB), grow's 3 -> 4 MiB is noise: its
   * standard error is sqrt(3 MiB x 512 KiB + 4 MiB x 512 KiB) = 1.87 MiB (tools/view.c), twice that
   * 3.7 MiB.  --noise 0 shows the rows unmarked. */
  probe_run_t r = run_ok((const char *const[]){"diff", "-o", d, p, q, NULL});
  assert_row(r.out, "grow", "+1.00 MiB +1.00 MiB (noise) grow");
  probe_run_free(&r);
  r = run_ok((const char *const[]){"diff", "--noise", "0", "-o", d, p, q, NULL});
  ck_assert_msg(strstr(r.out, "inuse_space: 6.50 MiB (BASE) -> 6.50 MiB (NEW), change +0 B") != NULL, "%s", r.out);
  assert_row(r.out, "grow", "+1.00 MiB +1.00 MiB grow");
  assert_row(r.out, "gamma", "-1.00 MiB -1.00 MiB gamma");
  ck_assert_msg(strstr(r.out, "operator new") == NULL, "unchanged site listed:\n%s", r.out);
  ck_assert_msg(strstr(r.out, "(noise)") == NULL, "%s", r.out);
  profile_free(tool_profile(d));
  probe_run_free(&r);
  snprintf(m, sizeof m, "%s/merged.pb.gz", dir);
  r = run_ok((const char *const[]){"merge", "-o", m, p, q, NULL});
  probe_run_free(&r);
  profile_t *mp = tool_profile(m);
  ck_assert_uint_eq(mp->n_mapping, 1);
  profile_free(mp);
  r = run_ok((const char *const[]){"top", m, NULL});
  ck_assert_msg(strstr(r.out, "13.0 MiB in 4 stacks") != NULL, "%s", r.out);
  assert_row(r.out, "grow", "7.00 MiB 53.8% 53.8% 7.00 MiB 53.8% grow");
  probe_run_free(&r);
}
END_TEST

/* -o naming something that is not a regular file is written in place, never replaced: every command that
 * writes a file (diff, merge, symbolize, flame) is given a symbolic link to /dev/null.  They renamed
 * their temporary file over the path, which replaced the link here, and /dev/null itself for `-o
 * /dev/null` run as root (a test machine's /dev/null became a regular file).  After each, the link is
 * still a link to the device, and no temporary file is left beside it. */
START_TEST(tool_report_output_not_regular)
{
  char dir[PATH_MAX], p[PATH_MAX + 16], link[PATH_MAX + 16], target[64];
  base_profile(dir, sizeof dir, p, sizeof p);
  snprintf(link, sizeof link, "%s/null", dir);
  ck_assert_int_eq(symlink("/dev/null", link), 0);
  const char *const cmds[][7] = {
    {"diff", "-o", link, p, p, NULL},
    {"merge", "-o", link, p, p, NULL},
    {"symbolize", "-o", link, p, NULL},
    {"flame", "-o", link, p, NULL},
  };
  for (size_t k = 0; k < sizeof cmds / sizeof cmds[0]; k++) {
    probe_run_t r = run_ok(cmds[k]);
    probe_run_free(&r);
    struct stat st;
    ck_assert_msg(lstat(link, &st) == 0 && S_ISLNK(st.st_mode), "%s replaced the link", cmds[k][0]);
    ssize_t n = readlink(link, target, sizeof target - 1);
    ck_assert_int_gt(n, 0);
    target[n] = '\0';
    ck_assert_str_eq(target, "/dev/null");
  }
  DIR *d = opendir(dir);
  ck_assert_ptr_nonnull(d);
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    ck_assert_msg(strncmp(e->d_name, ".null.", 6) != 0, "temporary file %s left", e->d_name);
  closedir(d);
}
END_TEST

/* A profile of two sample types (alloc_objects, alloc_space) next to one of four: diff and merge refuse,
 * naming both lists (the message once printed whatever was on the stack). */
START_TEST(tool_report_different_types)
{
  char dir[PATH_MAX], p[PATH_MAX + 16], q[PATH_MAX + 16], m[PATH_MAX + 16], want[2 * PATH_MAX + 200];
  base_profile(dir, sizeof dir, p, sizeof p);
  snprintf(q, sizeof q, "%s/two.pb.gz", dir);
  char *strings[] = {"", "alloc_objects", "count", "alloc_space", "bytes"};
  value_type_t vt[2] = {PERFTOOLS__PROFILES__VALUE_TYPE__INIT, PERFTOOLS__PROFILES__VALUE_TYPE__INIT};
  value_type_t *vtp[2] = {&vt[0], &vt[1]};
  vt[0].type = 1, vt[0].unit = 2, vt[1].type = 3, vt[1].unit = 4;
  profile_t h = PERFTOOLS__PROFILES__PROFILE__INIT;
  h.string_table = strings;
  h.n_string_table = 5;
  h.sample_type = vtp;
  h.n_sample_type = 2;
  pbuild_t *b = pbuild_new(&h);
  ck_assert_ptr_nonnull(b);
  uint64_t loc = pb_location(b, 0, 0x1000, &(pb_line_t){pb_function(b, "main", NULL, "", 0), 0}, 1);
  pb_sample(b, &loc, 1, (int64_t[]){1, 4096}, 1);
  char err[512];
  ck_assert_msg(profile_write(pbuild_profile(b), q, err, sizeof err) == 0, "%s", err);
  pbuild_free(b);
  snprintf(m, sizeof m, "%s/out.pb.gz", dir);
  static const char *const cmds[2] = {"diff", "merge"};
  for (int k = 0; k < 2; k++) {
    probe_run_t r = tool_run((const char *const[]){cmds[k], "-o", m, p, q, NULL}, NULL);
    ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 1, "%s: status %d\n%s", cmds[k], r.status, r.err);
    snprintf(want, sizeof want, "mimalloc-prof %s: %s and %s cannot be %s: different sample types (alloc_objects, "
             "alloc_space, inuse_objects, inuse_space; alloc_objects, alloc_space)\n", cmds[k], p, q,
             k == 0 ? "compared" : "merged");
    ck_assert_str_eq(r.err, want);
    ck_assert(!tool_exists(m));
    probe_run_free(&r);
  }
}
END_TEST

/* One sample of DEEP frames named f00000 (outermost) .. f99999 (innermost), 1 MiB: as DEEP locations of
 * one line each, or (inlines) as one location with DEEP lines. */
#define DEEP 100000
static void deep_profile(const char *path, bool inlines)
{
  pbuild_t *b = pbuild_new_heap(524288);
  ck_assert_ptr_nonnull(b);
  uint64_t *ids = malloc(DEEP * sizeof *ids);
  pb_line_t *lines = malloc(DEEP * sizeof *lines);
  ck_assert(ids != NULL && lines != NULL);
  for (size_t k = 0; k < DEEP; k++) {                     /* innermost first */
    char name[16];
    snprintf(name, sizeof name, "f%05zu", DEEP - 1 - k);
    lines[k] = (pb_line_t){pb_function(b, name, NULL, "", 0), 0};
    if (!inlines) ids[k] = pb_location(b, 0, 0x1000 + 16 * k, &lines[k], 1);
  }
  if (inlines) ids[0] = pb_location(b, 0, 0x1000, lines, DEEP);
  pb_sample(b, ids, inlines ? 1 : DEEP, (int64_t[]){1, MiB, 1, MiB}, 1);
  ck_assert(!pbuild_failed(b));
  char err[512];
  ck_assert_msg(profile_write(pbuild_profile(b), path, err, sizeof err) == 0, "%s", err);
  pbuild_free(b);
  free(ids);
  free(lines);
}

static size_t count(const char *text, const char *what)
{
  size_t n = 0;
  for (const char *s = strstr(text, what); s != NULL; s = strstr(s + 1, what)) n++;
  return n;
}

/* The call tree's walks (flame, tree both ways) and folded on stacks of 100,000 frames, in a child whose
 * stack is 256 KiB: a walk that recursed once per level would need about 100 bytes of stack a level (a
 * crash at 2,000 levels with this limit, at 60,000 with the usual 8 MiB).  One path without branches:
 * every line of tree at one indentation, one flame frame per level. */
START_TEST(tool_report_deep_stacks)
{
  char dir[PATH_MAX], p[PATH_MAX + 16], svg[PATH_MAX + 16], want[64];
  tool_tmpdir(dir, sizeof dir);
  snprintf(p, sizeof p, "%s/deep.pb.gz", dir);
  snprintf(svg, sizeof svg, "%s/deep.svg", dir);
  probe_opts_t o = {.stack_limit = 256 * 1024, .watchdog_s = 120};
  const char *tool = probe_getenv("MPROF_TEST_TOOL");
  for (int inlines = 0; inlines < 2; inlines++) {
    deep_profile(p, inlines);
    probe_run_t r = probe_run(tool, (const char *const[]){"flame", "-o", svg, p, NULL}, &o);
    probe_assert_exit0(&r, "flame");
    probe_run_free(&r);
    r = probe_run("/bin/cat", (const char *const[]){svg, NULL}, NULL);
    ck_assert_uint_eq(count(r.out, "<g class=\"f\""), DEEP + 1);      /* "all", then each level */
    snprintf(want, sizeof want, "data-n=\"f%05d\"", DEEP - 1);
    ck_assert_msg(strstr(r.out, "data-d=\"100000\"") != NULL && strstr(r.out, want) != NULL, "no deepest frame");
    ck_assert(strlen(r.out) > 7 && strcmp(r.out + strlen(r.out) - 7, "</svg>\n") == 0);
    probe_run_free(&r);
    ck_assert_int_eq(unlink(svg), 0);
    for (int callees = 0; callees < 2; callees++) {
      const char *const args[] = {"tree", "--min", "0", "--depth", "100000", p, callees ? "--callees" : NULL, NULL};
      r = probe_run(tool, args, &o);
      probe_assert_exit0(&r, "tree");
      ck_assert_uint_eq(probe_count_lines(r.out), 1 + DEEP);
      ck_assert_uint_eq(count(r.out, "\n  1.00 MiB 100.0%  f"), DEEP);
      snprintf(want, sizeof want, "\n  1.00 MiB 100.0%%  f%05d\n", callees ? DEEP - 1 : 0);    /* the last line */
      ck_assert_msg(strlen(r.out) > strlen(want) && strcmp(r.out + strlen(r.out) - strlen(want), want) == 0,
                    "does not end with '%s'", want + 1);
      probe_run_free(&r);
    }
    r = probe_run(tool, (const char *const[]){"folded", p, NULL}, &o);
    probe_assert_exit0(&r, "folded");
    ck_assert_uint_eq(strlen(r.out), (size_t)DEEP * 7 + strlen("1048576\n"));   /* "fNNNNN;" or "fNNNNN " */
    ck_assert(strncmp(r.out, "f00000;f00001;", 14) == 0 && strstr(r.out, ";f99999 1048576\n") != NULL);
    probe_run_free(&r);
  }
}
END_TEST

/* Values at the ends of int64_t: sums stop there (two sites of INT64_MAX bytes once added up to -2 B),
 * and INT64_MIN bytes print as the opposite of INT64_MAX (8192 PiB = 2^63 B, rounded). */
START_TEST(tool_report_extreme_values)
{
  char dir[PATH_MAX], p[PATH_MAX + 16], q[PATH_MAX + 16], m[PATH_MAX + 16];
  tool_tmpdir(dir, sizeof dir);
  snprintf(p, sizeof p, "%s/max.pb.gz", dir);
  snprintf(q, sizeof q, "%s/min.pb.gz", dir);
  snprintf(m, sizeof m, "%s/merged.pb.gz", dir);
  const tool_stack_t max[] = {{"main;big", INT64_MAX, INT64_MAX}, {"main;other", INT64_MAX, INT64_MAX}};
  const tool_stack_t min[] = {{"main;small", INT64_MIN, INT64_MIN}};
  tool_synthetic(p, max, 2, 0x400000, NULL);
  tool_synthetic(q, min, 1, 0x400000, NULL);
  probe_run_t r = run_ok((const char *const[]){"top", p, NULL});
  ck_assert_msg(strstr(r.out, "inuse_space, 8192 PiB in 2 stacks") != NULL, "%s", r.out);
  assert_row(r.out, "big", "8192 PiB 100.0% 100.0% 8192 PiB 100.0% big");
  assert_row(r.out, "other", "8192 PiB 100.0% 100.0% 8192 PiB 100.0% other");
  probe_run_free(&r);
  r = run_ok((const char *const[]){"folded", p, NULL});
  ck_assert_str_eq(r.out, "main;big 9223372036854775807\nmain;other 9223372036854775807\n");
  probe_run_free(&r);
  r = run_ok((const char *const[]){"top", q, NULL});
  assert_row(r.out, "small", "-8192 PiB 100.0% 100.0% -8192 PiB 100.0% small");
  probe_run_free(&r);
  r = run_ok((const char *const[]){"merge", "-o", m, p, p, NULL});
  probe_run_free(&r);
  profile_t *mp = tool_profile(m);
  ck_assert_uint_eq(mp->n_sample, 2);
  for (size_t i = 0; i < mp->n_sample; i++) {
    ck_assert_int_eq(mp->sample[i]->value[1], INT64_MAX);
    ck_assert_int_eq(mp->sample[i]->value[3], INT64_MAX);
  }
  profile_free(mp);
}
END_TEST

/* symbolize leaves the library's dropped-sample location and names it cannot improve alone, and says
 * why the program's file gave nothing. */
START_TEST(tool_report_symbolize_leaves_named)
{
  char dir[PATH_MAX], p[PATH_MAX + 16];
  base_profile(dir, sizeof dir, p, sizeof p);
  probe_run_t before = run_ok((const char *const[]){"top", p, NULL});
  probe_run_t r = run_ok((const char *const[]){"symbolize", p, NULL});
  ck_assert_msg(strstr(r.err, "/synthetic/prog: no such file, and no file with build ID 0123456789abcdef") != NULL,
                "%s", r.err);
  probe_run_t after = run_ok((const char *const[]){"top", p, NULL});
  ck_assert_str_eq(before.out, after.out);
  profile_t *sp = tool_profile(p);
  pindex_t ix;
  pindex_init(&ix, sp);
  bool dropped = false;
  for (size_t i = 0; i < sp->n_location; i++) {
    if (strcmp(tool_line_name(sp, &ix, sp->location[i], 0), "[mimalloc-prof: dropped (unwind)]") == 0) {
      ck_assert_uint_eq(sp->location[i]->mapping_id, 0);
      ck_assert_uint_eq(sp->location[i]->n_line, 1);
      dropped = true;
    }
  }
  ck_assert(dropped);
  pindex_free(&ix);
  profile_free(sp);
  probe_run_free(&r);
  probe_run_free(&before);
  probe_run_free(&after);
}
END_TEST

Suite *tool_report_suite(void)
{
  Suite *s = suite_create("tool_report");
  TCase *tc = tcase_create("tool_report");
  tcase_add_unchecked_fixture(tc, tool_dirs_setup, tool_dirs_teardown);
  tcase_add_test(tc, tool_report_top);
  tcase_add_test(tc, tool_report_inuse_hint);
  tcase_add_test(tc, tool_report_folded_and_tree);
  tcase_add_test(tc, tool_report_diff_and_merge);
  tcase_add_test(tc, tool_report_different_types);
  tcase_add_test(tc, tool_report_output_not_regular);
  tcase_add_test(tc, tool_report_deep_stacks);
  tcase_add_test(tc, tool_report_extreme_values);
  tcase_add_test(tc, tool_report_symbolize_leaves_named);
  suite_add_tcase(s, tc);
  return s;
}

#endif
