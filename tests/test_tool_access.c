/* test_tool_access.c - the mimalloc-prof command against hostile processes and clients: ctl,
 * top PID and ps bounded by --timeout, refusing a socket that another process answers, and escaping what
 * a process says; serve refusing foreign Host names (DNS rebinding) and clients without access, served
 * to its own user and to the holders of its token, and not locked up by slow clients.
 *
 * The processes are tests/control_probe, which can also run out of descriptors and put an impostor's
 * socket at its control socket's path (control_util.h); the HTTP clients are curl and go tool pprof, as
 * another user through setpriv (which needs root: those parts are skipped otherwise).  Waits are for
 * events: a probe's answer, a command's end, the end of a connection.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <grp.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "control_util.h"
#include "suites.h"
#include "tool_util.h"

#if MPROF_PPROF

#define OTHER_UID "4000001"                   /* no user has it (checked): a client that is not us */
#define SLOW_CLIENTS 40
#define LIST(...) ((const char *const[]){__VA_ARGS__, NULL})

static const char *const as_other[] = {"/usr/bin/setpriv", "--reuid=" OTHER_UID, "--regid=" OTHER_UID,
                                       "--clear-groups", NULL};

static bool can_be_other(void)
{
  if (geteuid() != 0) return false;
  ck_assert_ptr_null(getpwuid((uid_t)strtoul(OTHER_UID, NULL, 10)));
  return true;
}

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
 * message naming the process and the wait (ps: not listed, and says why on stderr; its socket stays), and
 * the process answers again once it has
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
  snprintf(want, sizeof want, "\n%7s  ", pid);
  ck_assert_msg(strstr(r.out, want) == NULL, "%s", r.out);
  snprintf(want, sizeof want, "process %s is not listed: process %s: no reply to 'stats' within 0.5 s", pid, pid);
  ck_assert_msg(strstr(r.err, want) != NULL, "%s", r.err);
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
 * does not list A, says why, and leaves the socket (B listens on it). */
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
  snprintf(want, sizeof want, "\n%7s  ", a_pid);
  ck_assert_msg(strstr(r.out, want) == NULL, "%s", r.out);
  snprintf(want, sizeof want, "process %s is not listed: %s is the socket of process %d", a_pid, pa, (int)b.pid);
  ck_assert_msg(strstr(r.err, want) != NULL, "%s", r.err);
  ck_assert_int_eq(access(pa, F_OK), 0);
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

/* ---------------------------------------------------------------------------------------------------
   serve
--------------------------------------------------------------------------------------------------- */

/* Requests under a name of the attacker's (DNS rebinding), or with no Host, are refused whatever the
 * path; localhost, IP addresses and the names of --allow-host (any case, any port) are answered. */
START_TEST(tool_serve_host)
{
  static const struct {
    const char *host;                           /* the -H argument; "Host:" removes the header */
    bool        http10;
    long        status;
  } cases[] = {
    {"Host: evil.example", false, 421},      {"Host: 127.0.0.1.nip.io", false, 421},
    {"Host: localhost.evil.example", false, 421}, {"Host: profiles.internal.evil.example", false, 421},
    {"Host: [::1]x", false, 421},            {"Host:", false, 400},
    {"Host:", true, 400},                    {"Host: localhost:1", false, 200},
    {"Host: [::1]:6060", false, 200},        {"Host: 10.1.2.3", false, 200},
    {"Host: PROFILES.internal:80", false, 200}, {"Host: 127.0.0.1", true, 200},
  };
  char dir[PATH_MAX], url[256], heap[512], file[PATH_MAX];
  tool_tmpdir(dir, sizeof dir);
  probe_child_t c = service_probe_start(dir, true);
  ck_assert_str_eq(control_probe_say(&c, "alloc a 300 4096"), "done a 300");
  probe_child_t s = serve_start(LIST("serve", "--listen", "127.0.0.1:0", "--allow-host", "profiles.internal",
                                     pid_text(c.pid)), url, sizeof url);
  snprintf(heap, sizeof heap, "%sdebug/pprof/heap", url);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *http10 = cases[i].http10 ? "-0" : NULL;
    long got = curl_status(NULL, url, NULL, LIST("-H", cases[i].host, http10));
    ck_assert_msg(got == cases[i].status, "%s%s: %ld, want %ld", cases[i].host,
                  http10 != NULL ? " (HTTP/1.0)" : "", got, cases[i].status);
  }
  ck_assert_int_eq(curl_status(NULL, heap, NULL, LIST("-H", "Host: evil.example")), 421);
  snprintf(file, sizeof file, "%s/heap.pb.gz", dir);
  ck_assert_int_eq(curl_status(NULL, heap, file, LIST("-H", "Host: localhost")), 200);
  profile_t *p = tool_profile(file);
  ck_assert_uint_gt(p->n_sample, 0);
  profile_free(p);
  probe_run_t r = tool_run(LIST("serve", "--allow-host", "a:80", "1"), NULL);
  tool_assert_usage_error(&r, "serve", "--allow-host 'a:80': expected a host name, without a port");
  probe_run_free(&r);
  serve_stop(&s);
  probe_run_t end = control_probe_end(&c, NULL);
  probe_run_free(&end);
}
END_TEST

/* A directory in /tmp that OTHER_UID owns (the test's own directories may be closed to it). */
static const char *other_dir(char *buf, size_t len)
{
  snprintf(buf, len, "/tmp/mprof-access-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(buf));
  ck_assert_int_eq(chown(buf, (uid_t)strtoul(OTHER_UID, NULL, 10), (gid_t)strtoul(OTHER_UID, NULL, 10)), 0);
  return buf;
}

/* Who is served (needs root, to be another user).  Without --token-file, our own user (root here) is
 * served and another user is refused (403).  With it, another user is refused without the token or with
 * a wrong one (401, WWW-Authenticate: Bearer) and served with it: a profile that go tool pprof -raw
 * reads; our own user still is, with go tool pprof fetching the URL itself.  A token file that others
 * may read is refused at start. */
START_TEST(tool_serve_access)
{
  if (!can_be_other()) MPROF_TEST_SKIP("not root, cannot be another user");
  char dir[PATH_MAX], odir[64], url[256], heap[512], token[PATH_MAX], file[128];
  tool_tmpdir(dir, sizeof dir);
  probe_child_t c = service_probe_start(dir, true);
  ck_assert_str_eq(control_probe_say(&c, "alloc a 300 4096"), "done a 300");
  char pid[16];
  snprintf(pid, sizeof pid, "%d", (int)c.pid);
  probe_child_t s = serve_start(LIST("serve", "--listen", "127.0.0.1:0", pid), url, sizeof url);
  snprintf(heap, sizeof heap, "%sdebug/pprof/heap", url);
  ck_assert_int_eq(curl_status(as_other, url, NULL, NULL), 403);
  ck_assert_int_eq(curl_status(as_other, heap, NULL, NULL), 403);
  ck_assert_int_eq(curl_status(NULL, url, NULL, NULL), 200);
  serve_stop(&s);

  static const char secret[] = "Zm9yIHRoZSB0ZXN0IG9ubHksIG5vdCBhIHJlYWwgdG9rZW4=";
  snprintf(token, sizeof token, "%s/token", dir);
  write_file(token, secret, sizeof secret - 1);
  ck_assert_int_eq(chmod(token, 0640), 0);
  probe_run_t r = tool_run(LIST("serve", "--token-file", token, pid), NULL);
  assert_failed(&r, "serve, token open to the group", "mode 640 lets others read or change it");
  probe_run_free(&r);
  ck_assert_int_eq(chmod(token, 0600), 0);
  s = serve_start(LIST("serve", "--listen", "127.0.0.1:0", "--token-file", token, pid), url, sizeof url);
  snprintf(heap, sizeof heap, "%sdebug/pprof/heap", url);
  ck_assert_int_eq(curl_status(as_other, heap, NULL, NULL), 401);
  /* The secret without its '=': a token that differs in length. */
  static const char wrong[] = "Authorization: Bearer Zm9yIHRoZSB0ZXN0IG9ubHksIG5vdCBhIHJlYWwgdG9rZW4";
  ck_assert_int_eq(curl_status(as_other, heap, NULL, LIST("-H", wrong)), 401);
  probe_run_t h = probe_run("/usr/bin/curl", LIST("-sS", "-o", "/dev/null", "-D", "-", heap), NULL);
  ck_assert_msg(strstr(h.out, "HTTP/1.1 200") != NULL, "%s", h.out);     /* our own user, no token */
  probe_run_free(&h);
  h = probe_run(as_other[0], LIST(as_other[1], as_other[2], as_other[3], "/usr/bin/curl", "-sS", "-o",
                                  "/dev/null", "-D", "-", heap), NULL);
  ck_assert_msg(strstr(h.out, "HTTP/1.1 401") != NULL, "%s", h.out);
  ck_assert_msg(strstr(h.out, "WWW-Authenticate: Bearer") != NULL, "%s", h.out);
  probe_run_free(&h);
  snprintf(file, sizeof file, "%s/heap.pb.gz", other_dir(odir, sizeof odir));
  char auth[128];
  snprintf(auth, sizeof auth, "Authorization: Bearer %s", secret);
  ck_assert_int_eq(curl_status(as_other, heap, file, LIST("-H", auth)), 200);
  if (access("/usr/bin/go", X_OK) == 0) {
    r = go_pprof_url(dir, LIST("-raw", file));
    ck_assert_msg(strstr(r.out, "site_a") != NULL && strstr(r.out, "inuse_space/bytes") != NULL, "%s", r.out);
    probe_run_free(&r);
    r = go_pprof_url(dir, LIST("-raw", heap));
    ck_assert_msg(strstr(r.out, "site_a") != NULL, "%s", r.out);
    probe_run_free(&r);
  }
  ck_assert_int_eq(unlink(file), 0);
  ck_assert_int_eq(rmdir(odir), 0);
  serve_stop(&s);
  probe_run_t end = control_probe_end(&c, NULL);
  probe_run_free(&end);
}
END_TEST

/* n connections to addr, each sending a request's first line and half a header, never the rest. */
static void half_requests(const struct sockaddr_in *addr, int *fds, size_t n)
{
  static const char half[] = "GET /debug/pprof/heap HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
  for (size_t i = 0; i < n; i++) {
    fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fds[i] < 0 || connect(fds[i], (const struct sockaddr *)addr, sizeof *addr) != 0 ||
        send(fds[i], half, sizeof half - 1, MSG_NOSIGNAL) != (ssize_t)sizeof half - 1)
      fds[i] = -1;
  }
}

/* Reads the connections until `want` of them have ended (the server closed them); how many did. */
static size_t wait_closed(int *fds, size_t n, size_t want)
{
  size_t closed = 0;
  struct pollfd pf[SLOW_CLIENTS];
  while (closed < want) {
    for (size_t i = 0; i < n; i++) pf[i] = (struct pollfd){.fd = fds[i], .events = POLLIN};
    if (poll(pf, n, -1) < 0) return closed;
    for (size_t i = 0; i < n; i++) {
      char buf[512];
      if (pf[i].revents == 0) continue;
      if (recv(fds[i], buf, sizeof buf, 0) > 0) continue;
      close(fds[i]);
      fds[i] = -1;                               /* poll skips it from now on */
      closed++;
    }
  }
  return closed;
}

/* SLOW_CLIENTS connections that send half a request each, our own user's, do not keep a good client
 * from being served (curl's --max-time is the bound: a server whose connections are all held refuses
 * it or keeps it waiting).  As another user (root only), a client holds SERVE_PER_CLIENT connections: the
 * others are closed at once, and the ones it holds are closed after 10 s without progress (an event: the
 * end of each connection); meanwhile the good client is served again. */
START_TEST(tool_serve_slow_clients)
{
  char dir[PATH_MAX], url[256], heap[512];
  tool_tmpdir(dir, sizeof dir);
  probe_child_t c = service_probe_start(dir, true);
  ck_assert_str_eq(control_probe_say(&c, "alloc a 300 4096"), "done a 300");
  probe_child_t s = serve_start(LIST("serve", "--listen", "127.0.0.1:0", pid_text(c.pid)), url, sizeof url);
  snprintf(heap, sizeof heap, "%sdebug/pprof/heap", url);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
                             .sin_port = htons((uint16_t)strtoul(strrchr(url, ':') + 1, NULL, 10))};
  int fds[SLOW_CLIENTS];
  half_requests(&addr, fds, SLOW_CLIENTS);
  for (size_t i = 0; i < SLOW_CLIENTS; i++) ck_assert_int_ge(fds[i], 0);
  ck_assert_int_eq(curl_status(NULL, heap, NULL, LIST("--max-time", "20")), 200);
  for (size_t i = 0; i < SLOW_CLIENTS; i++) close(fds[i]);

  if (can_be_other()) {
    int pipe_fds[2];
    ck_assert_int_eq(pipe(pipe_fds), 0);
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {                            /* raw calls only: no assertions in the child */
      uid_t other = (uid_t)strtoul(OTHER_UID, NULL, 10);
      if (setgroups(0, NULL) != 0 || setresgid(other, other, other) != 0 ||
          setresuid(other, other, other) != 0)
        _exit(3);
      half_requests(&addr, fds, SLOW_CLIENTS);
      for (size_t i = 0; i < SLOW_CLIENTS; i++)
        if (fds[i] < 0) _exit(4);
      char line[32];
      size_t closed = wait_closed(fds, SLOW_CLIENTS, SLOW_CLIENTS - SERVE_PER_CLIENT);
      int n = snprintf(line, sizeof line, "%zu\n", closed);
      if (write(pipe_fds[1], line, (size_t)n) != n) _exit(5);
      n = snprintf(line, sizeof line, "%zu\n", wait_closed(fds, SLOW_CLIENTS, SERVE_PER_CLIENT));
      _exit(write(pipe_fds[1], line, (size_t)n) == n ? 0 : 5);
    }
    close(pipe_fds[1]);
    FILE *from = fdopen(pipe_fds[0], "r");
    char line[32];
    ck_assert_ptr_nonnull(from);
    ck_assert_ptr_nonnull(fgets(line, sizeof line, from));
    ck_assert_uint_eq(strtoul(line, NULL, 10), SLOW_CLIENTS - SERVE_PER_CLIENT);
    ck_assert_int_eq(curl_status(NULL, heap, NULL, LIST("--max-time", "20")), 200);
    ck_assert_ptr_nonnull(fgets(line, sizeof line, from));
    ck_assert_uint_eq(strtoul(line, NULL, 10), SERVE_PER_CLIENT);
    fclose(from);
    int status;
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the other user's clients: status %d",
                  status);
  }
  serve_stop(&s);
  probe_run_t end = control_probe_end(&c, NULL);
  probe_run_free(&end);
}
END_TEST

/* serve run by another user than the process's (root only): the index does not list the process, its
 * profile is refused (403), and serve says so at start.  A client of root is not served either: root is
 * not serve's user. */
START_TEST(tool_serve_other_user)
{
  if (!can_be_other()) MPROF_TEST_SKIP("not root, cannot be another user");
  char dir[PATH_MAX], odir[64], tool[128], tmp[128], url[256], u[512], page[PATH_MAX], want[64];
  tool_tmpdir(dir, sizeof dir);
  probe_child_t c = service_probe_start(dir, true);
  other_dir(odir, sizeof odir);
  control_copy_into(probe_getenv("MPROF_TEST_TOOL"), odir, tool, sizeof tool);
  snprintf(tmp, sizeof tmp, "TMPDIR=%s", odir);
  const char *const *command = LIST(as_other[0], as_other[1], as_other[2], as_other[3], tool, "serve",
                                    "--listen", "127.0.0.1:0", pid_text(c.pid));
  probe_child_t s = serve_start_as(command, LIST(tmp), url, sizeof url);
  snprintf(page, sizeof page, "%s/index.html", odir);
  ck_assert_int_eq(curl_status(as_other, url, page, NULL), 200);       /* serve's own user: served */
  FILE *f = fopen(page, "r");
  ck_assert_ptr_nonnull(f);
  char text[8192];
  text[fread(text, 1, sizeof text - 1, f)] = '\0';
  fclose(f);
  snprintf(want, sizeof want, "/pid/%d/", (int)c.pid);
  ck_assert_msg(strstr(text, want) == NULL && strstr(text, "control_probe") == NULL, "%s", text);
  snprintf(u, sizeof u, "%sdebug/pprof/heap", url);
  ck_assert_int_eq(curl_status(as_other, u, NULL, NULL), 403);
  ck_assert_int_eq(curl_status(NULL, u, NULL, NULL), 403);           /* root is not serve's user */
  ck_assert_int_eq(kill(s.pid, SIGTERM), 0);
  probe_run_t r = probe_finish(&s);
  probe_assert_exit0(&r, "serve");
  snprintf(want, sizeof want, "process %d belongs to another user: it is not served", (int)c.pid);
  ck_assert_msg(strstr(r.err, want) != NULL, "%s", r.err);
  probe_run_free(&r);
  ck_assert_int_eq(unlink(tool), 0);
  ck_assert_int_eq(unlink(page), 0);
  ck_assert_int_eq(rmdir(odir), 0);
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
  tcase_add_test(tc, tool_serve_host);
  tcase_add_test(tc, tool_serve_access);
  tcase_add_test(tc, tool_serve_slow_clients);
  tcase_add_test(tc, tool_serve_other_user);
  suite_add_tcase(s, tc);
  return s;
}

#endif
