/* test_control.c - the control socket (lib/control.c), spoken to directly with the protocol of
 * mimalloc_prof(3), CONTROL SOCKET: where the socket is and who may use it, every request, malformed and
 * concurrent clients, slow and half-closed ones, a program that closes our descriptors, fork, and no malloc
 * on the profiler thread while it serves.
 *
 * The program is tests/control_probe, told what to allocate one line at a time (control_util.h); every
 * wait is for an event: its answer on stdout, a reply, the end of a connection, a line on its stderr.
 * The server's own timeout (MPROF_CONTROL_IO_TIMEOUT_S) is what ends the slow clients' connections.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "control_util.h"
#include "mimalloc-prof.h"
#include "pprof_util.h"
#include "suites.h"

#if MPROF_PPROF

#define OTHER_UID 4000001u                   /* no user has it (checked): the peer that must be refused */
#define PROBE_UID 4000002u                   /* the program's user in the peer test */

/* A socket directory of its own for one test (mode 0700, as mkdtemp makes it). */
static const char *socket_dir(char *buf, size_t len)
{
  snprintf(buf, len, "%s", tmp_dir_make());
  return buf;
}

static probe_child_t start_in(const char *dir, const char *const *more)
{
  char control[PATH_MAX];
  const char *vars[16] = {control};
  size_t n = 1;
  set_var(control, sizeof control, "MIMALLOC_PROF_CONTROL", dir);
  for (; more != NULL && *more != NULL; more++) vars[n++] = *more;
  vars[n] = NULL;
  return control_probe_start(vars, NULL);
}

static profile_t *reply_profile(const control_reply_t *r)
{
  ck_assert_msg(r->ok, "dump: %s", r->status);
  profile_t *p = profile_decode((const unsigned char *)r->body, r->body_len);
  ck_assert_msg(p != NULL, "the dump's reply is not a gzipped profile (%zu bytes)", r->body_len);
  profile_assert_wellformed(p);
  return p;
}

/* ---------------------------------------------------------------------------------------------------
   Raw clients (threads and forked children must not assert)
--------------------------------------------------------------------------------------------------- */

static int raw_connect(const char *path)
{
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    int err = errno;
    close(fd);
    errno = err;
    fd = -1;
  }
  return fd;
}

/* Reads to the end: the first reply's status line into status ("" when none came). */
static void read_to_end(int fd, char *status, size_t len)
{
  char buf[4096];
  size_t n = 0;
  ssize_t r;
  while ((r = recv(fd, buf + n, sizeof buf - n, 0)) > 0 || (r < 0 && errno == EINTR)) {
    if (r > 0) n += (size_t)r;
    if (n == sizeof buf) n = sizeof buf / 2;   /* keep the start; drain the rest */
  }
  char *nl = n > 4 ? memchr(buf + 4, '\n', n - 4) : NULL;
  snprintf(status, len, "%.*s", nl != NULL ? (int)(nl - buf - 4) : 0, buf + 4);
}

/* ---------------------------------------------------------------------------------------------------
   Where, and who
--------------------------------------------------------------------------------------------------- */

/* MIMALLOC_PROF_CONTROL=1 puts the socket in $XDG_RUNTIME_DIR/mimalloc-prof (made 0700), mode 0600; it
 * answers with the process's ID and goes at exit.  A named directory open to others' writing, and a
 * relative path, give one warning each and no socket; the program runs as ever. */
START_TEST(control_socket_place)
{
  char xdg[PATH_MAX], var[PATH_MAX + 32], dir[PATH_MAX], path[PATH_MAX];
  snprintf(xdg, sizeof xdg, "%s", tmp_dir_make());
  set_var(var, sizeof var, "XDG_RUNTIME_DIR", xdg);
  probe_child_t c = control_probe_start((const char *const[]){"MIMALLOC_PROF_CONTROL=1", var, NULL}, NULL);
  snprintf(dir, sizeof dir, "%s/mimalloc-prof", xdg);
  struct stat st;
  ck_assert_int_eq(lstat(dir, &st), 0);
  ck_assert(S_ISDIR(st.st_mode));
  ck_assert_uint_eq(st.st_mode & 0777, 0700);
  control_socket_of(dir, c.pid, path, sizeof path);
  ck_assert_int_eq(lstat(path, &st), 0);
  ck_assert(S_ISSOCK(st.st_mode));
  ck_assert_uint_eq(st.st_mode & 0777, 0600);
  control_reply_t r = control_ask(path, "stats");
  ck_assert_msg(r.ok, "%s", r.frame);
  ck_assert_uint_eq(control_stat(&r, "pid"), (uint64_t)c.pid);
  ck_assert_uint_eq(control_stat(&r, "protocol"), 1);
  control_reply_free(&r);
  probe_run_t run = control_probe_end(&c, NULL);
  ck_assert_int_eq(access(path, F_OK), -1);         /* removed at exit */
  probe_run_free(&run);

  socket_dir(dir, sizeof dir);
  ck_assert_int_eq(chmod(dir, 0777), 0);
  c = start_in(dir, NULL);
  ck_assert_int_eq(access(control_socket_of(dir, c.pid, path, sizeof path), F_OK), -1);
  run = control_probe_end(&c, "is writable by others; no control socket");
  probe_run_free(&run);

  c = control_probe_start((const char *const[]){"MIMALLOC_PROF_CONTROL=relative/dir", NULL}, NULL);
  run = control_probe_end(&c, "MIMALLOC_PROF_CONTROL=\"relative/dir\" is neither a boolean nor an absolute "
                              "directory path; using 0");
  probe_run_free(&run);
}
END_TEST

/* In a child: become `uid`, connect to path, ask for the stats, and say how it went: 0 refused by the
 * peer check (an "error EACCES" reply, then the end), 1 connect(2) failed with EACCES, 2 served, 3
 * anything else.  Raw calls only: the child must not fail the test's assertions itself. */
static int connect_as(uid_t uid, const char *path)
{
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    if (setresgid(uid, uid, uid) != 0 || setresuid(uid, uid, uid) != 0) _exit(3);
    int fd = raw_connect(path);
    if (fd < 0) _exit(errno == EACCES ? 1 : 3);
    ssize_t w = send(fd, "\0\0\0\x05" "stats", 9, MSG_NOSIGNAL);   /* may meet a closed connection */
    (void)w;
    char status[128];
    read_to_end(fd, status, sizeof status);
    _exit(strncmp(status, "error EACCES", 12) == 0 ? 0 : strcmp(status, "ok") == 0 ? 2 : 3);
  }
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert(WIFEXITED(status));
  return WEXITSTATUS(status);
}

/* Who may use the socket (needs root, to be other users).  The program runs as PROBE_UID with its socket
 * in a directory others may enter: root is served; OTHER_UID is stopped by the socket's mode (0600), and
 * once the test opens the socket to everyone, by the peer check (one "error EACCES" line, then the end),
 * which counts it.  In the default directory (0700) the other user cannot even reach the socket. */
START_TEST(control_peer_check)
{
  if (geteuid() != 0) MPROF_TEST_SKIP("not root, cannot be another user");
  ck_assert_ptr_null(getpwuid(OTHER_UID));
  ck_assert_ptr_null(getpwuid(PROBE_UID));
  /* Everything PROBE_UID needs lies below a directory others may pass through (passable_dir): the
   * socket's directory (PROBE_UID's, 0755) and copies of the probe and of the library it links (bin,
   * LD_LIBRARY_PATH, which comes before the probe's RUNPATH). */
  char base[PATH_MAX], dir[PATH_MAX], bin[PATH_MAX], control[PATH_MAX + 32], path[PATH_MAX],
       reuid[32], regid[32], probe[PATH_MAX + 64], lib[PATH_MAX + 64], libpath[PATH_MAX + 32];
  passable_dir(base, sizeof base, "peer");
  snprintf(dir, sizeof dir, "%s/sock", base);
  snprintf(bin, sizeof bin, "%s/bin", base);
  ck_assert_int_eq(mkdir(dir, 0755), 0);
  ck_assert_int_eq(chown(dir, PROBE_UID, PROBE_UID), 0);
  ck_assert_int_eq(mkdir(bin, 0755), 0);
  set_var(control, sizeof control, "MIMALLOC_PROF_CONTROL", dir);
  snprintf(reuid, sizeof reuid, "--reuid=%u", PROBE_UID);
  snprintf(regid, sizeof regid, "--regid=%u", PROBE_UID);
  Dl_info so;
  ck_assert(dladdr((void *)mi_prof_start, &so) != 0 && so.dli_fname != NULL);
  control_copy_into(probe_getenv("MPROF_TEST_CONTROL_PROBE"), bin, probe, sizeof probe);
  control_copy_into(so.dli_fname, bin, lib, sizeof lib);
  set_var(libpath, sizeof libpath, "LD_LIBRARY_PATH", bin);
  probe_child_t c = control_probe_start_at(probe, (const char *const[]){control, libpath, NULL},
                                           (const char *const[]){"/usr/bin/setpriv", reuid, regid, "--clear-groups",
                                                                 NULL});
  control_socket_of(dir, c.pid, path, sizeof path);
  control_reply_t r = control_ask(path, "stats");            /* root */
  ck_assert_msg(r.ok, "%s", r.frame);
  control_reply_free(&r);
  ck_assert_int_eq(connect_as(OTHER_UID, path), 1);          /* the socket's mode */
  ck_assert_int_eq(chmod(path, 0666), 0);
  ck_assert_int_eq(connect_as(OTHER_UID, path), 0);          /* the peer check */
  ck_assert_int_eq(connect_as(PROBE_UID, path), 2);          /* the process's own user */
  r = control_ask(path, "stats");
  ck_assert_uint_eq(control_stat(&r, "control_refused"), 1);
  control_reply_free(&r);
  probe_run_t run = control_probe_end(&c, NULL);
  probe_run_free(&run);
  ck_assert_int_eq(unlink(probe), 0);
  ck_assert_int_eq(unlink(lib), 0);
  ck_assert_int_eq(rmdir(bin), 0);
  ck_assert_int_eq(rmdir(dir), 0);                  /* the program removed its socket at exit */
  ck_assert_int_eq(rmdir(base), 0);

  char xdg[PATH_MAX], var[PATH_MAX + 32];
  snprintf(xdg, sizeof xdg, "%s", tmp_dir_make());
  ck_assert_int_eq(chmod(xdg, 0755), 0);
  set_var(var, sizeof var, "XDG_RUNTIME_DIR", xdg);
  c = control_probe_start((const char *const[]){"MIMALLOC_PROF_CONTROL=1", var, NULL}, NULL);
  snprintf(dir, sizeof dir, "%s/mimalloc-prof", xdg);
  ck_assert_int_eq(connect_as(OTHER_UID, control_socket_of(dir, c.pid, path, sizeof path)), 1);
  run = control_probe_end(&c, NULL);
  probe_run_free(&run);
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   Requests
--------------------------------------------------------------------------------------------------- */

/* Asks and checks the status line's start. */
static control_reply_t ask_expect(const char *path, const char *request, const char *status)
{
  control_reply_t r = control_ask(path, request);
  ck_assert_msg(strncmp(r.status, status, strlen(status)) == 0, "'%s': want '%s...', got '%s'", request, status,
                r.status);
  return r;
}

static void ask_only(const char *path, const char *request, const char *status)
{
  control_reply_t r = ask_expect(path, request, status);
  control_reply_free(&r);
}

/* Whether p has a comment that starts with head. */
static bool has_comment(const profile_t *p, const char *head)
{
  for (size_t i = 0; i < p->n_comment; i++)
    if (strncmp(test_pstr(p, p->comment[i]), head, strlen(head)) == 0) return true;
  return false;
}

/* Every request, with sampling off at the start.  200 blocks of 4 KiB from site_a before `start 4096`
 * are never sampled.  A thread notices a session started by another (here the profiler thread) within
 * MI_PROF_RECHECK_BYTES (1 MiB) of its own allocation, so 1.2 MB from site_c come first; then 200 blocks
 * from site_b are sampled.  site_b's in-use estimate: B = 819200 bytes at rate R = 4096, sigma <=
 * sqrt(R * B) = 57926 (7.1%); allowed: 4 sigma, 28%.  A stop keeps what was recorded (the same site_b,
 * exactly), a reset while stopped discards it. */
START_TEST(control_every_request)
{
  char dir[PATH_MAX], path[PATH_MAX];
  probe_child_t c = start_in(socket_dir(dir, sizeof dir), NULL);
  control_socket_of(dir, c.pid, path, sizeof path);
  control_reply_t r = ask_expect(path, "stats", "ok");
  ck_assert_msg(strstr(r.body, "state stopped\n") != NULL, "%s", r.frame);
  ck_assert_uint_eq(control_stat(&r, "sample_rate"), 0);
  control_reply_free(&r);
  ck_assert_str_eq(control_probe_say(&c, "alloc a 200 4096"), "done a 200");

  r = ask_expect(path, "start 4096", "ok");
  ck_assert_uint_eq(control_stat(&r, "sample_rate"), 4096);
  control_reply_free(&r);
  ask_only(path, "start", "error EALREADY: ");
  ask_only(path, "start 12x", "error EINVAL: rate '12x' is not a byte count");
  ck_assert_str_eq(control_probe_say(&c, "alloc c 300 4096"), "done c 300");
  ck_assert_str_eq(control_probe_say(&c, "alloc b 200 4096"), "done b 200");

  r = ask_expect(path, "dump", "ok");
  profile_t *p = reply_profile(&r);
  ck_assert_int_eq(p->period, 4096);
  ck_assert_int_eq(leaf_total(p, "site_a", V_INUSE_SPACE), 0);
  int64_t b = leaf_total(p, "site_b", V_INUSE_SPACE);
  ck_assert_msg(b > 819200 * 72 / 100 && b < 819200 * 128 / 100, "site_b in use %lld", (long long)b);
  test_profile_free(p);
  control_reply_free(&r);

  ask_only(path, "reset", "ok");
  r = ask_expect(path, "stats", "ok");
  ck_assert_uint_eq(control_stat(&r, "alloc_bytes"), 0);      /* the probe is idle: nothing since */
  ck_assert_uint_gt(control_stat(&r, "inuse_bytes"), 0);      /* what is in use stays */
  control_reply_free(&r);
  /* The stop keeps what was recorded: the dump shows site_b and c as before, says that sampling stopped,
   * and a free after the stop still leaves in use. */
  r = ask_expect(path, "stop", "ok");
  uint64_t kept = control_stat(&r, "kept_live_samples"), kept_inuse = control_stat(&r, "kept_inuse_bytes");
  ck_assert_uint_gt(kept, 0);
  ck_assert_uint_gt(kept_inuse, 0);
  control_reply_free(&r);
  ask_only(path, "stop", "error EALREADY: ");
  r = ask_expect(path, "dump", "ok");
  p = reply_profile(&r);
  ck_assert_int_eq(p->period, 4096);
  ck_assert_int_eq(leaf_total(p, "site_b", V_INUSE_SPACE), b);
  ck_assert_msg(has_comment(p, "mimalloc-prof stopped: sampling stopped at "), "no stop comment");
  test_profile_free(p);
  control_reply_free(&r);
  ck_assert_str_eq(control_probe_say(&c, "free b"), "freed b");
  r = ask_expect(path, "dump", "ok");
  p = reply_profile(&r);
  ck_assert_int_eq(leaf_total(p, "site_b", V_INUSE_SPACE), 0);
  ck_assert_int_gt(leaf_total(p, "site_c", V_INUSE_SPACE), 0);
  test_profile_free(p);
  control_reply_free(&r);
  /* A reset while stopped discards it all, and says how much: the live samples left are site_c's. */
  r = ask_expect(path, "reset", "ok");
  ck_assert_msg(strstr(r.body, "state stopped\n") != NULL, "%s", r.frame);
  ck_assert_uint_gt(control_stat(&r, "discarded_live_samples"), 0);
  ck_assert_uint_lt(control_stat(&r, "discarded_live_samples"), kept);
  ck_assert_uint_gt(control_stat(&r, "discarded_stacks"), 0);
  control_reply_free(&r);
  ask_only(path, "reset", "error EALREADY: ");
  r = ask_expect(path, "dump", "ok");                         /* nothing kept: an empty profile */
  p = reply_profile(&r);
  ck_assert_uint_eq(p->n_sample, 0);
  ck_assert_msg(!has_comment(p, "mimalloc-prof stopped: "), "a stop comment without data");
  test_profile_free(p);
  control_reply_free(&r);
  ask_only(path, "bogus", "error EINVAL: unknown request 'bogus'");
  ask_only(path, "stats now", "error EINVAL: 'stats' takes no argument");
  ask_only(path, "stats\n", "ok");                            /* one trailing newline is allowed */

  r = ask_expect(path, "stats", "ok");
  ck_assert_msg(strstr(r.body, "state stopped\n") != NULL, "%s", r.frame);
  ck_assert_uint_eq(control_stat(&r, "control_malformed"), 2);
  ck_assert_uint_eq(control_stat(&r, "control_requests"), 18);
  control_reply_free(&r);
  probe_run_t run = control_probe_end(&c, NULL);
  probe_run_free(&run);
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   Malformed, concurrent, slow clients
--------------------------------------------------------------------------------------------------- */

#define CLIENTS 1000                         /* each on a thread of its own, all released at once */

typedef struct client_s {
  pthread_t   thread;
  const char *path;
  unsigned    i;
  bool        malformed;
  bool        ok;
  char        what[160];                     /* why not ok */
} client_t;

static uint64_t xorshift(uint64_t *x)
{
  *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
  return *x;
}

static bool failed(client_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool failed(client_t *c, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->what, sizeof c->what, fmt, ap);
  va_end(ap);
  return false;
}

/* Malformed client i, of kind i % 8: what it sends, and the reply it must get before the end ("" none,
 * NULL anything).  Random content comes from a fixed seed per client. */
static bool one_malformed(client_t *c)
{
  uint64_t x = 0x2545f4914f6cdd1dull + c->i;
  unsigned char buf[320];
  size_t n = 0;
  const char *want = "";
  switch (c->i % 8) {
  case 0:                                   /* random bytes: anything but a hang or a crash */
    n = 1 + xorshift(&x) % 300;
    for (size_t k = 0; k < n; k++) buf[k] = (unsigned char)xorshift(&x);
    want = NULL;
    break;
  case 1: memcpy(buf, "\0\0\0\x0a" "stat", 8), n = 8; break;                  /* truncated frame */
  case 2: memcpy(buf, "\xff\xff\xff\xff" "dump", 8), n = 8, want = "error EMSGSIZE"; break;
  case 3: memcpy(buf, "\0\0\0\0", 4), n = 4, want = "error EMSGSIZE"; break;  /* empty request */
  case 4: memcpy(buf, "\0\0", 2), n = 2; break;                              /* half a length word */
  case 5:                                   /* a frame of binary junk */
    memcpy(buf, "\0\0\0\x10", 4), n = 20;
    for (size_t k = 4; k < n; k++) buf[k] = (unsigned char)(xorshift(&x) | 0x80);
    want = "error EINVAL";
    break;
  case 6: break;                            /* connect, then close */
  default: memcpy(buf, "\0\0\0\x04" "dump", 8), n = 8; break;                /* never reads the reply */
  }
  int fd = raw_connect(c->path);
  if (fd < 0) return failed(c, "client %u: connect: %s", c->i, strerror(errno));
  bool sent = n == 0 || send(fd, buf, n, MSG_NOSIGNAL) == (ssize_t)n;
  if (sent && c->i % 8 != 7) {
    char status[128];
    shutdown(fd, SHUT_WR);                  /* half-closed: the server sees the end of the request */
    read_to_end(fd, status, sizeof status);
    if (want != NULL && strncmp(status, want, strlen(want)) != 0) {
      close(fd);
      return failed(c, "client %u (kind %u): status '%s', want '%s'", c->i, c->i % 8, status, want);
    }
  }
  close(fd);
  return sent || failed(c, "client %u: send: %s", c->i, strerror(errno));
}

/* Well-formed client i: stats, or every tenth a dump; it must get "ok". */
static bool one_request(client_t *c)
{
  const char *req = c->i % 10 == 0 ? "\0\0\0\x04" "dump" : "\0\0\0\x05" "stats";
  size_t n = c->i % 10 == 0 ? 8 : 9;
  int fd = raw_connect(c->path);
  if (fd < 0) return failed(c, "client %u: connect: %s", c->i, strerror(errno));
  char status[128];
  bool sent = send(fd, req, n, MSG_NOSIGNAL) == (ssize_t)n;
  shutdown(fd, SHUT_WR);
  read_to_end(fd, status, sizeof status);
  close(fd);
  return (sent && strcmp(status, "ok") == 0) || failed(c, "client %u: status '%s'", c->i, status);
}

static pthread_barrier_t start_line;

static void *client_main(void *arg)
{
  client_t *c = arg;
  pthread_barrier_wait(&start_line);
  c->ok = c->malformed ? one_malformed(c) : one_request(c);
  return NULL;
}

/* CLIENTS clients at once, each on its own thread; they connect as the barrier opens (more than the
 * listen backlog: the rest wait in connect(2)). */
static void hammer(const char *path, bool malformed)
{
  static client_t clients[CLIENTS];
  struct rlimit files;
  ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &files), 0);
  if (files.rlim_cur < CLIENTS + 64) {
    files.rlim_cur = files.rlim_max < CLIENTS + 64 ? files.rlim_max : CLIENTS + 64;
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &files), 0);
    ck_assert_msg(files.rlim_cur >= CLIENTS + 64, "RLIMIT_NOFILE's hard limit %lu is too low for %d clients",
                  (unsigned long)files.rlim_max, CLIENTS);
  }
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 << 10);
  ck_assert_int_eq(pthread_barrier_init(&start_line, NULL, CLIENTS), 0);
  for (unsigned k = 0; k < CLIENTS; k++) {
    clients[k] = (client_t){.path = path, .i = k, .malformed = malformed};
    ck_assert_int_eq(pthread_create(&clients[k].thread, &attr, client_main, &clients[k]), 0);
  }
  unsigned failures = 0;
  const char *first = NULL;
  for (unsigned k = 0; k < CLIENTS; k++) {
    pthread_join(clients[k].thread, NULL);
    if (!clients[k].ok && failures++ == 0) first = clients[k].what;
  }
  pthread_barrier_destroy(&start_line);
  pthread_attr_destroy(&attr);
  ck_assert_msg(failures == 0, "%u clients failed; the first: %s", failures, first);
}

/* The program's own work is the same while its socket takes 1,000 malformed clients (random bytes with a
 * fixed seed, truncated frames, bad lengths, binary junk, half a length word, bare connections, dumps
 * never read), then 1,000 concurrent requests: the checksum it computes, its last line, an empty stderr;
 * and the socket still answers, with every malformed client counted. */
START_TEST(control_hammered)
{
  char dir[PATH_MAX], path[PATH_MAX];
  probe_child_t c = start_in(socket_dir(dir, sizeof dir), (const char *const[]){"MIMALLOC_PROF=1",
                                                                               "MIMALLOC_PROF_SAMPLE_RATE=8192", NULL});
  control_socket_of(dir, c.pid, path, sizeof path);
  ck_assert_str_eq(control_probe_say(&c, "alloc b 100 4096"), "done b 100");
  char before[64];
  snprintf(before, sizeof before, "%s", control_probe_say(&c, "work 3000"));

  ck_assert_int_eq(write(c.in, "work 3000\n", 10), 10);        /* runs while the socket is hammered */
  hammer(path, true);
  ck_assert_str_eq(control_probe_say(&c, NULL), before);
  control_reply_t r = ask_expect(path, "stats", "ok");
  /* Kinds 1..5 are malformed (5 of 8 of the clients); kind 0's random bytes are too, unless they happen
   * to make a well-formed request, which cannot be told in advance: at least 625. */
  ck_assert_uint_ge(control_stat(&r, "control_malformed"), CLIENTS / 8 * 5);
  control_reply_free(&r);

  ck_assert_int_eq(write(c.in, "work 3000\n", 10), 10);
  hammer(path, false);
  ck_assert_str_eq(control_probe_say(&c, NULL), before);
  r = ask_expect(path, "stats", "ok");
  ck_assert_uint_ge(control_stat(&r, "control_requests"), CLIENTS);
  control_reply_free(&r);
  probe_run_t run = control_probe_end(&c, NULL);
  probe_run_free(&run);
}
END_TEST

/* Slow clients cannot keep others out for long: with every connection slot (16) held by a client that
 * sent two bytes and waits, one more client is served once the server's timeout ends theirs (each ends
 * in a close without a reply, counted); a client that half-closes after a whole request still gets its
 * reply, then the end. */
START_TEST(control_slow_clients)
{
  char dir[PATH_MAX], path[PATH_MAX];
  probe_child_t c = start_in(socket_dir(dir, sizeof dir), NULL);
  control_socket_of(dir, c.pid, path, sizeof path);
  int slow[16];
  for (int k = 0; k < 16; k++) {
    slow[k] = control_connect(path);
    ck_assert_int_ge(slow[k], 0);
    ck_assert_int_eq(send(slow[k], "\0\0", 2, MSG_NOSIGNAL), 2);
  }
  ask_only(path, "stats", "ok");                /* waits in the backlog for a slot */
  for (int k = 0; k < 16; k++) {
    char status[64] = "x";
    read_to_end(slow[k], status, sizeof status);
    ck_assert_str_eq(status, "");               /* closed without a reply */
    close(slow[k]);
  }
  control_reply_t r = ask_expect(path, "stats", "ok");
  ck_assert_uint_eq(control_stat(&r, "control_timeouts"), 16);
  control_reply_free(&r);
  int fd = control_connect(path);
  control_send_frame(fd, "stats", 5);
  ck_assert_int_eq(shutdown(fd, SHUT_WR), 0);
  ck_assert(control_read_reply(fd, &r));
  ck_assert(r.ok);
  control_reply_free(&r);
  char end;
  ck_assert_int_eq(recv(fd, &end, 1, 0), 0);
  close(fd);
  probe_run_t run = control_probe_end(&c, NULL);
  probe_run_free(&run);
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   Descriptors, fork, malloc
--------------------------------------------------------------------------------------------------- */

/* A program that closes every descriptor from 3 up (a daemon at start-up) and opens its own on the same
 * numbers: its pipe works untouched, the library says once that it opened the socket again, and the
 * socket at the same path answers. */
START_TEST(control_descriptors_closed)
{
  char dir[PATH_MAX], path[PATH_MAX], err[512];
  probe_child_t c = start_in(socket_dir(dir, sizeof dir), NULL);
  control_socket_of(dir, c.pid, path, sizeof path);
  ask_only(path, "stats", "ok");
  ck_assert_str_eq(control_probe_say(&c, "closefds"), "closed ok");
  static const char said[] = "mimalloc-prof: warning: the program closed the control socket's descriptors; "
                             "opened again:";
  for (bool seen = false; !seen;) {             /* the warning line is the event: the socket is back */
    size_t n = 0;
    for (;;) {
      ssize_t r = read(c.err, err + n, 1);
      ck_assert_msg(r == 1, "stderr ended before the warning: %.*s", (int)n, err);
      if (err[n] == '\n') break;
      ck_assert_uint_lt(++n, sizeof err);
    }
    seen = n >= sizeof said - 1 && memcmp(err, said, sizeof said - 1) == 0;
  }
  ask_only(path, "start 4096", "ok");
  ck_assert_str_eq(control_probe_say(&c, "alloc c 300 4096"), "done c 300");   /* 1.2 MB: the thread notices */
  ck_assert_str_eq(control_probe_say(&c, "alloc b 50 4096"), "done b 50");
  control_reply_t r = ask_expect(path, "dump", "ok");
  profile_t *p = reply_profile(&r);
  ck_assert_int_gt(leaf_total(p, "site_b", V_ALLOC_SPACE), 0);
  test_profile_free(p);
  control_reply_free(&r);
  probe_run_t run = control_probe_end(&c, NULL);
  probe_run_free(&run);
}
END_TEST

/* A fork child has no profiler thread and no socket: when it exits (exit(3), atexit handlers run) the
 * parent's socket stays and answers. */
START_TEST(control_fork_child)
{
  char dir[PATH_MAX], path[PATH_MAX];
  probe_child_t c = start_in(socket_dir(dir, sizeof dir), (const char *const[]){"MIMALLOC_PROF=1", NULL});
  control_socket_of(dir, c.pid, path, sizeof path);
  ck_assert_str_eq(control_probe_say(&c, "fork"), "child 0");
  ck_assert_int_eq(access(path, F_OK), 0);
  ask_only(path, "dump", "ok");
  probe_run_t run = control_probe_end(&c, NULL);
  probe_run_free(&run);
}
END_TEST

/* The profiler thread serves every request without calling malloc: tests/nomalloc_shim.so, preloaded in
 * front of the library, aborts the process if it does (its control is test_profiler.c's). */
START_TEST(control_never_mallocs)
{
  char dir[PATH_MAX], path[PATH_MAX], preload[PATH_MAX];
  set_var(preload, sizeof preload, "LD_PRELOAD", probe_getenv("MPROF_TEST_NOMALLOC_SHIM"));
  probe_child_t c = start_in(socket_dir(dir, sizeof dir), (const char *const[]){preload, NULL});
  control_socket_of(dir, c.pid, path, sizeof path);
  ask_only(path, "start 4096", "ok");
  ck_assert_str_eq(control_probe_say(&c, "alloc b 300 4096"), "done b 300");
  control_reply_t r = ask_expect(path, "dump", "ok");
  test_profile_free(reply_profile(&r));
  control_reply_free(&r);
  static const char *const more[] = {"stats", "reset", "bogus", "start 1", "stop", "stop", "dump", "start", "stop"};
  for (size_t k = 0; k < sizeof more / sizeof more[0]; k++) {
    r = control_ask(path, more[k]);
    control_reply_free(&r);
  }
  probe_run_t run = control_probe_end(&c, NULL);
  probe_run_free(&run);
}
END_TEST

Suite *control_suite(void)
{
  Suite *s = suite_create("control");
  TCase *tc = tcase_create("control");
  tcase_add_unchecked_fixture(tc, run_dir_setup, run_dir_teardown);
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, control_socket_place);
  tcase_add_test(tc, control_peer_check);
  tcase_add_test(tc, control_every_request);
  tcase_add_test(tc, control_hammered);
  tcase_add_test(tc, control_slow_clients);
  tcase_add_test(tc, control_descriptors_closed);
  tcase_add_test(tc, control_fork_child);
  tcase_add_test(tc, control_never_mallocs);
  suite_add_tcase(s, tc);
  return s;
}

#endif
