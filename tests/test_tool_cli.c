/* test_tool_cli.c - the command line of mimalloc-prof: every value is checked with the
 * library's own parser before a program runs, a usage error is one line saying what was wrong plus the
 * --help hint, with exit status 2, and -o accepts a directory and leaves nothing outside it. */
#define _GNU_SOURCE
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "suites.h"
#include "tool_util.h"

#if MPROF_PPROF

/* `run` with args; the program would create MARKER in dir: it must not have run. */
static void assert_refused(const char *const *args, const char *const *env, const char *dir, const char *words)
{
  probe_run_t r = tool_run(args, env);
  tool_assert_usage_error(&r, "run", words);
  char marker[PATH_MAX];
  snprintf(marker, sizeof marker, "%s/MARKER", dir);
  ck_assert_msg(!tool_exists(marker), "the program ran");
  probe_run_free(&r);
}

START_TEST(tool_cli_run_checks_values_first)
{
  char dir[PATH_MAX], script[PATH_MAX + 32];
  tool_tmpdir(dir, sizeof dir);
  snprintf(script, sizeof script, "touch %s/MARKER", dir);
  assert_refused((const char *const[]){"run", "-r", "abc", "--", "sh", "-c", script, NULL}, NULL, dir,
                 "-r 'abc' is not a byte count");
  assert_refused((const char *const[]){"run", "-r", "0", "sh", "-c", script, NULL}, NULL, dir, "-r '0' is outside 1..");
  assert_refused((const char *const[]){"run", "--signal=FOO", "sh", "-c", script, NULL}, NULL, dir,
                 "--signal 'FOO' is not a signal");
  assert_refused((const char *const[]){"run", "--signal=SEGV", "sh", "-c", script, NULL}, NULL, dir,
                 "--signal 'SEGV'");
  assert_refused((const char *const[]){"run", "--interval", "1x", "sh", "-c", script, NULL}, NULL, dir,
                 "--interval '1x' is not a byte count");
  assert_refused((const char *const[]){"run", "sh", "-c", script, NULL},
                 (const char *const[]){"MIMALLOC_PROF_BT_MAX=many", NULL}, dir,
                 "MIMALLOC_PROF_BT_MAX=\"many\" in the environment is not a number");
  assert_refused((const char *const[]){"run", "-o", "/nonexistent/dir/x.pb.gz", "sh", "-c", script, NULL}, NULL,
                 dir, "-o '/nonexistent/dir/x.pb.gz': directory /nonexistent/dir");
  assert_refused((const char *const[]){"run", "-o", "/dev/null", "sh", "-c", script, NULL}, NULL, dir,
                 "exists and is not a regular file");
  assert_refused((const char *const[]){"run", "-p", "/nonexistent/p", "sh", "-c", script, NULL}, NULL, dir,
                 "-p '/nonexistent/p'");
  assert_refused((const char *const[]){"run", "-o", "a.pb.gz", "-p", "b", "sh", "-c", script, NULL}, NULL, dir,
                 "-o and -p exclude each other");
  assert_refused((const char *const[]){"run", "--bogus", "sh", "-c", script, NULL}, NULL, dir,
                 "unknown option --bogus");
  assert_refused((const char *const[]){"run", "-r", NULL}, NULL, dir, "option -r needs a value");
  assert_refused((const char *const[]){"run", NULL}, NULL, dir, "no program given");
}
END_TEST

/* -o DIR writes DIR/PROGRAM.pb.gz; nothing else is left in DIR or beside it. */
START_TEST(tool_cli_run_output_directory)
{
  char parent[PATH_MAX], dir[PATH_MAX + 8], want[PATH_MAX + 32];
  tool_tmpdir(parent, sizeof parent);
  snprintf(dir, sizeof dir, "%s/out", parent);
  ck_assert_int_eq(mkdir(dir, 0755), 0);
  probe_run_t r = tool_run((const char *const[]){"run", "--no-symbolize", "-o", dir, "--",
                                                 probe_getenv("MPROF_TEST_SYM_PROG"), NULL}, NULL);
  probe_assert_exit0(&r, "mimalloc-prof run -o DIR");
  snprintf(want, sizeof want, "%s/sym_prog.pb.gz", dir);
  profile_free(tool_profile(want));
  unsigned entries = 0;
  for (const char *d = parent; d != NULL; d = d == parent ? dir : NULL) {
    DIR *h = opendir(d);
    struct dirent *e;
    while ((e = readdir(h)) != NULL) {
      if (e->d_name[0] == '.' && (e->d_name[1] == '\0' || strcmp(e->d_name, "..") == 0)) continue;
      ck_assert_msg(strcmp(e->d_name, "out") == 0 || strcmp(e->d_name, "sym_prog.pb.gz") == 0, "left behind: %s/%s",
                    d, e->d_name);
      entries++;
    }
    closedir(h);
  }
  ck_assert_uint_eq(entries, 2);
  probe_run_free(&r);
}
END_TEST

/* The program's exit status passes through; a program that cannot start gives 127. */
START_TEST(tool_cli_run_exit_status)
{
  char dir[PATH_MAX], out[PATH_MAX + 16];
  tool_tmpdir(dir, sizeof dir);
  snprintf(out, sizeof out, "%s/x.pb.gz", dir);
  probe_run_t r = tool_run((const char *const[]){"run", "--no-symbolize", "-o", out, "sh", "-c", "exit 7", NULL}, NULL);
  ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 7, "status %d: %s", r.status, r.err);
  probe_run_free(&r);
  r = tool_run((const char *const[]){"run", "-o", out, "/nonexistent/program", NULL}, NULL);
  ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 127, "status %d: %s", r.status, r.err);
  ck_assert_msg(strstr(r.err, "cannot run /nonexistent/program") != NULL, "%s", r.err);
  probe_run_free(&r);
}
END_TEST

/* The reports' usage errors, each saying what was wrong. */
START_TEST(tool_cli_report_usage_errors)
{
  static const struct { const char *args[6]; const char *cmd, *words; } cases[] = {
    {{"top", "-n", "0", "x.pb.gz"}, "top", "-n '0': expected a number of rows from 1 up"},
    {{"top", "a.pb.gz", "b.pb.gz"}, "top", "one profile at a time ('b.pb.gz' is one too many"},
    {{"top"}, "top", "no profile given"},
    {{"top", "--sort", "size", "x"}, "top", "--sort 'size': expected flat or cum"},
    {{"top", "--focus", "(", "x"}, "top", "--focus '(': not a regular expression"},
    {{"top", "-s"}, "top", "option -s needs a value"},
    {{"tree", "--min", "200", "x"}, "tree", "--min '200': expected a percentage"},
    {{"diff", "a"}, "diff", "expected two profiles, BASE and NEW (got 1)"},
    {{"merge", "a", "b"}, "merge", "no output given (-o OUT)"},
    {{"flame", "x"}, "flame", "no output given (-o OUT.svg)"},
    {{"symbolize", "--frob", "x"}, "symbolize", "unknown option --frob"},
    {{"folded", "-x", "x"}, "folded", "unknown option -x"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    probe_run_t r = tool_run(cases[i].args, NULL);
    tool_assert_usage_error(&r, cases[i].cmd, cases[i].words);
    probe_run_free(&r);
  }
  probe_run_t r = tool_run((const char *const[]){"frobnicate", NULL}, NULL);
  ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 2 && strstr(r.err, "unknown command 'frobnicate'"),
                "%s", r.err);
  probe_run_free(&r);
  r = tool_run((const char *const[]){"top", "/nonexistent.pb.gz", NULL}, NULL);
  ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 1 && strstr(r.err, "cannot open /nonexistent.pb.gz"),
                "%s", r.err);
  probe_run_free(&r);
}
END_TEST

Suite *tool_cli_suite(void)
{
  Suite *s = suite_create("tool_cli");
  TCase *tc = tcase_create("tool_cli");
  tcase_add_unchecked_fixture(tc, tool_dirs_setup, tool_dirs_teardown);
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, tool_cli_run_checks_values_first);
  tcase_add_test(tc, tool_cli_run_output_directory);
  tcase_add_test(tc, tool_cli_run_exit_status);
  tcase_add_test(tc, tool_cli_report_usage_errors);
  suite_add_tcase(s, tc);
  return s;
}

#endif
