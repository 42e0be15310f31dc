/* chromium.c - see chromium.h. */
#define _GNU_SOURCE
#include "chromium.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <check.h>

#define CHROMIUM "/usr/bin/chromium"
#define WAIT_MS  60000          /* one message; a stuck browser fails the test instead of hanging it */

void chromium_start(chromium_t *c, const char *profile_dir, int width, int height)
{
  memset(c, 0, sizeof *c);
  ck_assert_msg(access(CHROMIUM, X_OK) == 0, "needs Debian's chromium (scripts/install-deps.sh installs it)");
  int to[2], from[2];
  ck_assert_int_eq(pipe2(to, O_CLOEXEC), 0);
  ck_assert_int_eq(pipe2(from, O_CLOEXEC), 0);
  char data[4200], size[64];
  snprintf(data, sizeof data, "--user-data-dir=%s", profile_dir);
  snprintf(size, sizeof size, "--window-size=%d,%d", width, height);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    if (dup2(to[0], 3) < 0 || dup2(from[1], 4) < 0) _exit(126);
    int null = open("/dev/null", O_RDWR);
    dup2(null, 0), dup2(null, 1), dup2(null, 2);
    alarm(300);                                 /* survives exec: a hung browser dies */
    execl(CHROMIUM, CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
          "--disable-background-networking", "--disable-component-update", "--disable-sync",
          "--remote-debugging-pipe", "--hide-scrollbars", "--allow-file-access-from-files", data, size,
          "about:blank", (char *)NULL);
    _exit(127);
  }
  close(to[0]);
  close(from[1]);
  c->pid = pid;
  c->to = to[1];
  c->from = from[0];
  c->cap = 1 << 20;
  c->buf = malloc(c->cap);
  ck_assert_ptr_nonnull(c->buf);
  json_t *r = chromium_call(c, "Target.createTarget", json_pack("{s:s}", "url", "about:blank"));
  const char *target = json_string_value(json_object_get(r, "targetId"));
  ck_assert_ptr_nonnull(target);
  json_t *a = chromium_call(c, "Target.attachToTarget", json_pack("{s:s, s:b}", "targetId", target, "flatten", 1));
  snprintf(c->session, sizeof c->session, "%s", json_string_value(json_object_get(a, "sessionId")));
  json_decref(r);
  json_decref(a);
  json_decref(chromium_call(c, "Page.enable", NULL));
  json_decref(chromium_call(c, "Runtime.enable", NULL));
  json_decref(chromium_call(c, "Log.enable", NULL));
  json_decref(chromium_call(c, "Emulation.setDeviceMetricsOverride",
                            json_pack("{s:i, s:i, s:i, s:b}", "width", width, "height", height, "deviceScaleFactor", 1,
                                      "mobile", 0)));
}

static void send_json(chromium_t *c, json_t *msg)
{
  char *text = json_dumps(msg, JSON_COMPACT);
  ck_assert_ptr_nonnull(text);
  size_t n = strlen(text) + 1;                  /* the NUL ends the message */
  for (size_t done = 0; done < n;) {
    ssize_t w = write(c->to, text + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    ck_assert_msg(w > 0, "writing to chromium: %s", strerror(errno));
    done += (size_t)w;
  }
  free(text);
  json_decref(msg);
}

static int send_command(chromium_t *c, const char *method, json_t *params, bool in_session)
{
  int id = ++c->next_id;
  json_t *msg = json_pack("{s:i, s:s, s:o}", "id", id, "method", method, "params", params ? params : json_object());
  if (in_session && c->session[0] != '\0') json_object_set_new(msg, "sessionId", json_string(c->session));
  send_json(c, msg);
  return id;
}

static void note_error(chromium_t *c, const char *what, const char *text)
{
  size_t n = strlen(c->errors);
  snprintf(c->errors + n, sizeof c->errors - n, "%s: %s\n", what, text ? text : "?");
}

/* Events: errors are noted, dialogs answered, the load event remembered. */
static void on_event(chromium_t *c, const char *method, json_t *params)
{
  if (strcmp(method, "Runtime.exceptionThrown") == 0) {
    json_t *d = json_object_get(params, "exceptionDetails");
    json_t *e = json_object_get(d, "exception");
    const char *text = json_string_value(json_object_get(e, "description"));
    note_error(c, "exception", text ? text : json_string_value(json_object_get(d, "text")));
  } else if (strcmp(method, "Runtime.consoleAPICalled") == 0) {
    const char *type = json_string_value(json_object_get(params, "type"));
    if (type && (strcmp(type, "error") == 0 || strcmp(type, "assert") == 0)) note_error(c, "console", type);
  } else if (strcmp(method, "Log.entryAdded") == 0) {
    json_t *e = json_object_get(params, "entry");
    const char *level = json_string_value(json_object_get(e, "level"));
    if (level && strcmp(level, "error") == 0) note_error(c, "log", json_string_value(json_object_get(e, "text")));
  } else if (strcmp(method, "Page.javascriptDialogOpening") == 0) {
    c->dialogs++;
    json_t *p = c->prompt_answer ? json_pack("{s:b, s:s}", "accept", 1, "promptText", c->prompt_answer)
                                 : json_pack("{s:b}", "accept", 0);
    send_command(c, "Page.handleJavaScriptDialog", p, true);
  } else if (strcmp(method, "Page.loadEventFired") == 0) {
    c->loaded = true;
  }
}

/* The next message (blocking, up to WAIT_MS). */
static json_t *receive(chromium_t *c)
{
  for (;;) {
    char *end = memchr(c->buf, '\0', c->len);
    if (end != NULL) {
      json_error_t e;
      json_t *msg = json_loads(c->buf, 0, &e);
      ck_assert_msg(msg != NULL, "bad JSON from chromium: %s", e.text);
      size_t used = (size_t)(end - c->buf) + 1;
      memmove(c->buf, end + 1, c->len - used);
      c->len -= used;
      return msg;
    }
    if (c->cap - c->len < 65536) {
      c->buf = realloc(c->buf, c->cap *= 2);
      ck_assert_ptr_nonnull(c->buf);
    }
    struct pollfd p = {.fd = c->from, .events = POLLIN};
    int r = poll(&p, 1, WAIT_MS);
    if (r < 0 && errno == EINTR) continue;
    ck_assert_msg(r == 1, "chromium sent nothing for %d ms", WAIT_MS);
    ssize_t n = read(c->from, c->buf + c->len, c->cap - c->len);
    if (n < 0 && errno == EINTR) continue;
    ck_assert_msg(n > 0, "chromium closed its pipe");
    c->len += (size_t)n;
  }
}

/* Handles messages until the answer to command `id` (its result; the caller decrefs). */
static json_t *wait_result(chromium_t *c, int id)
{
  for (;;) {
    json_t *msg = receive(c);
    json_t *mid = json_object_get(msg, "id");
    if (mid != NULL && json_integer_value(mid) == id) {
      json_t *err = json_object_get(msg, "error");
      ck_assert_msg(err == NULL, "chromium: %s", json_string_value(json_object_get(err, "message")));
      json_t *result = json_incref(json_object_get(msg, "result"));
      json_decref(msg);
      return result;
    }
    const char *method = json_string_value(json_object_get(msg, "method"));
    if (method != NULL) on_event(c, method, json_object_get(msg, "params"));
    json_decref(msg);
  }
}

json_t *chromium_call(chromium_t *c, const char *method, json_t *params)
{
  return wait_result(c, send_command(c, method, params, true));
}

void chromium_load(chromium_t *c, const char *url)
{
  c->loaded = false;
  json_decref(chromium_call(c, "Page.navigate", json_pack("{s:s}", "url", url)));
  while (!c->loaded) {
    json_t *msg = receive(c);
    const char *method = json_string_value(json_object_get(msg, "method"));
    if (method != NULL) on_event(c, method, json_object_get(msg, "params"));
    json_decref(msg);
  }
}

json_t *chromium_eval(chromium_t *c, const char *expression)
{
  json_t *r = chromium_call(c, "Runtime.evaluate",
                            json_pack("{s:s, s:b, s:b}", "expression", expression, "returnByValue", 1, "awaitPromise", 1));
  json_t *ex = json_object_get(r, "exceptionDetails");
  ck_assert_msg(ex == NULL, "%s: %s", expression, json_string_value(json_object_get(ex, "text")));
  json_t *v = json_incref(json_object_get(json_object_get(r, "result"), "value"));
  json_decref(r);
  return v;
}

static void mouse(chromium_t *c, const char *type, double x, double y)
{
  json_t *p = json_pack("{s:s, s:f, s:f, s:s, s:i}", "type", type, "x", x, "y", y, "button",
                        strcmp(type, "mouseMoved") == 0 ? "none" : "left", "clickCount", 1);
  json_decref(chromium_call(c, "Input.dispatchMouseEvent", p));
}

void chromium_move(chromium_t *c, double x, double y) { mouse(c, "mouseMoved", x, y); }

void chromium_click(chromium_t *c, double x, double y)
{
  mouse(c, "mouseMoved", x, y);
  mouse(c, "mousePressed", x, y);
  mouse(c, "mouseReleased", x, y);
}

/* Base64 (RFC 4648) to bytes; returns the length. */
static size_t unbase64(const char *in, unsigned char *out)
{
  static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  uint32_t acc = 0;
  int bits = 0;
  size_t n = 0;
  for (; *in && *in != '='; in++) {
    const char *p = strchr(alphabet, *in);
    if (p == NULL) continue;
    acc = acc << 6 | (uint32_t)(p - alphabet);
    if ((bits += 6) >= 8) out[n++] = (unsigned char)(acc >> (bits -= 8));
  }
  return n;
}

void chromium_open_file(chromium_t *c, const char *dir, const char *path, int width, int height)
{
  char profile[4200], url[4200];
  snprintf(profile, sizeof profile, "%s/chromium", dir);
  snprintf(url, sizeof url, "file://%s", path);
  chromium_start(c, profile, width, height);
  chromium_load(c, url);
  ck_assert_msg(c->errors[0] == '\0', "errors while loading %s:\n%s", path, c->errors);
}

void chromium_screenshot(chromium_t *c, const char *path)
{
  json_t *r = chromium_call(c, "Page.captureScreenshot", json_pack("{s:s}", "format", "png"));
  const char *data = json_string_value(json_object_get(r, "data"));
  ck_assert_ptr_nonnull(data);
  unsigned char *png = malloc(strlen(data));
  ck_assert_ptr_nonnull(png);
  size_t n = unbase64(data, png);
  ck_assert_msg(n > 8 && memcmp(png, "\x89PNG\r\n\x1a\n", 8) == 0, "not a PNG");
  FILE *f = fopen(path, "wb");
  ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
  ck_assert_uint_eq(fwrite(png, 1, n, f), n);
  ck_assert_int_eq(fclose(f), 0);
  free(png);
  json_decref(r);
}

void chromium_stop(chromium_t *c)
{
  c->session[0] = '\0';
  send_command(c, "Browser.close", NULL, false);
  int status;
  while (waitpid(c->pid, &status, 0) < 0 && errno == EINTR) {}
  close(c->to);
  close(c->from);
  free(c->buf);
  c->buf = NULL;
}
