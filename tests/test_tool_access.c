/* test_tool_access.c - the mimalloc-prof command against hostile processes (issue 21): ctl, top PID and
 * ps bounded by --timeout, refusing a socket that another process answers, and escaping what a process
 * says.
 *
 * The processes are tests/control_probe, which can also run out of descriptors and put an impostor's
 * socket at its control socket's path (control_util.h).  Waits are for events: a probe's answer, a
 * command's end.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "control_util.h"
#include "suites.h"
#include "tool_util.h"

#if MPROF_PPROF

#define LIST(...) ((const char *const[]){__VA_ARGS__, NULL})

static double mono_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void write_file(const char *path, const void *data, size_t len)
{
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fwrite(data, 1, len, f), len);
  ck_assert_int_eq(fclose(f), 0);
}

static void assert_failed(const probe_run_t *r, const char *what, const char *words)
{
  ck_assert_msg(WIFEXITED(r->status) && WEXITSTATUS(r->status) == 1, "%s: status %d\n%s", what, r->status,
                r->err);
  ck_assert_msg(strstr(r->err, words) != NULL, "%s: '%s' not in:\n%s", what, words, r->err);
}

/* Nothing in text that a terminal acts on: escaping it again (newlines kept) changes nothing. */
static void assert_inert(const char *text, const char *what)
{
  size_t n = strlen(text);
  char *again = malloc(4 * n + 1);
  ck_assert_ptr_nonnull(again);
  tool_escape(again, 4 * n + 1, text, n, true);
  ck_assert_msg(strcmp(again, text) == 0, "%s:\n%s", what, text);
  free(again);
}

/* ---------------------------------------------------------------------------------------------------
   Escaping
--------------------------------------------------------------------------------------------------- */

/* Each kind of byte a terminal acts on becomes an escape; text, valid UTF-8 included, stays as it is;
 * escaping twice changes nothing; a buffer too small ends at a whole escape. */
START_TEST(tool_escape_text)
{
  static const struct {
    const char *in;
    size_t      len;                          /* 0: strlen */
    bool        newlines;
    const char *out;
  } cases[] = {
    {"plain \\ 'text'", 0, false, "plain \\ 'text'"},
    {"a\nb\tc", 0, false, "a\\nb\\tc"},
    {"a\nb", 0, true, "a\nb"},
    {"\x1b[2J\x1b]0;title\x07", 0, false, "\\x1b[2J\\x1b]0;title\\x07"},
    {"del\x7f", 0, false, "del\\x7f"},
    {"csi\x9b" "31m", 0, false, "csi\\x9b31m"},                       /* a C1 byte alone: not UTF-8 */
    {"c1 \xc2\x9b" "31m \xc2\x85", 0, false, "c1 \\u009b31m \\u0085"},  /* C1 controls, UTF-8 encoded */
    {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xc2\xa0", 0, false,           /* é, €, an emoji, NBSP */
     "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xc2\xa0"},
    {"\xe2\x80\xaegnp.exe \xe2\x81\xa6x", 0, false, "\\u202egnp.exe \\u2066x"},  /* bidirectional overrides */
    {"\xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80", 0, false,                 /* overlong, surrogate, > U+10FFFF */
     "\\xc0\\xaf \\xed\\xa0\\x80 \\xf4\\x90\\x80\\x80"},
    {"cut \xe2\x82", 0, false, "cut \\xe2\\x82"},
    {"nul\0after", 9, false, "nul\\x00after"},
  };
  char out[256], twice[256];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    size_t len = cases[i].len != 0 ? cases[i].len : strlen(cases[i].in);
    size_t n = tool_escape(out, sizeof out, cases[i].in, len, cases[i].newlines);
    ck_assert_msg(strcmp(out, cases[i].out) == 0, "case %zu: '%s', want '%s'", i, out, cases[i].out);
    ck_assert_uint_eq(n, strlen(out));
    tool_escape(twice, sizeof twice, out, n, cases[i].newlines);
    ck_assert_str_eq(twice, out);
  }
  ck_assert_uint_eq(tool_escape(out, 6, "ab\x1b", 3, false), 2);   /* "\x1b" and the NUL do not fit */
  ck_assert_str_eq(out, "ab");
  ck_assert_uint_eq(tool_escape(out, 7, "ab\x1b", 3, false), 6);
  ck_assert_str_eq(out, "ab\\x1b");
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   ctl, top PID, ps: timeouts, the answering process, what it says
--------------------------------------------------------------------------------------------------- */

/* A process out of descriptors cannot accept: ctl, top PID and ps give up after --timeout 0.5 with a
 * message naming the process and the wait (ps: "no answer"), and the process answers again once it has
 * descriptors.  ctl's time is bounded below by the timeout (it did wait) and above by 8 s, below the
 * 10 s default: the option is what ended the wait (the margin is for a loaded machine). */
START_TEST(tool_ctl_timeout)
{
  char dir[PATH_MAX], pid[16], want[128];
  tool_tmpdir(dir, sizeof dir);
  probe_child_t c = service_probe_start(dir, true);
  snprintf(pid, sizeof pid, "%d", (int)c.pid);
  ck_assert_str_eq(control_probe_say(&c, "exhaustfds"), "exhausted");
  double t0 = mono_s();
  probe_run_t r = tool_run(LIST("ctl", "--timeout", "0.5", pid, "stats"), NULL);
  double took = mono_s() - t0;
  snprintf(want, sizeof want, "process %s: no reply to 'stats' within 0.5 s", pid);
  assert_failed(&r, "ctl stats", want);
  ck_assert_msg(took >= 0.5 && took < 8, "ctl --timeout 0.5 took %.2f s", took);
  probe_run_free(&r);
  r = tool_run(LIST("top", "--timeout", "0.5", pid), NULL);
  snprintf(want, sizeof want, "process %s: no reply to 'dump' within 0.5 s", pid);
  assert_failed(&r, "top PID", want);
  probe_run_free(&r);
  r = tool_run(LIST("ps", "--timeout", "0.5"), NULL);
  probe_assert_exit0(&r, "ps");
  snprintf(want, sizeof want, "\n%7s  no answer  ", pid);
  ck_assert_msg(strstr(r.out, want) != NULL, "%s", r.out);
  probe_run_free(&r);

  ck_assert_str_eq(control_probe_say(&c, "releasefds"), "released");
  r = tool_run(LIST("ctl", pid, "stats"), NULL);
  probe_assert_exit0(&r, "ctl stats, with descriptors");
  ck_assert_msg(strstr(r.out, "state sampling\n") != NULL, "%s", r.out);
  probe_run_free(&r);
  r = tool_run(LIST("ctl", "--timeout", "0", pid, "stats"), NULL);
  tool_assert_usage_error(&r, "ctl", "--timeout '0': expected seconds");
  probe_run_free(&r);
  probe_run_t end = control_probe_end(&c, NULL);
  probe_run_free(&end);
}
END_TEST

/* Process B's socket put at A's name: SO_PEERCRED names B, so ctl refuses to ask A through it, and ps
 * lists A as not answering. */
START_TEST(tool_ctl_other_process)
{
  char dir[PATH_MAX], pa[PATH_MAX], pb[PATH_MAX], a_pid[16], want[256];
  tool_tmpdir(dir, sizeof dir);
  probe_child_t a = service_probe_start(dir, false), b = service_probe_start(dir, false);
  snprintf(a_pid, sizeof a_pid, "%d", (int)a.pid);
  control_socket_of(dir, a.pid, pa, sizeof pa);
  ck_assert_int_eq(rename(control_socket_of(dir, b.pid, pb, sizeof pb), pa), 0);
  probe_run_t r = tool_run(LIST("ctl", a_pid, "stats"), NULL);
  snprintf(want, sizeof want, "%s is the socket of process %d, not of process %d: refused", pa, (int)b.pid,
           (int)a.pid);
  assert_failed(&r, "ctl stats", want);
  probe_run_free(&r);
  r = tool_run(LIST("ps"), NULL);
  probe_assert_exit0(&r, "ps");
  snprintf(want, sizeof want, "\n%7s  no answer  ", a_pid);
  ck_assert_msg(strstr(r.out, want) != NULL, "%s", r.out);
  probe_run_free(&r);
  probe_run_t end = control_probe_end(&a, NULL);
  probe_run_free(&end);
  end = control_probe_end(&b, NULL);
  probe_run_free(&end);
}
END_TEST

/* Runs the command `args` while the impostor answers it with `reply` (len bytes); returns its run. */
static probe_run_t answered(probe_child_t *c, const char *dir, const char *const *args, const void *reply,
                            size_t len, const char *request)
{
  char file[PATH_MAX], line[PATH_MAX + 16], want[64];
  snprintf(file, sizeof file, "%s/reply", dir);
  write_file(file, reply, len);
  const char *argv[16] = {NULL};
  for (size_t i = 0; args[i] != NULL; i++) argv[i] = args[i];
  probe_opts_t o = {.watchdog_s = CONTROL_WATCHDOG_S};
  probe_child_t cmd = probe_start(probe_getenv("MPROF_TEST_TOOL"), argv, &o);
  snprintf(line, sizeof line, "answer %s", file);
  snprintf(want, sizeof want, "answered %s", request);
  ck_assert_str_eq(control_probe_say(c, line), want);
  return probe_finish(&cmd);
}

/* A process that answers with escape sequences (an impostor's socket at the probe's own path, so that
 * SO_PEERCRED names the process asked): ctl stats, ctl's error line, ps's state and top PID's function
 * names show them escaped.  Then it stops answering: ctl gives up after its timeout on the reply, and,
 * with the impostor's backlog full of the connections it never took, on connect. */
START_TEST(tool_ctl_hostile_text)
{
  static const char stats[] = "ok\nstate \x1b]0;owned\x07sampling\nsample_rate 4096\x1b[2J\n"
                              "note \xc2\x9b" "31mred \xe2\x80\xaetxt.exe \x9b" "1m\n";
  static const char refusal[] = "error EPERM: \x1b[31mno\x1b[0m\nmore";
  static const char ps_stats[] = "ok\nstate \x1b[8msampling\n";
  char dir[PATH_MAX], pid[16], want[256], prof[PATH_MAX];
  tool_tmpdir(dir, sizeof dir);
  probe_child_t c = service_probe_start(dir, false);
  snprintf(pid, sizeof pid, "%d", (int)c.pid);
  ck_assert_str_eq(control_probe_say(&c, "impostor"), "impostor listening");

  probe_run_t r = answered(&c, dir, LIST("ctl", pid, "stats"), stats, sizeof stats - 1, "stats");
  probe_assert_exit0(&r, "ctl stats");
  ck_assert_str_eq(r.out, "state \\x1b]0;owned\\x07sampling\nsample_rate 4096\\x1b[2J\n"
                          "note \\u009b31mred \\u202etxt.exe \\x9b1m\n");
  probe_run_free(&r);
  r = answered(&c, dir, LIST("ctl", pid, "start"), refusal, sizeof refusal - 1, "start");
  snprintf(want, sizeof want, "mimalloc-prof ctl: process %s: \\x1b[31mno\\x1b[0m (EPERM)\n", pid);
  ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 1, "status %d", r.status);
  ck_assert_str_eq(r.err, want);
  probe_run_free(&r);
  r = answered(&c, dir, LIST("ps"), ps_stats, sizeof ps_stats - 1, "stats");
  probe_assert_exit0(&r, "ps");
  snprintf(want, sizeof want, "\n%7s  \\x1b[8msampling  ", pid);
  ck_assert_msg(strstr(r.out, want) != NULL, "%s", r.out);
  assert_inert(r.out, "ps");
  probe_run_free(&r);

  /* top PID: "ok\n" and a profile whose function names carry escape sequences. */
  snprintf(prof, sizeof prof, "%s/hostile.pb.gz", dir);
  static const tool_stack_t hostile[] = {{"main;evil\x1b[2J\x1b[H;site\xc2\x9b" "2J", 4096, 4096}};
  tool_synthetic(prof, hostile, 1, 0x400000, NULL);
  FILE *f = fopen(prof, "rb");
  ck_assert_ptr_nonnull(f);
  static char body[1 << 16] = "ok\n";
  size_t n = 3 + fread(body + 3, 1, sizeof body - 3, f);
  ck_assert(feof(f));
  fclose(f);
  r = answered(&c, dir, LIST("top", "--no-symbolize", pid), body, n, "dump");
  probe_assert_exit0(&r, "top PID");
  ck_assert_msg(strstr(r.out, "  site\\u009b2J\n") != NULL, "%s", r.out);
  ck_assert_msg(strstr(r.out, "  evil\\x1b[2J\\x1b[H\n") != NULL, "%s", r.out);
  assert_inert(r.out, "top PID");
  probe_run_free(&r);

  r = tool_run(LIST("ctl", "--timeout", "0.5", pid, "stats"), NULL);
  snprintf(want, sizeof want, "process %s: no reply to 'stats' within 0.5 s", pid);
  assert_failed(&r, "ctl, no answer", want);
  probe_run_free(&r);
  r = tool_run(LIST("ctl", "--timeout", "0.5", pid, "stats"), NULL);
  snprintf(want, sizeof want, "process %s did not accept a connection to ", pid);
  assert_failed(&r, "ctl, backlog full", want);
  ck_assert_msg(strstr(r.err, "within 0.5 s") != NULL, "%s", r.err);
  probe_run_free(&r);
  probe_run_t end = control_probe_end(&c, NULL);
  probe_run_free(&end);
}
END_TEST

Suite *tool_access_suite(void)
{
  Suite *s = suite_create("tool_access");
  TCase *tc = tcase_create("tool_access");
  tcase_add_unchecked_fixture(tc, tool_dirs_setup, tool_dirs_teardown);
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, tool_escape_text);
  tcase_add_test(tc, tool_ctl_timeout);
  tcase_add_test(tc, tool_ctl_other_process);
  tcase_add_test(tc, tool_ctl_hostile_text);
  suite_add_tcase(s, tc);
  return s;
}

#endif
