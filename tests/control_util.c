/* control_util.c - see control_util.h. */
#define _GNU_SOURCE
#include "control_util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
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
