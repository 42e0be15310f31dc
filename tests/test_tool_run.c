/* test_tool_run.c - `mimalloc-prof run` and termination signals (the command's half; the library's is
 * in tests/test_profiler.c): it sets MIMALLOC_PROF_FINAL_SIGNALS=INT,TERM,HUP for the program unless the
 * environment chooses, and forwards SIGTERM (and INT, HUP) sent to it to the program, whose own handler
 * keeps working; with the library's final-signal dump, a program that runs until it is killed still
 * leaves its profile.  Process trees: -o merges the processes' final profiles with labels process and pid,
 * -p keeps and symbolizes every profile under the program's name. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/wait.h>
#include <unistd.h>

#include "suites.h"
#include "tool_util.h"

#if MPROF_PPROF

/* Reads the child's stdout until a whole line "ready" (no sleeping: the read blocks). */
static void wait_ready(int fd)
{
  char buf[64];
  size_t n = 0;
  while (n < sizeof buf - 1) {
    ssize_t r = read(fd, buf + n, 1);
    if (r < 0 && errno == EINTR) continue;
    ck_assert_msg(r == 1, "the program ended before it was ready");
    n++;
    if (buf[n - 1] == '\n') break;
  }
  buf[n] = '\0';
  ck_assert_msg(strcmp(buf, "ready\n") == 0, "first line: %s", buf);
}

START_TEST(tool_run_final_signals_env)
{
  char dir[PATH_MAX], out[PATH_MAX + 16];
  tool_tmpdir(dir, sizeof dir);
  snprintf(out, sizeof out, "%s/p.pb.gz", dir);
  const char *const args[] = {"run", "--no-symbolize", "-o", out, probe_getenv("MPROF_TEST_TOOL_PROBE"), "env", NULL};
  probe_run_t r = tool_run(args, NULL);
  probe_assert_exit0(&r, "run env");
  ck_assert_msg(strstr(r.out, "final_signals INT,TERM,HUP\n") != NULL, "%s", r.out);
  probe_run_free(&r);
  r = tool_run(args, (const char *const[]){"MIMALLOC_PROF_FINAL_SIGNALS=TERM", NULL});
  probe_assert_exit0(&r, "run env, own value");
  ck_assert_msg(strstr(r.out, "final_signals TERM\n") != NULL, "%s", r.out);
  probe_run_free(&r);
}
END_TEST

/* SIGTERM to the command alone reaches the program once, through the command; the program's handler
 * runs, it exits normally, and its profile is there (-r 1: every allocation sampled, so the program's
 * 16 blocks are in it). */
START_TEST(tool_run_forwards_term)
{
  char dir[PATH_MAX], out[PATH_MAX + 16];
  tool_tmpdir(dir, sizeof dir);
  snprintf(out, sizeof out, "%s/p.pb.gz", dir);
  probe_opts_t o = {.watchdog_s = 120};
  probe_child_t c = probe_start(probe_getenv("MPROF_TEST_TOOL"),
                                (const char *const[]){"run", "--no-symbolize", "-r", "1", "-o", out,
                                                      probe_getenv("MPROF_TEST_TOOL_PROBE"), "handler", NULL}, &o);
  wait_ready(c.out);
  ck_assert_int_eq(kill(c.pid, SIGTERM), 0);
  probe_run_t r = probe_finish(&c);
  probe_assert_exit0(&r, "run handler");
  ck_assert_str_eq(r.out, "got TERM\n");
  profile_t *p = tool_profile(out);
  ck_assert_uint_ge(p->n_sample, 1);
  profile_free(p);
  probe_run_free(&r);
}
END_TEST

/* Reads the pty until `want` has been printed; returns all read so far (static). */
static const char *pty_wait(int fd, const char *want)
{
  static char buf[8192];
  static size_t n;
  while (strstr(buf, want) == NULL) {
    ck_assert_msg(n + 1 < sizeof buf, "too much output:\n%s", buf);
    ssize_t r = read(fd, buf + n, sizeof buf - 1 - n);
    if (r < 0 && errno == EINTR) continue;
    ck_assert_msg(r > 0, "the terminal closed before '%s':\n%s", want, buf);
    n += (size_t)r;
    buf[n] = '\0';
  }
  return buf;
}

/* ^C on the program's terminal reaches the command and the program (the terminal signals the whole
 * foreground process group): the command must not forward it a second time.  The program counts the
 * SIGINTs it gets until SIGTERM, which the command forwards: had it forwarded SIGINT, that SIGINT would
 * have reached the program first (the command's handlers run one at a time, lowest signal first). */
START_TEST(tool_run_terminal_int_once)
{
  char dir[PATH_MAX], out[PATH_MAX + 16];
  tool_tmpdir(dir, sizeof dir);
  snprintf(out, sizeof out, "%s/p.pb.gz", dir);
  int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  ck_assert_int_ge(master, 0);
  ck_assert_int_eq(grantpt(master), 0);
  ck_assert_int_eq(unlockpt(master), 0);
  const char *slave = ptsname(master);
  ck_assert_ptr_nonnull(slave);
  const char *tool = probe_getenv("MPROF_TEST_TOOL"), *probe = probe_getenv("MPROF_TEST_TOOL_PROBE");
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {                             /* a session whose controlling terminal is the pty */
    setsid();
    int fd = open(slave, O_RDWR);
    if (fd < 0 || dup2(fd, 0) < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0) _exit(126);
    alarm(120);
    execl(tool, tool, "run", "--no-symbolize", "-o", out, probe, "count", (char *)NULL);
    _exit(127);
  }
  pty_wait(master, "ready");
  ck_assert_int_eq(write(master, "\003", 1), 1);   /* ^C */
  pty_wait(master, "int 1");
  ck_assert_int_eq(kill(pid, SIGTERM), 0);
  const char *all = pty_wait(master, "ints ");
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_msg(strstr(all, "ints 1") != NULL, "the program got SIGINT more than once:\n%s", all);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d:\n%s", status, all);
  close(master);
}
END_TEST

/* `timeout -s TERM 2 mimalloc-prof run -o x.pb.gz -- PROGRAM` with a program that never ends leaves a
 * valid profile (timeout signals the command and its process group). */
START_TEST(tool_run_timeout_term)
{
  char dir[PATH_MAX], out[PATH_MAX + 16];
  tool_tmpdir(dir, sizeof dir);
  snprintf(out, sizeof out, "%s/x.pb.gz", dir);
  probe_opts_t o = {.watchdog_s = 120};
  probe_run_t r = probe_run("/usr/bin/timeout",
                            (const char *const[]){"-s", "TERM", "2", probe_getenv("MPROF_TEST_TOOL"), "run", "-r", "1", "-o",
                                                  out, "--", probe_getenv("MPROF_TEST_TOOL_PROBE"), "forever", NULL}, &o);
  ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 124, "timeout's status %d:\n%s", r.status, r.err);
  ck_assert_msg(access(out, F_OK) == 0, "no profile; stdout:\n%s\nstderr:\n%s", r.out, r.err);
  profile_t *p = tool_profile(out);
  ck_assert_uint_ge(p->n_sample, 1);
  profile_free(p);
  probe_run_free(&r);
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   Process trees: `sh -c 'tool_probe env; exec sym_prog'` forks tool_probe (a child process) and then
   becomes sym_prog (the same process as the shell); both run with the library.
--------------------------------------------------------------------------------------------------- */

static void tree_command(char *buf, size_t len)
{
  snprintf(buf, len, "'%s' env >/dev/null; exec '%s'", probe_getenv("MPROF_TEST_TOOL_PROBE"),
           probe_getenv("MPROF_TEST_SYM_PROG"));
}

/* Label `key` of sample s, or NULL. */
static const label_t *label_of(const profile_t *p, const sample_t *s, const char *key)
{
  for (size_t i = 0; i < s->n_label; i++)
    if (strcmp(pstr(p, s->label[i]->key), key) == 0) return s->label[i];
  return NULL;
}

/* Whether a mapping of p for a file whose name ends in `tail` has function names. */
static bool named(const profile_t *p, const char *tail)
{
  for (size_t i = 0; i < p->n_mapping; i++) {
    const char *f = pstr(p, p->mapping[i]->filename);
    size_t n = strlen(f), k = strlen(tail);
    if (n >= k && strcmp(f + n - k, tail) == 0 && p->mapping[i]->has_functions) return true;
  }
  return false;
}

/* -o FILE: one profile of both processes, every sample labelled with its process (the program's file
 * name) and its numeric pid, one pid per process; symbolized; `top --by process` splits them.  -r 1:
 * every allocation is sampled, so tool_probe's 16 blocks of 64 KiB kept to its exit are exactly 1 MiB
 * in use under process tool_probe, at least. */
START_TEST(tool_run_tree_one_profile)
{
  char dir[PATH_MAX], out[PATH_MAX + 16], cmd[3 * PATH_MAX];
  tool_tmpdir(dir, sizeof dir);
  snprintf(out, sizeof out, "%s/tree.pb.gz", dir);
  tree_command(cmd, sizeof cmd);
  probe_run_t r =
    tool_run((const char *const[]){"run", "-r", "1", "-o", out, "--", "/bin/sh", "-c", cmd, NULL}, NULL);
  probe_assert_exit0(&r, "run sh -c");
  ck_assert_msg(strstr(r.err, "heap profile of 2 processes written to ") != NULL, "%s", r.err);
  ck_assert_msg(strstr(r.err, "more profile(s) discarded") == NULL, "%s", r.err);
  probe_run_free(&r);
  profile_t *p = tool_profile(out);
  size_t inuse = profile_sample_type(p, "inuse_space");
  ck_assert_uint_ne(inuse, SIZE_MAX);
  int64_t probe_inuse = 0, pids[2] = {0, 0};
  for (size_t i = 0; i < p->n_sample; i++) {
    const label_t *lp = label_of(p, p->sample[i], "process"), *ln = label_of(p, p->sample[i], "pid");
    ck_assert_msg(lp != NULL && lp->str != 0 && ln != NULL && ln->str == 0 && ln->num > 0, "sample %zu", i);
    const char *process = pstr(p, lp->str);
    int64_t pid = ln->num;
    int k = strcmp(process, "tool_probe") == 0 ? 0 : 1;
    ck_assert_msg(k == 0 || strcmp(process, "sym_prog") == 0, "process %s", process);
    ck_assert_msg(pids[k] == 0 || pids[k] == pid, "two pids for %s", process);
    pids[k] = pid;
    if (k == 0) probe_inuse += p->sample[i]->value[inuse];
  }
  ck_assert_int_ne(pids[0], 0);
  ck_assert_int_ne(pids[1], 0);
  ck_assert_int_ne(pids[0], pids[1]);
  ck_assert_int_ge(probe_inuse, 16 * 65536);
  ck_assert(named(p, "/sym_prog"));
  ck_assert(named(p, "/tool_probe"));
  profile_free(p);
  r = tool_run((const char *const[]){"top", "--by", "process", out, NULL}, NULL);
  probe_assert_exit0(&r, "top --by process");
  ck_assert_msg(strstr(r.out, "  tool_probe ") != NULL && strstr(r.out, "  sym_prog ") != NULL, "%s", r.out);
  probe_run_free(&r);
}
END_TEST

/* Every profile matching pattern is symbolized for a mapping whose file ends in tail; how many. */
static size_t all_named(const char *pattern, const char *tail)
{
  glob_t g;
  if (glob(pattern, 0, NULL, &g) != 0) return 0;
  for (size_t i = 0; i < g.gl_pathc; i++) {
    profile_t *p = tool_profile(g.gl_pathv[i]);
    ck_assert_msg(named(p, tail), "%s is not symbolized", g.gl_pathv[i]);
    profile_free(p);
  }
  size_t n = g.gl_pathc;
  globfree(&g);
  return n;
}

/* -p PREFIX: the final profiles of both processes stay, symbolized, named PREFIX.PROGRAM.PID.SEQ.KIND.pb.gz
 * (any interval profile they wrote too); no profile keeps the library's name. */
START_TEST(tool_run_tree_prefix)
{
  char dir[PATH_MAX], prefix[PATH_MAX + 16], cmd[3 * PATH_MAX], pattern[PATH_MAX + 64];
  tool_tmpdir(dir, sizeof dir);
  snprintf(prefix, sizeof prefix, "%s/pp", dir);
  tree_command(cmd, sizeof cmd);
  probe_run_t r = tool_run((const char *const[]){"run", "-r", "1", "--interval", "256k", "-p", prefix, "--",
                                                 "/bin/sh", "-c", cmd, NULL}, NULL);
  probe_assert_exit0(&r, "run -p sh -c");
  ck_assert_msg(strstr(r.err, "heap profile of tool_probe (process ") != NULL, "%s", r.err);
  probe_run_free(&r);
  snprintf(pattern, sizeof pattern, "%s.tool_probe.*.*.f.pb.gz", prefix);
  ck_assert_uint_eq(all_named(pattern, "/tool_probe"), 1);
  snprintf(pattern, sizeof pattern, "%s.sym_prog.*.*.f.pb.gz", prefix);
  ck_assert_uint_eq(all_named(pattern, "/sym_prog"), 1);
  snprintf(pattern, sizeof pattern, "%s.tool_probe.*.pb.gz", prefix);
  all_named(pattern, "/tool_probe");
  snprintf(pattern, sizeof pattern, "%s.[0-9]*.pb.gz", prefix);
  glob_t g;
  ck_assert_int_eq(glob(pattern, 0, NULL, &g), GLOB_NOMATCH);
}
END_TEST

/* Interval profiles are symbolized too: tool_probe allocates 1 MiB at -r 1 with --interval 256k before it
 * says "ready"; the test waits for the library to rename its first interval profile into place
 * (inotify), then ends the program with SIGTERM through the command. */
START_TEST(tool_run_interval_symbolized)
{
  char dir[PATH_MAX], prefix[PATH_MAX + 16], pattern[PATH_MAX + 64];
  tool_tmpdir(dir, sizeof dir);
  snprintf(prefix, sizeof prefix, "%s/iv", dir);
  int in = inotify_init1(IN_CLOEXEC);
  ck_assert_int_ge(in, 0);
  ck_assert_int_ge(inotify_add_watch(in, dir, IN_MOVED_TO), 0);
  probe_opts_t o = {.watchdog_s = 120};
  const char *const args[] = {"run", "-r", "1", "--interval", "256k", "-p", prefix,
                              probe_getenv("MPROF_TEST_TOOL_PROBE"), "handler", NULL};
  probe_child_t c = probe_start(probe_getenv("MPROF_TEST_TOOL"), args, &o);
  wait_ready(c.out);
  bool interval = false;
  while (!interval) {                             /* blocks until a name is moved into dir */
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    ssize_t n = read(in, buf, sizeof buf);
    ck_assert_int_gt(n, 0);
    for (char *e = buf; e < buf + n; e += sizeof(struct inotify_event) + ((struct inotify_event *)e)->len) {
      const struct inotify_event *ev = (const struct inotify_event *)e;
      interval |= ev->len > 0 && strstr(ev->name, ".i.pb.gz") != NULL;
    }
  }
  close(in);
  ck_assert_int_eq(kill(c.pid, SIGTERM), 0);
  probe_run_t r = probe_finish(&c);
  probe_assert_exit0(&r, "run -p handler");
  probe_run_free(&r);
  snprintf(pattern, sizeof pattern, "%s.tool_probe.*.*.i.pb.gz", prefix);
  ck_assert_uint_ge(all_named(pattern, "/tool_probe"), 1);
  snprintf(pattern, sizeof pattern, "%s.tool_probe.*.*.f.pb.gz", prefix);
  ck_assert_uint_eq(all_named(pattern, "/tool_probe"), 1);
}
END_TEST

/* --leak: what is in use at exit, named, in human sizes, with shares; not the library's raw report
 * (MIMALLOC_PROF_LEAK=1 in the environment is replaced).  tool_probe keeps 16 blocks of 64 KiB from
 * main to its exit; at -r 1 every allocation is sampled with its own size, so main's row is exactly
 * 1 MiB, and its share is 1 MiB over the total (tool_probe's stdio buffer besides: under 1%). */
START_TEST(tool_run_leak_report)
{
  char dir[PATH_MAX], out[PATH_MAX + 16];
  tool_tmpdir(dir, sizeof dir);
  snprintf(out, sizeof out, "%s/leak.pb.gz", dir);
  probe_run_t r = tool_run((const char *const[]){"run", "--leak", "-r", "1", "-o", out,
                                                 probe_getenv("MPROF_TEST_TOOL_PROBE"), "env", NULL},
                           (const char *const[]){"MIMALLOC_PROF_LEAK=1", NULL});
  probe_assert_exit0(&r, "run --leak");
  const char *report = strstr(r.err, "Still in use at exit (estimated from samples): ");
  ck_assert_msg(report != NULL && strstr(report, " objects\n") != NULL, "%s", r.err);
  const char *row = strstr(report, "  1.00 MiB  ");
  ck_assert_msg(row != NULL && strncmp(strchr(row, '%') + 1, "  main\n", 7) == 0, "%s", r.err);
  double share = strtod(row + 12, NULL);
  ck_assert_msg(share >= 99.0 && share <= 100.0, "main's share %.1f:\n%s", share, r.err);
  ck_assert_msg(strstr(r.err, "+0x") == NULL && strstr(r.err, "leak report") == NULL, "%s", r.err);
  probe_run_free(&r);
}
END_TEST

Suite *tool_run_suite(void)
{
  Suite *s = suite_create("tool_run");
  TCase *tc = tcase_create("tool_run");
  tcase_add_unchecked_fixture(tc, tool_dirs_setup, tool_dirs_teardown);
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, tool_run_final_signals_env);
  tcase_add_test(tc, tool_run_forwards_term);
  tcase_add_test(tc, tool_run_terminal_int_once);
  /* Relies on the library's final-signal dump (MIMALLOC_PROF_FINAL_SIGNALS): the command only forwards
   * the signal. */
  tcase_add_test(tc, tool_run_timeout_term);
  tcase_add_test(tc, tool_run_tree_one_profile);
  tcase_add_test(tc, tool_run_tree_prefix);
  tcase_add_test(tc, tool_run_interval_symbolized);
  tcase_add_test(tc, tool_run_leak_report);
  suite_add_tcase(s, tc);
  return s;
}

#endif
