/* test_tool_service.c - profiling running services with the mimalloc-prof command: ctl, ps,
 * top PID, and serve with real HTTP clients (curl, go tool pprof), against tests/control_probe, whose
 * allocations the test changes between requests (control_util.h).
 *
 * Profiles are read with the command's own reader (tools/profile.c) and by `go tool pprof`.  The waits
 * are for events: the probe's answers, the end of a command, serve's "listening on" line.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "control_util.h"
#include "suites.h"
#include "tool_util.h"

#if MPROF_PPROF

/* The in-use bytes whose innermost frame is the function `fn`. */
static int64_t leaf_inuse(const profile_t *p, const char *fn)
{
  pindex_t ix;
  pindex_init(&ix, p);
  size_t v = profile_sample_type(p, "inuse_space");
  ck_assert_uint_ne(v, SIZE_MAX);
  int64_t sum = 0;
  for (size_t i = 0; i < p->n_sample; i++) {
    const sample_t *s = p->sample[i];
    const location_t *l = s->n_location_id > 0 ? pindex_location(&ix, s->location_id[0]) : NULL;
    if (l != NULL && strcmp(tool_line_name(p, &ix, l, 0), fn) == 0) sum += s->value[v];
  }
  pindex_free(&ix);
  return sum;
}

static void assert_ok(const probe_run_t *r, const char *what)
{
  probe_assert_exit0(r, what);
}

/* ---------------------------------------------------------------------------------------------------
   ctl
--------------------------------------------------------------------------------------------------- */

/* The acceptance run: a program started with its socket and sampling off.  Allocations before `ctl PID
 * start` are not in the profile `ctl PID dump` takes, those after it are (site_c's 1.2 MB first: a thread
 * notices a session started by another within 1 MiB of its own allocation); the profile is symbolized.
 * `stop` stops and keeps what was recorded: it says how much, the next dump holds the same samples
 * (site_b's allocations after the stop are not sampled) and says that sampling is stopped, as `top`'s
 * header does; a second stop says why it fails; `start` then says what it discards, and `reset` while
 * sampling what it resets. */
START_TEST(tool_ctl_session)
{
  char dir[PATH_MAX], out[PATH_MAX];
  tool_tmpdir(dir, sizeof dir);
  probe_child_t c = service_probe_start(dir, false);
  const char *pid = pid_text(c.pid);
  ck_assert_str_eq(control_probe_say(&c, "alloc a 300 4096"), "done a 300");
  probe_run_t r = tool_run((const char *const[]){"ctl", pid, "start", "4k", NULL}, NULL);
  assert_ok(&r, "ctl start");
  char want[128];
  snprintf(want, sizeof want, "process %s: sampling, one allocation per 4096 bytes on average\n", pid);
  ck_assert_str_eq(r.out, want);
  probe_run_free(&r);
  ck_assert_str_eq(control_probe_say(&c, "alloc c 300 4096"), "done c 300");
  ck_assert_str_eq(control_probe_say(&c, "alloc b 300 4096"), "done b 300");

  snprintf(out, sizeof out, "%s/live.pb.gz", dir);
  r = tool_run((const char *const[]){"ctl", pid, "dump", "-o", out, NULL}, NULL);
  assert_ok(&r, "ctl dump");
  probe_run_free(&r);
  profile_t *p = tool_profile(out);
  ck_assert_int_eq(leaf_inuse(p, "site_a"), 0);
  int64_t site_b = leaf_inuse(p, "site_b");
  ck_assert_int_gt(site_b, 0);
  bool named = false;
  for (size_t i = 0; i < p->n_mapping; i++) named |= p->mapping[i]->has_functions;
  ck_assert_msg(named, "the profile was not symbolized");
  profile_free(p);

  r = tool_run((const char *const[]){"ctl", pid, "stop", NULL}, NULL);
  assert_ok(&r, "ctl stop");
  snprintf(want, sizeof want, "process %s: sampling stopped; kept ", pid);
  ck_assert_msg(strncmp(r.out, want, strlen(want)) == 0 && strstr(r.out, " live samples (") != NULL &&
                strstr(r.out, "dumps\n  show them until the next start or reset\n") != NULL, "%s", r.out);
  probe_run_free(&r);
  r = tool_run((const char *const[]){"ctl", pid, "stats", NULL}, NULL);
  assert_ok(&r, "ctl stats");
  ck_assert_msg(strstr(r.out, "state stopped\n") != NULL && strstr(r.out, "protocol 1\n") != NULL, "%s", r.out);
  probe_run_free(&r);
  r = tool_run((const char *const[]){"ctl", pid, "stop", NULL}, NULL);
  ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 1, "second stop: %d", r.status);
  snprintf(want, sizeof want, "mimalloc-prof ctl: process %s: sampling is off (EALREADY)\n", pid);
  ck_assert_str_eq(r.err, want);
  probe_run_free(&r);
  ck_assert_str_eq(control_probe_say(&c, "alloc b 300 4096"), "done b 300");
  r = tool_run((const char *const[]){"ctl", pid, "dump", "--no-symbolize", "-o", out, NULL}, NULL);
  assert_ok(&r, "ctl dump, stopped");
  probe_run_free(&r);
  p = tool_profile(out);
  ck_assert_int_eq(leaf_inuse(p, "site_b"), site_b);
  profile_free(p);
  r = tool_run((const char *const[]){"top", "-n", "2", out, NULL}, NULL);
  assert_ok(&r, "top, stopped");
  ck_assert_msg(strstr(r.out, "\nsampling is stopped (") != NULL, "%s", r.out);
  probe_run_free(&r);

  r = tool_run((const char *const[]){"ctl", pid, "start", "4k", NULL}, NULL);
  assert_ok(&r, "ctl start, after a stop");
  ck_assert_msg(strstr(r.out, "\n  discarded the stopped session's data: ") != NULL &&
                strstr(r.out, " live samples (") != NULL && strstr(r.out, " stack traces\n") != NULL, "%s", r.out);
  probe_run_free(&r);
  r = tool_run((const char *const[]){"ctl", pid, "reset", NULL}, NULL);
  assert_ok(&r, "ctl reset");
  snprintf(want, sizeof want, "process %s: allocated totals and peak reset; live samples kept\n", pid);
  ck_assert_str_eq(r.out, want);                     /* nothing allocated since the start: nothing to say */
  probe_run_free(&r);
  probe_run_t end = control_probe_end(&c, NULL);
  probe_run_free(&end);
}
END_TEST

/* Usage errors are found before any process is asked; a process without the socket is an error (1). */
START_TEST(tool_ctl_usage)
{
  static const struct {
    const char *args[6], *words;
  } cases[] = {
    {{"ctl", NULL}, "no process ID given"},
    {{"ctl", "abc", "stats", NULL}, "'abc' is not a process ID"},
    {{"ctl", "1", NULL}, "no request given"},
    {{"ctl", "1", "frob", NULL}, "unknown request 'frob'"},
    {{"ctl", "1", "dump", NULL}, "dump needs -o FILE"},
    {{"ctl", "1", "stats", "-o", "x", NULL}, "-o is for dump only"},
    {{"ctl", "1", "start", "12x", NULL}, "RATE '12x' is not a byte count"},
    {{"ctl", "1", "stats", "more", NULL}, "'more' is one argument too many"},
    {{"serve", "--listen", "nowhere", "1", NULL}, "--listen 'nowhere': expected ADDR:PORT"},
    {{"serve", NULL}, "no process ID given"},
    {{"ps", "x", NULL}, "no arguments expected"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    probe_run_t r = tool_run(cases[i].args, NULL);
    tool_assert_usage_error(&r, cases[i].args[0], cases[i].words);
    probe_run_free(&r);
  }
  char self[16];
  snprintf(self, sizeof self, "%d", (int)getpid());      /* we run without MIMALLOC_PROF_CONTROL */
  probe_run_t r = tool_run((const char *const[]){"ctl", self, "stats", NULL}, NULL);
  ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 1, "status %d", r.status);
  ck_assert_msg(strstr(r.err, "was not started with MIMALLOC_PROF_CONTROL") != NULL, "%s", r.err);
  probe_run_free(&r);
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   ps, top PID
--------------------------------------------------------------------------------------------------- */

/* ps lists the process with its state, rate, bytes in use and command line; top PID shows its sites,
 * named, the largest first; after `ctl stop`, ps says stopped, with what is kept in use.  A process of the
 * same control directory killed with SIGKILL (reaped: gone) left its socket: ps does not list it and
 * removes the socket, saying so. */
START_TEST(tool_ps_top)
{
  char dir[PATH_MAX], line[64];
  tool_tmpdir(dir, sizeof dir);
  probe_child_t c = service_probe_start(dir, true);
  const char *pid = pid_text(c.pid);
  ck_assert_str_eq(control_probe_say(&c, "alloc b 400 4096"), "done b 400");
  ck_assert_str_eq(control_probe_say(&c, "alloc a 100 4096"), "done a 100");
  probe_run_t r = tool_run((const char *const[]){"ps", NULL}, NULL);
  assert_ok(&r, "ps");
  ck_assert_msg(strncmp(r.out, "    PID  STATE", 14) == 0, "%s", r.out);
  snprintf(line, sizeof line, "\n%7s  sampling    4.00 KiB  ", pid);
  const char *row = strstr(r.out, line);
  ck_assert_msg(row != NULL && strstr(row + 1, "control_probe") < strchr(row + 1, '\n'), "no row for %s:\n%s", pid,
                r.out);
  probe_run_free(&r);

  r = tool_run((const char *const[]){"top", "-n", "2", pid, NULL}, NULL);
  assert_ok(&r, "top PID");
  snprintf(line, sizeof line, "process %s (", pid);
  ck_assert_msg(strncmp(r.out, line, strlen(line)) == 0, "%s", r.out);
  const char *first = strstr(r.out, "function\n");
  ck_assert_msg(first != NULL, "%s", r.out);
  first = strchr(first, '\n') + 1;
  ck_assert_msg(strstr(first, "site_b\n") != NULL && strstr(first, "site_b\n") < strchr(first, '\n') + 1,
                "site_b is not first:\n%s", r.out);
  probe_run_free(&r);

  r = tool_run((const char *const[]){"ctl", pid, "stop", NULL}, NULL);
  assert_ok(&r, "ctl stop");
  probe_run_free(&r);
  r = tool_run((const char *const[]){"ps", NULL}, NULL);
  assert_ok(&r, "ps");
  snprintf(line, sizeof line, "\n%7s  stopped            -  ", pid);
  row = strstr(r.out, line);
  ck_assert_msg(row != NULL && strncmp(row + strlen(line), "         -", 10) != 0, "%s", r.out);   /* kept */
  probe_run_free(&r);

  probe_child_t gone = service_probe_start(dir, true);
  char sock[PATH_MAX + 32], gone_pid[16];
  snprintf(gone_pid, sizeof gone_pid, "%d", (int)gone.pid);
  snprintf(sock, sizeof sock, "%s/%d.sock", dir, (int)gone.pid);
  ck_assert_int_eq(access(sock, F_OK), 0);
  ck_assert_int_eq(kill(gone.pid, SIGKILL), 0);
  probe_run_t dead = probe_finish(&gone);
  ck_assert_msg(WIFSIGNALED(dead.status), "status %d", dead.status);
  probe_run_free(&dead);
  ck_assert_int_eq(access(sock, F_OK), 0);           /* SIGKILL: no exit handler removed it */
  r = tool_run((const char *const[]){"ps", NULL}, NULL);
  assert_ok(&r, "ps, a process gone");
  snprintf(line, sizeof line, "\n%7s  ", gone_pid);
  ck_assert_msg(strstr(r.out, line) == NULL, "%s", r.out);
  ck_assert_msg(strstr(r.err, "removed ") != NULL && strstr(r.err, sock) != NULL &&
                strstr(r.err, "a control socket left behind") != NULL, "%s", r.err);
  ck_assert_int_ne(access(sock, F_OK), 0);
  probe_run_free(&r);
  probe_run_t end = control_probe_end(&c, NULL);
  probe_run_free(&end);
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   serve
--------------------------------------------------------------------------------------------------- */

/* curl's status code for URL, the body saved in out (NULL: discarded). */
static long curl(const char *url, const char *out)
{
  return curl_status(NULL, url, out, NULL);
}

/* One process served at the root's paths: two scrapes with curl see the allocations made between them;
 * go tool pprof reads /debug/pprof/heap (-raw, -top: inuse_space) and /debug/pprof/allocs (alloc_space
 * by default) over HTTP; the index names the process; unknown paths and text formats are refused. */
START_TEST(tool_serve_http)
{
  char dir[PATH_MAX], url[256], u[512], f1[PATH_MAX], f2[PATH_MAX];
  tool_tmpdir(dir, sizeof dir);
  probe_child_t c = service_probe_start(dir, true);
  ck_assert_str_eq(control_probe_say(&c, "alloc a 300 4096"), "done a 300");
  probe_child_t s = serve_start((const char *const[]){"serve", "--listen", "127.0.0.1:0", pid_text(c.pid), NULL},
                                url, sizeof url);
  snprintf(u, sizeof u, "%sdebug/pprof/heap", url);
  snprintf(f1, sizeof f1, "%s/first.pb.gz", dir);
  snprintf(f2, sizeof f2, "%s/second.pb.gz", dir);
  ck_assert_int_eq(curl(u, f1), 200);
  ck_assert_str_eq(control_probe_say(&c, "alloc b 300 4096"), "done b 300");
  ck_assert_int_eq(curl(u, f2), 200);
  profile_t *p = tool_profile(f1), *q = tool_profile(f2);
  ck_assert_int_gt(leaf_inuse(p, "site_a"), 0);
  ck_assert_int_eq(leaf_inuse(p, "site_b"), 0);
  ck_assert_int_gt(leaf_inuse(q, "site_b"), 0);
  ck_assert_str_eq(pstr(q, q->default_sample_type), "inuse_space");
  profile_free(p);
  profile_free(q);

  if (access("/usr/bin/go", X_OK) == 0) {
    probe_run_t r = go_pprof_url(dir, (const char *const[]){"-raw", u, NULL});
    ck_assert_msg(strstr(r.out, "site_b") != NULL && strstr(r.out, "inuse_space/bytes") != NULL, "%s", r.out);
    probe_run_free(&r);
    r = go_pprof_url(dir, (const char *const[]){"-top", u, NULL});
    ck_assert_msg(strstr(r.out, "Type: inuse_space\n") != NULL && strstr(r.out, " site_a\n") != NULL &&
                  strstr(r.out, " site_b\n") != NULL, "%s", r.out);
    probe_run_free(&r);
    snprintf(u, sizeof u, "%sdebug/pprof/allocs", url);
    r = go_pprof_url(dir, (const char *const[]){"-top", u, NULL});
    ck_assert_msg(strstr(r.out, "Type: alloc_space\n") != NULL, "%s", r.out);
    probe_run_free(&r);
  }
  char index[PATH_MAX], want[64];
  snprintf(index, sizeof index, "%s/index.html", dir);
  ck_assert_int_eq(curl(url, index), 200);
  FILE *f = fopen(index, "r");
  ck_assert_ptr_nonnull(f);
  char page[8192];
  page[fread(page, 1, sizeof page - 1, f)] = '\0';
  fclose(f);
  snprintf(want, sizeof want, "<a href=\"/pid/%d/debug/pprof/heap\">", (int)c.pid);
  ck_assert_msg(strstr(page, want) != NULL, "%s", page);
  snprintf(u, sizeof u, "%sdebug/pprof/goroutine", url);
  ck_assert_int_eq(curl(u, NULL), 404);
  snprintf(u, sizeof u, "%sdebug/pprof/heap?debug=1", url);
  ck_assert_int_eq(curl(u, NULL), 400);
  serve_stop(&s);
  probe_run_t end = control_probe_end(&c, NULL);
  probe_run_free(&end);
}
END_TEST

/* Two processes: each under /pid/PID/ (or ?pid=PID), the root's paths refused for want of a choice, a
 * process not named on serve's command line not served. */
START_TEST(tool_serve_several)
{
  char dir[PATH_MAX], url[256], u[512], f[PATH_MAX];
  tool_tmpdir(dir, sizeof dir);
  probe_child_t a = service_probe_start(dir, true), b = service_probe_start(dir, true);
  ck_assert_str_eq(control_probe_say(&a, "alloc a 300 4096"), "done a 300");
  ck_assert_str_eq(control_probe_say(&b, "alloc b 300 4096"), "done b 300");
  char pa[16], pb[16];
  snprintf(pa, sizeof pa, "%d", (int)a.pid);
  snprintf(pb, sizeof pb, "%d", (int)b.pid);
  probe_child_t s = serve_start((const char *const[]){"serve", "--listen", "127.0.0.1:0", pa, pb, NULL}, url,
                                sizeof url);
  snprintf(f, sizeof f, "%s/p.pb.gz", dir);
  snprintf(u, sizeof u, "%spid/%s/debug/pprof/heap", url, pa);
  ck_assert_int_eq(curl(u, f), 200);
  profile_t *p = tool_profile(f);
  ck_assert_int_gt(leaf_inuse(p, "site_a"), 0);
  ck_assert_int_eq(leaf_inuse(p, "site_b"), 0);
  profile_free(p);
  snprintf(u, sizeof u, "%sdebug/pprof/allocs?pid=%s", url, pb);
  ck_assert_int_eq(curl(u, f), 200);
  p = tool_profile(f);
  ck_assert_int_gt(leaf_inuse(p, "site_b"), 0);
  ck_assert_str_eq(pstr(p, p->default_sample_type), "alloc_space");
  profile_free(p);
  snprintf(u, sizeof u, "%sdebug/pprof/heap", url);
  ck_assert_int_eq(curl(u, NULL), 400);
  snprintf(u, sizeof u, "%spid/%d/debug/pprof/heap", url, (int)getpid());
  ck_assert_int_eq(curl(u, NULL), 404);
  serve_stop(&s);
  probe_run_t end = control_probe_end(&a, NULL);
  probe_run_free(&end);
  end = control_probe_end(&b, NULL);
  probe_run_free(&end);
}
END_TEST

Suite *tool_service_suite(void)
{
  Suite *s = suite_create("tool_service");
  TCase *tc = tcase_create("tool_service");
  tcase_add_unchecked_fixture(tc, tool_dirs_setup, tool_dirs_teardown);
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, tool_ctl_session);
  tcase_add_test(tc, tool_ctl_usage);
  tcase_add_test(tc, tool_ps_top);
  tcase_add_test(tc, tool_serve_http);
  tcase_add_test(tc, tool_serve_several);
  suite_add_tcase(s, tc);
  return s;
}

#endif
