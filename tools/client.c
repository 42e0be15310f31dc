/* client.c - the control socket's client side, for ctl, top PID, ps and serve.
 *
 * A process's socket is where the library put it (lib/ctldir.c, compiled in): the directory comes from
 * MIMALLOC_PROF_CONTROL and XDG_RUNTIME_DIR in the environment the process started with
 * (/proc/PID/environ, readable by its user and root: the same who may connect) and its effective user ID.
 * When that environment cannot be read, the default directories of that user are tried.
 *
 * One connection per request: a frame of a 4-byte big-endian length and the request's text, then the
 * reply's frame, whose first line is "ok" or "error ENAME: message" (mimalloc_prof(3), CONTROL SOCKET).
 * Both ways are bounded by CLIENT_TIMEOUT_S (SO_SNDTIMEO also bounds connect(2) when the backlog is full).
 */
#include "tool.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "internal.h"   /* mprof_control_dir, mprof_control_socket, mprof_option_parse */
#include "sym.h"

#define CLIENT_TIMEOUT_S 60        /* a dump of a large heap takes seconds to write */
#define MAX_REPLY        ((size_t)1 << 31)

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

/* The effective user ID of the process (the second Uid: field), or -1. */
static long process_euid(pid_t pid)
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
  long uid = process_euid(pid);
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
      if (control == NULL) snprintf(why, why_len, "process %d was not started with MIMALLOC_PROF_CONTROL", (int)pid);
      else snprintf(why, why_len, "process %d has MIMALLOC_PROF_CONTROL=\"%s\": no control socket", (int)pid, control);
      free(env);
      return -1;
    }
    bool found = mprof_control_dir(v > 1 ? (const char *)(uintptr_t)v : NULL, env_value(env, env_len, "XDG_RUNTIME_DIR"),
                                   (unsigned)uid, dir, sizeof dir) &&
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
    if (mprof_control_dir(NULL, tries[i], (unsigned)uid, dir, sizeof dir) && mprof_control_socket(dir, (int)pid, out, len) &&
        stat(out, &st) == 0)
      return 0;
  }
  snprintf(why, why_len, "cannot read the environment of process %d (%s), and it has no socket in the default places",
           (int)pid, strerror(errno == 0 ? EACCES : errno));
  return -1;
}

/* ---------------------------------------------------------------------------------------------------
   One request
--------------------------------------------------------------------------------------------------- */

static bool send_all(int fd, const void *p, size_t n)
{
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p = (const char *)p + w;
    n -= (size_t)w;
  }
  return true;
}

/* 1 read, 0 the connection ended first, -1 an error (errno). */
static int recv_all(int fd, void *p, size_t n)
{
  while (n > 0) {
    ssize_t r = recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) return 0;
    p = (char *)p + r;
    n -= (size_t)r;
  }
  return 1;
}

static int connect_path(const char *path, pid_t pid, char *err, size_t err_len)
{
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  struct timeval tv = {.tv_sec = CLIENT_TIMEOUT_S};
  snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    snprintf(err, err_len, "socket: %s", strerror(errno));
    return -1;
  }
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) return fd;
  int e = errno;
  close(fd);
  if (e == ENOENT)
    snprintf(err, err_len, "process %d has no control socket %s (not running with libmimalloc-prof, or it could not "
             "make one: see its standard error)", (int)pid, path);
  else if (e == ECONNREFUSED)
    snprintf(err, err_len, "nothing answers at %s (the process is gone, or it has no profiler thread: a fork child)",
             path);
  else if (e == EACCES || e == EPERM)
    snprintf(err, err_len, "%s: %s (only the process's own user and root may connect)", path, strerror(e));
  else
    snprintf(err, err_len, "cannot connect to %s: %s", path, strerror(e));
  return -1;
}

int ctl_request(pid_t pid, const char *request, ctl_reply_t *reply, char *err, size_t err_len)
{
  char path[MPROF_CONTROL_PATH_MAX], why[512];
  memset(reply, 0, sizeof *reply);
  if (ctl_socket_path(pid, path, sizeof path, why, sizeof why) != 0) {
    snprintf(err, err_len, "%s", why);
    return -1;
  }
  int fd = connect_path(path, pid, err, err_len);
  if (fd < 0) return -1;
  size_t n = strlen(request);
  unsigned char head[4] = {(unsigned char)(n >> 24), (unsigned char)(n >> 16), (unsigned char)(n >> 8), (unsigned char)n};
  int rc = -1;
  if (!send_all(fd, head, 4) || !send_all(fd, request, n)) {
    snprintf(err, err_len, "process %d: cannot send the request: %s", (int)pid, strerror(errno));
  } else if ((rc = recv_all(fd, head, 4)) != 1) {
    if (rc == 0) snprintf(err, err_len, "process %d: the connection closed without a reply", (int)pid);
    else if (errno == EAGAIN) snprintf(err, err_len, "process %d: no reply within %d seconds", (int)pid, CLIENT_TIMEOUT_S);
    else snprintf(err, err_len, "process %d: %s", (int)pid, strerror(errno));
    rc = -1;
  } else {
    size_t len = (size_t)head[0] << 24 | (size_t)head[1] << 16 | (size_t)head[2] << 8 | head[3];
    reply->body = len < MAX_REPLY ? malloc(len + 1) : NULL;
    if (reply->body == NULL) {
      snprintf(err, err_len, "process %d: a reply of %zu bytes: %s", (int)pid, len, strerror(ENOMEM));
      rc = -1;
    } else if ((rc = recv_all(fd, reply->body, len)) != 1) {
      snprintf(err, err_len, "process %d: the reply was cut off: %s", (int)pid, rc == 0 ? "end of connection" : strerror(errno));
      rc = -1;
    } else {
      reply->body[len] = '\0';
      unsigned char *nl = memchr(reply->body, '\n', len);
      size_t status = nl != NULL ? (size_t)(nl - reply->body) : len;
      snprintf(reply->status, sizeof reply->status, "%.*s", (int)status, (const char *)reply->body);
      reply->ok = strcmp(reply->status, "ok") == 0;
      reply->data = reply->body + (nl != NULL ? status + 1 : len);
      reply->data_len = len - (size_t)(reply->data - reply->body);
      rc = 0;
    }
  }
  close(fd);
  if (rc != 0) ctl_reply_free(reply);
  return rc;
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
  if (strncmp(s, "error ", 6) == 0 && colon != NULL) snprintf(buf, len, "%s (%.*s)", colon + 2, (int)(colon - s - 6), s + 6);
  else snprintf(buf, len, "unexpected reply '%s'", s);
  return buf;
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
    if (symbolize_file(path, NULL, &so) != 0) tool_note("the profile of process %d keeps its raw addresses", (int)pid);
  }
  return rc;
}

/* The command line of the process, arguments joined by spaces, control characters as spaces ("" when it
 * cannot be read). */
char *ctl_command_line(pid_t pid)
{
  size_t n = 0;
  char *s = read_proc(pid, "cmdline", &n);
  if (s == NULL) return strdup("");
  for (size_t i = 0; i + 1 < n; i++)                 /* NULs between arguments, and controls (newlines) */
    if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) s[i] = ' ';
  return s;
}
