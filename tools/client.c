/* client.c - the control socket's client side, for ctl, top PID, ps and serve.
 *
 * A process's socket is where the library put it (lib/ctldir.c, compiled in): the directory comes from
 * MIMALLOC_PROF_CONTROL and XDG_RUNTIME_DIR in the environment the process started with
 * (/proc/PID/environ, readable by its user and root: the same who may connect) and its effective user ID.
 * When that environment cannot be read, the default directories of that user are tried.
 *
 * One connection per request: a frame of a 4-byte big-endian length and the request's text, then the
 * reply's frame, whose first line is "ok" or "error ENAME: message" (mimalloc_prof(3), CONTROL SOCKET).
 *
 * The process at the other end is not trusted:
 *   - the whole exchange (connect, send, the reply to its last byte) has one deadline, --timeout seconds
 *     (default CTL_TIMEOUT_DEFAULT_MS) from its start: a process that cannot accept (out of descriptors,
 *     stopped), never answers, or answers a byte at a time ends in a message naming it and the wait;
 *     SO_SNDTIMEO bounds connect(2), which waits while the socket's backlog is full, and everything after
 *     it is non-blocking with poll(2);
 *   - before the request is sent, SO_PEERCRED must name the process asked for (the process that listens
 *     on a socket is the one SO_PEERCRED gives) and our effective user, unless we are root: a socket of
 *     another process put at PID.sock, or another user's, is refused;
 *   - a reply is read as it comes, its length word bounding it (CTL_REPLY_MAX), so a length that lies
 *     costs nothing until the bytes arrive;
 *   - the text it sends (status lines, statistics) and its command line and environment reach the
 *     terminal only through escape.c.
 */
#include "tool.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "control.h"
#include "ctldir.h"
#include "options.h"
#include "sym.h"

#define CTL_REPLY_MAX    ((size_t)1 << 30)
#define CTL_TIMEOUT_MAX_S 86400

static int64_t timeout_ms = CTL_TIMEOUT_DEFAULT_MS;
static bool last_refused;     /* the last ctl_request found nobody listening (ECONNREFUSED) */

int ctl_timeout_option(const char *text)
{
  char *end;
  errno = 0;
  double s = strtod(text, &end);
  bool number = (text[0] >= '0' && text[0] <= '9') || text[0] == '.';   /* strtod takes "inf", " 1", ... */
  if (!number || errno != 0 || *end != '\0' || !(s >= 0.001 && s <= CTL_TIMEOUT_MAX_S))
    return tool_usage_error("--timeout '%s': expected seconds, from 0.001 to %d", text, CTL_TIMEOUT_MAX_S);
  timeout_ms = (int64_t)(s * 1000 + 0.5);
  return 0;
}

int ctl_common_option(int c, char *const *argv, const char *usage)
{
  if (c == CTL_OPT_TIMEOUT) {
    int rc = ctl_timeout_option(optarg);
    return rc != 0 ? rc : -1;
  }
  if (c == 'h') return tool_help(usage);
  return tool_getopt_error(c, argv);
}

int64_t ctl_timeout_ms(void) { return timeout_ms; }

static int64_t mono_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool tool_parse_pid(const char *text, pid_t *pid)
{
  long v;
  if (!tool_parse_count(text, 1, 0x7fffffff, &v)) return false;
  *pid = (pid_t)v;
  return true;
}

/* The whole of a small /proc file (NUL-terminated, malloc'd); NULL with errno. */
static char *read_proc(pid_t pid, const char *what, size_t *len)
{
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, what);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL;
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap + 1);
  ssize_t r;
  while (buf != NULL && (r = read(fd, buf + n, cap - n)) > 0) {
    n += (size_t)r;
    if (n == cap) {
      char *bigger = realloc(buf, (cap *= 2) + 1);
      if (bigger == NULL) free(buf);
      buf = bigger;
    }
  }
  int err = errno;
  close(fd);
  if (buf == NULL) {
    errno = ENOMEM;
    return NULL;
  }
  buf[n] = '\0';
  if (len != NULL) *len = n;
  errno = err;
  return buf;
}

/* NAME's value in a NUL-separated environment block; NULL when absent. */
static const char *env_value(const char *env, size_t len, const char *name)
{
  size_t nl = strlen(name);
  for (const char *p = env; p < env + len; p += strlen(p) + 1)
    if (strncmp(p, name, nl) == 0 && p[nl] == '=') return p + nl + 1;
  return NULL;
}

long ctl_process_uid(pid_t pid)
{
  char *status = read_proc(pid, "status", NULL);
  long uid = -1;
  const char *line = status != NULL ? strstr(status, "\nUid:") : NULL;
  if (line != NULL) {
    unsigned long real, eff;
    if (sscanf(line + 5, "%lu %lu", &real, &eff) == 2) uid = (long)eff;
  }
  free(status);
  return uid;
}

int ctl_socket_path(pid_t pid, char *out, size_t len, char *why, size_t why_len)
{
  char dir[PATH_MAX];
  struct stat st;
  long uid = ctl_process_uid(pid);
  if (uid < 0) {
    snprintf(why, why_len, "no process %d", (int)pid);
    return -1;
  }
  size_t env_len;
  char *env = read_proc(pid, "environ", &env_len);
  if (env != NULL) {
    const char *control = env_value(env, env_len, "MIMALLOC_PROF_CONTROL");
    uint64_t v = 0;
    char bad[128];
    int ok = control != NULL ? mprof_option_parse("MIMALLOC_PROF_CONTROL", control, &v, bad, sizeof bad) : 0;
    if (control == NULL || ok != 1 || v == 0) {
      char shown[256];
      if (control == NULL)
        snprintf(why, why_len, "process %d was not started with MIMALLOC_PROF_CONTROL", (int)pid);
      else snprintf(why, why_len, "process %d has MIMALLOC_PROF_CONTROL=\"%s\": no control socket", (int)pid,
                    tool_escaped(control, shown, sizeof shown));
      free(env);
      return -1;
    }
    const char *given = v > 1 ? (const char *)(uintptr_t)v : NULL;
    const char *xdg = env_value(env, env_len, "XDG_RUNTIME_DIR");
    bool found = mprof_control_dir(given, xdg, (unsigned)uid, dir, sizeof dir) &&
                 mprof_control_socket(dir, (int)pid, out, len);
    free(env);
    if (!found) snprintf(why, why_len, "process %d: its control socket's path is too long", (int)pid);
    return found ? 0 : -1;
  }
  /* Not ours to read: the user's default places (where connecting would need the same rights anyway). */
  char run[64];
  snprintf(run, sizeof run, "/run/user/%ld", uid);
  const char *const tries[] = {run, NULL};
  for (size_t i = 0; i < 2; i++) {
    if (mprof_control_dir(NULL, tries[i], (unsigned)uid, dir, sizeof dir) &&
        mprof_control_socket(dir, (int)pid, out, len) && stat(out, &st) == 0)
      return 0;
  }
  snprintf(why, why_len,
           "cannot read the environment of process %d (%s), and it has no socket in the default places",
           (int)pid, strerror(errno == 0 ? EACCES : errno));
  return -1;
}

/* ---------------------------------------------------------------------------------------------------
   One request
--------------------------------------------------------------------------------------------------- */

typedef enum { IO_DONE, IO_END, IO_TIMEOUT, IO_ERROR } io_t;    /* IO_END: the peer closed first */

/* Waits until fd is ready for `events` or the deadline passes. */
static io_t wait_ready(int fd, short events, int64_t deadline)
{
  for (;;) {
    int64_t left = deadline - mono_ms();
    if (left <= 0) return IO_TIMEOUT;
    struct pollfd p = {.fd = fd, .events = events};
    int r = poll(&p, 1, left > INT_MAX ? INT_MAX : (int)left);
    if (r > 0) return IO_DONE;            /* also POLLHUP, POLLERR: the next call says what happened */
    if (r < 0 && errno != EINTR) return IO_ERROR;
  }
}

static io_t send_all(int fd, const void *p, size_t n, int64_t deadline)
{
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
      io_t r = wait_ready(fd, POLLOUT, deadline);
      if (r != IO_DONE) return r;
      continue;
    }
    if (w <= 0) return IO_ERROR;
    p = (const char *)p + w;
    n -= (size_t)w;
  }
  return IO_DONE;
}

static io_t recv_all(int fd, void *p, size_t n, int64_t deadline)
{
  while (n > 0) {
    ssize_t r = recv(fd, p, n, MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
      io_t w = wait_ready(fd, POLLIN, deadline);
      if (w != IO_DONE) return w;
      continue;
    }
    if (r < 0) return IO_ERROR;
    if (r == 0) return IO_END;
    p = (char *)p + r;
    n -= (size_t)r;
  }
  return IO_DONE;
}

/* A reply's text of len bytes into a buffer that grows as the bytes come (len + 1 bytes, NUL-terminated,
 * malloc'd into *body); IO_ERROR with errno ENOMEM when it cannot grow. */
static io_t recv_body(int fd, size_t len, unsigned char **body, int64_t deadline)
{
  size_t cap = len < ((size_t)64 << 10) ? len : (size_t)64 << 10, have = 0;
  unsigned char *buf = malloc(cap + 1);
  io_t r = buf != NULL ? IO_DONE : IO_ERROR;
  while (r == IO_DONE && have < len) {
    if (have == cap) {
      cap = cap > len / 2 ? len : cap * 2;
      unsigned char *bigger = realloc(buf, cap + 1);
      if (bigger == NULL) {
        r = IO_ERROR;
        break;
      }
      buf = bigger;
    }
    r = recv_all(fd, buf + have, cap - have, deadline);
    if (r == IO_DONE) have = cap;
  }
  if (r != IO_DONE) {
    int e = errno;
    free(buf);
    errno = e;
    return r;
  }
  buf[len] = '\0';
  *body = buf;
  return IO_DONE;
}

static const char *timeout_text(char *buf, size_t len)
{
  snprintf(buf, len, "%g s", (double)timeout_ms / 1000);
  return buf;
}

/* The socket at path, connected within the deadline and answered by process pid of our user (or we are
 * root); -1 with a message in err. */
static int connect_checked(const char *path, pid_t pid, int64_t deadline, char *err, size_t err_len)
{
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  char shown[4 * MPROF_CONTROL_PATH_MAX], secs[32];
  int64_t left = deadline - mono_ms();
  struct timeval tv = {.tv_sec = left / 1000, .tv_usec = (left % 1000) * 1000};
  snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
  tool_escaped(path, shown, sizeof shown);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    snprintf(err, err_len, "socket: %s", strerror(errno));
    return -1;
  }
  if (left <= 0 || setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0 ||
      connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    int e = left <= 0 ? EAGAIN : errno;
    close(fd);
    last_refused = e == ECONNREFUSED;
    if (e == ENOENT)
      snprintf(err, err_len, "process %d has no control socket %s (not running with libmimalloc-prof, or it "
               "could not make one: see its standard error)", (int)pid, shown);
    else if (e == ECONNREFUSED)
      snprintf(err, err_len, "nothing answers at %s (the process is gone, or it has no profiler thread: a "
               "fork child)", shown);
    else if (e == EACCES || e == EPERM)
      snprintf(err, err_len, "%s: %s (only the process's own user and root may connect)", shown, strerror(e));
    else if (e == EAGAIN || e == EINPROGRESS)
      snprintf(err, err_len, "process %d did not accept a connection to %s within %s (its backlog is full: "
               "it is stopped or stuck; --timeout SECONDS waits longer)", (int)pid, shown,
               timeout_text(secs, sizeof secs));
    else
      snprintf(err, err_len, "cannot connect to %s: %s", shown, strerror(e));
    return -1;
  }
  struct ucred peer;
  socklen_t pl = sizeof peer;
  uid_t me = geteuid();
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &pl) != 0)
    snprintf(err, err_len, "cannot tell which process answers at %s: %s", shown, strerror(errno));
  else if (peer.pid != pid)
    snprintf(err, err_len, "%s is the socket of process %d, not of process %d: refused", shown, (int)peer.pid,
             (int)pid);
  else if (me != 0 && peer.uid != me)
    snprintf(err, err_len, "process %d answers as user %u, not as user %u: refused", (int)pid,
             (unsigned)peer.uid, (unsigned)me);
  else
    return fd;
  close(fd);
  return -1;
}

/* The message for a request that got no whole reply: what it waited for, and how that ended. */
static void request_error(char *err, size_t err_len, pid_t pid, const char *request, int phase, io_t r, int e)
{
  static const char *const waited[3] = {"room to send the request", "reply to", "rest of the reply to"};
  char secs[32];
  if (r == IO_TIMEOUT)
    snprintf(err, err_len, "process %d: no %s '%s' within %s (it may be busy, stopped, or out of "
             "descriptors; --timeout SECONDS waits longer)", (int)pid, waited[phase], request,
             timeout_text(secs, sizeof secs));
  else if (r == IO_END)
    snprintf(err, err_len, "process %d closed the connection before the %s '%s'", (int)pid, waited[phase],
             request);
  else
    snprintf(err, err_len, "process %d: waiting for the %s '%s': %s", (int)pid, waited[phase], request,
             strerror(e));
}

int ctl_request(pid_t pid, const char *request, ctl_reply_t *reply, char *err, size_t err_len)
{
  char path[MPROF_CONTROL_PATH_MAX], why[512];
  int64_t deadline = mono_ms() + timeout_ms;
  memset(reply, 0, sizeof *reply);
  last_refused = false;
  if (ctl_socket_path(pid, path, sizeof path, why, sizeof why) != 0) {
    snprintf(err, err_len, "%s", why);
    return -1;
  }
  int fd = connect_checked(path, pid, deadline, err, err_len);
  if (fd < 0) return -1;
  size_t n = strnlen(request, MPROF_CONTROL_MAX_REQUEST), len = 0;
  unsigned char frame[4 + MPROF_CONTROL_MAX_REQUEST];
  frame[0] = (unsigned char)(n >> 24), frame[1] = (unsigned char)(n >> 16);
  frame[2] = (unsigned char)(n >> 8), frame[3] = (unsigned char)n;
  memcpy(frame + 4, request, n);
  int phase = 0;                                  /* waiting for: 0 room to send, 1 the length, 2 the text */
  io_t r = send_all(fd, frame, 4 + n, deadline);
  if (r == IO_DONE) {
    phase = 1;
    r = recv_all(fd, frame, 4, deadline);
  }
  if (r == IO_DONE) {
    len = (size_t)frame[0] << 24 | (size_t)frame[1] << 16 | (size_t)frame[2] << 8 | frame[3];
    phase = 2;
    r = len <= CTL_REPLY_MAX ? recv_body(fd, len, &reply->body, deadline) : IO_ERROR;
  }
  int e = errno;
  close(fd);
  if (r != IO_DONE && len > CTL_REPLY_MAX)
    snprintf(err, err_len, "process %d: a reply of %zu bytes to '%s' (more than %zu): refused", (int)pid, len,
             request, CTL_REPLY_MAX);
  else if (r != IO_DONE)
    request_error(err, err_len, pid, request, phase, r, e);
  if (r != IO_DONE) return -1;
  unsigned char *nl = memchr(reply->body, '\n', len);
  size_t status = nl != NULL ? (size_t)(nl - reply->body) : len;
  snprintf(reply->status, sizeof reply->status, "%.*s", (int)status, (const char *)reply->body);
  reply->ok = strcmp(reply->status, "ok") == 0;
  reply->data = reply->body + (nl != NULL ? status + 1 : len);
  reply->data_len = len - (size_t)(reply->data - reply->body);
  return 0;
}

bool ctl_request_refused(void) { return last_refused; }

bool ctl_reply_number(const ctl_reply_t *r, const char *key, uint64_t *value)
{
  size_t n = strlen(key);
  for (const char *p = (const char *)r->data; r->ok && *p != '\0';) {
    if (strncmp(p, key, n) == 0 && p[n] == ' ' && p[n + 1] >= '0' && p[n + 1] <= '9') {
      *value = strtoull(p + n + 1, NULL, 10);
      return true;
    }
    const char *nl = strchr(p, '\n');
    if (nl == NULL) break;
    p = nl + 1;
  }
  return false;
}

void ctl_reply_free(ctl_reply_t *r)
{
  free(r->body);
  memset(r, 0, sizeof *r);
}

/* "error EALREADY: sampling is on already" as "sampling is on already (EALREADY)". */
const char *ctl_reply_error(const ctl_reply_t *r, char *buf, size_t len)
{
  const char *s = r->status, *colon = strstr(s, ": ");
  char text[sizeof r->status + 32];
  if (strncmp(s, "error ", 6) == 0 && colon != NULL)
    snprintf(text, sizeof text, "%s (%.*s)", colon + 2, (int)(colon - s - 6), s + 6);
  else snprintf(text, sizeof text, "unexpected reply '%s'", s);
  return tool_escaped(text, buf, len);
}

/* Writes data to path (tool_out_open: complete or not at all).  0, or -1 with errno. */
static int write_file(const char *path, const unsigned char *data, size_t len)
{
  tool_out_t out;
  int fd = tool_out_open(&out, path);
  if (fd < 0) return -1;
  bool ok = true;
  for (size_t done = 0; ok && done < len;) {
    ssize_t w = write(fd, data + done, len - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) ok = false;
    else done += (size_t)w;
  }
  return tool_out_close(&out, path, ok);
}

int ctl_dump_file(pid_t pid, const char *path, bool symbolize, char *err, size_t err_len)
{
  ctl_reply_t r;
  char why[512];
  if (ctl_request(pid, "dump", &r, err, err_len) != 0) return -1;
  int rc = 0;
  if (!r.ok) {
    snprintf(err, err_len, "process %d: %s", (int)pid, ctl_reply_error(&r, why, sizeof why));
    rc = -1;
  } else if (write_file(path, r.data, r.data_len) != 0) {
    snprintf(err, err_len, "cannot write %s: %s", path, strerror(errno));
    rc = -1;
  }
  ctl_reply_free(&r);
  if (rc == 0 && symbolize) {
    sym_opts_t so = {.quiet = true};
    if (symbolize_file(path, NULL, &so) != 0)
      tool_note("the profile of process %d keeps its raw addresses", (int)pid);
  }
  return rc;
}

char *ctl_command_line(pid_t pid)
{
  size_t n = 0;
  char *s = read_proc(pid, "cmdline", &n);
  if (s == NULL) return strdup("");
  for (size_t i = 0; i + 1 < n; i++)                 /* the NULs between arguments */
    if (s[i] == '\0') s[i] = ' ';
  size_t cap = 4 * n + 1;                              /* an escape is at most 4 bytes per byte */
  char *shown = malloc(cap);
  if (shown != NULL) tool_escape(shown, cap, s, strnlen(s, n), false);
  free(s);
  return shown != NULL ? shown : strdup("");
}
