/* control_util.c - see control_util.h. */
#define _GNU_SOURCE
#include "control_util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <check.h>

probe_child_t control_probe_start(const char *const *vars, const char *const *wrapper)
{
  return control_probe_start_at(probe_getenv("MPROF_TEST_CONTROL_PROBE"), vars, wrapper);
}

probe_child_t control_probe_start_at(const char *probe, const char *const *vars, const char *const *wrapper)
{
  const char *args[16];
  probe_opts_t opts = {.env = vars, .with_stdin = true, .watchdog_s = CONTROL_WATCHDOG_S};
  probe_child_t c;
  if (wrapper == NULL) {
    c = probe_start(probe, NULL, &opts);
  } else {
    size_t n = 0;
    while (wrapper[n + 1] != NULL) args[n] = wrapper[n + 1], n++;
    ck_assert_uint_lt(n + 2, sizeof args / sizeof args[0]);
    args[n++] = probe;
    args[n] = NULL;
    c = probe_start(wrapper[0], args, &opts);
  }
  ck_assert_str_eq(control_probe_say(&c, NULL), "ready");
  return c;
}

const char *control_probe_say(const probe_child_t *c, const char *command)
{
  static char line[256];
  if (command != NULL) {
    size_t n = strlen(command);
    ck_assert_int_eq(write(c->in, command, n), (ssize_t)n);
    ck_assert_int_eq(write(c->in, "\n", 1), 1);
  }
  size_t n = 0;
  for (;;) {
    ssize_t r = read(c->out, line + n, 1);
    if (r < 0 && errno == EINTR) continue;
    ck_assert_msg(r == 1, "the probe ended before it answered '%s'", command != NULL ? command : "(start)");
    if (line[n] == '\n') break;
    ck_assert_uint_lt(++n, sizeof line - 1);
  }
  line[n] = '\0';
  return line;
}

probe_run_t control_probe_end(probe_child_t *c, const char *err)
{
  probe_run_t r = probe_finish(c);
  probe_assert_exit0(&r, "control_probe");
  ck_assert_msg(strcmp(r.out, "allocations ok\n") == 0, "stdout after the last command:\n%s", r.out);
  if (err == NULL) ck_assert_msg(r.err[0] == '\0', "stderr:\n%s", r.err);
  else ck_assert_msg(strstr(r.err, err) != NULL, "'%s' not on stderr:\n%s", err, r.err);
  return r;
}

const char *control_socket_of(const char *dir, pid_t pid, char *buf, size_t len)
{
  int n = snprintf(buf, len, "%s/%d.sock", dir, (int)pid);
  ck_assert(n > 0 && (size_t)n < len);
  return buf;
}

int control_connect(const char *path)
{
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  ck_assert_uint_lt(strlen(path), sizeof a.sun_path);
  strcpy(a.sun_path, path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ck_assert_int_ge(fd, 0);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) return fd;
  int err = errno;
  close(fd);
  errno = err;
  return -1;
}

void control_send_frame(int fd, const void *text, size_t len)
{
  unsigned char frame[4 + 256];
  ck_assert_uint_le(len, 256);
  frame[0] = (unsigned char)(len >> 24), frame[1] = (unsigned char)(len >> 16);
  frame[2] = (unsigned char)(len >> 8), frame[3] = (unsigned char)len;
  memcpy(frame + 4, text, len);
  ck_assert_int_eq(send(fd, frame, 4 + len, MSG_NOSIGNAL), (ssize_t)(4 + len));
}

static bool read_n(int fd, void *buf, size_t n)
{
  for (size_t got = 0; got < n;) {
    ssize_t r = recv(fd, (char *)buf + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    got += (size_t)r;
  }
  return true;
}

bool control_read_reply(int fd, control_reply_t *r)
{
  unsigned char head[4];
  memset(r, 0, sizeof *r);
  if (!read_n(fd, head, 4)) return false;
  r->len = (size_t)head[0] << 24 | (size_t)head[1] << 16 | (size_t)head[2] << 8 | head[3];
  r->frame = malloc(r->len + 1);
  ck_assert_ptr_nonnull(r->frame);
  if (!read_n(fd, r->frame, r->len)) {
    control_reply_free(r);
    return false;
  }
  r->frame[r->len] = '\0';
  char *nl = memchr(r->frame, '\n', r->len);
  ck_assert_msg(nl != NULL, "a reply without a status line");
  snprintf(r->status, sizeof r->status, "%.*s", (int)(nl - r->frame), r->frame);
  r->ok = strcmp(r->status, "ok") == 0;
  r->body = nl + 1;
  r->body_len = r->len - (size_t)(r->body - r->frame);
  return true;
}

control_reply_t control_ask(const char *path, const char *request)
{
  int fd = control_connect(path);
  ck_assert_msg(fd >= 0, "connect %s: %s", path, strerror(errno));
  control_send_frame(fd, request, strlen(request));
  control_reply_t r;
  ck_assert_msg(control_read_reply(fd, &r), "no reply to '%s'", request);
  close(fd);
  return r;
}

void control_reply_free(control_reply_t *r)
{
  free(r->frame);
  memset(r, 0, sizeof *r);
}

uint64_t control_stat(const control_reply_t *stats, const char *key)
{
  size_t n = strlen(key);
  for (const char *p = stats->body; p != NULL && *p != '\0';) {
    if (strncmp(p, key, n) == 0 && p[n] == ' ') return strtoull(p + n + 1, NULL, 10);
    p = strchr(p, '\n');
    if (p != NULL) p++;
  }
  ck_abort_msg("no '%s' in the stats:\n%s", key, stats->frame);
  return 0;
}

/* ---------------------------------------------------------------------------------------------------
   The command's services
--------------------------------------------------------------------------------------------------- */

probe_child_t service_probe_start(const char *dir, bool sampling)
{
  char control[PATH_MAX + 32];
  snprintf(control, sizeof control, "MIMALLOC_PROF_CONTROL=%s", dir);
  const char *vars[] = {control, "MIMALLOC_PROF_SAMPLE_RATE=4096", sampling ? "MIMALLOC_PROF=1" : NULL, NULL};
  return control_probe_start(vars, NULL);
}

const char *pid_text(pid_t pid)
{
  static char buf[16];
  snprintf(buf, sizeof buf, "%d", (int)pid);
  return buf;
}

probe_child_t serve_start(const char *const *args, char *url, size_t len)
{
  const char *command[16] = {probe_getenv("MPROF_TEST_TOOL")};
  for (size_t i = 0; args[i] != NULL; i++) {
    ck_assert_uint_lt(i + 2, sizeof command / sizeof command[0]);
    command[i + 1] = args[i];
  }
  return serve_start_as(command, NULL, url, len);
}

probe_child_t serve_start_as(const char *const *command, const char *const *env, char *url, size_t len)
{
  probe_opts_t o = {.env = env, .watchdog_s = CONTROL_WATCHDOG_S};
  probe_child_t s = probe_start(command[0], command + 1, &o);
  char line[256];
  size_t n = 0;
  while (n == 0 || line[n - 1] != '\n') {
    ck_assert_msg(read(s.out, line + n, 1) == 1, "serve ended before it listened");
    ck_assert_uint_lt(++n, sizeof line);
  }
  line[n - 1] = '\0';
  ck_assert_msg(strncmp(line, "listening on http://", 20) == 0, "%s", line);
  snprintf(url, len, "%s", line + 13);
  return s;
}

void serve_stop(probe_child_t *s)
{
  ck_assert_int_eq(kill(s->pid, SIGTERM), 0);
  probe_run_t r = probe_finish(s);
  probe_assert_exit0(&r, "serve");
  probe_run_free(&r);
}

long curl_status(const char *const *wrapper, const char *url, const char *out, const char *const *more)
{
  const char *args[32], *base[] = {"-sS", "-o", out != NULL ? out : "/dev/null", "-w", "%{http_code}"};
  size_t n = 0;
  for (size_t i = 1; wrapper != NULL && wrapper[i] != NULL; i++) args[n++] = wrapper[i];
  if (wrapper != NULL) args[n++] = "/usr/bin/curl";
  for (size_t i = 0; i < sizeof base / sizeof base[0]; i++) args[n++] = base[i];
  for (size_t i = 0; more != NULL && more[i] != NULL; i++) {
    ck_assert_uint_lt(n + 2, sizeof args / sizeof args[0]);
    args[n++] = more[i];
  }
  args[n++] = url;
  args[n] = NULL;
  probe_run_t r = probe_run(wrapper != NULL ? wrapper[0] : "/usr/bin/curl", args, NULL);
  ck_assert_msg(WIFEXITED(r.status), "curl %s: status %d", url, r.status);
  long code = strtol(r.out, NULL, 10);              /* 000, and curl's exit status 52 or 56, without one */
  probe_run_free(&r);
  return code;
}

probe_run_t go_pprof_url(const char *dir, const char *const *args)
{
  char home[PATH_MAX + 8], tmp[PATH_MAX + 16];
  snprintf(home, sizeof home, "HOME=%s", dir);
  snprintf(tmp, sizeof tmp, "PPROF_TMPDIR=%s", dir);
  const char *argv[8] = {"tool", "pprof"};
  for (size_t i = 0; args[i] != NULL && i < 5; i++) argv[i + 2] = args[i];
  const char *env[] = {home, tmp, "TZ=UTC", NULL};
  probe_opts_t o = {.env = env, .watchdog_s = CONTROL_WATCHDOG_S};
  probe_run_t r = probe_run("/usr/bin/go", argv, &o);
  probe_assert_exit0(&r, "go tool pprof");
  return r;
}

const char *control_copy_into(const char *src, const char *dir, char *buf, size_t len)
{
  const char *name = strrchr(src, '/');
  int n = snprintf(buf, len, "%s%s", dir, name != NULL ? name : "/");
  ck_assert(name != NULL && n > 0 && (size_t)n < len);
  int in = open(src, O_RDONLY | O_CLOEXEC), out = open(buf, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
  ck_assert_msg(in >= 0 && out >= 0, "copying %s to %s: %s", src, buf, strerror(errno));
  ssize_t r;
  while ((r = copy_file_range(in, NULL, out, NULL, 1 << 20, 0)) > 0) continue;
  ck_assert_msg(r == 0, "copying %s: %s", src, strerror(errno));
  close(in);
  close(out);
  return buf;
}

const char *passable_dir(char *buf, size_t len, const char *tag)
{
  int n = snprintf(buf, len, "/tmp/mprof-%s-XXXXXX", tag);
  ck_assert(n > 0 && (size_t)n < len);
  ck_assert_ptr_nonnull(mkdtemp(buf));
  ck_assert_int_eq(chmod(buf, 0711), 0);
  return buf;
}
