/* control_util.h - what the control-socket suites share (test_control.c: the library's side, spoken to
 * directly; test_tool_service.c and test_tool_access.c: the command's ctl, top, ps and serve, with
 * willing and with hostile processes and clients): tests/control_probe, told what to
 * allocate one line at a time, and a small client of the protocol of mimalloc_prof(3), CONTROL SOCKET,
 * written from the manual page rather than from either side's code.  Every function asserts (ck_assert)
 * on a failure of the test's own side.
 */
#ifndef MPROF_TEST_CONTROL_UTIL_H
#define MPROF_TEST_CONTROL_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "subprocess.h"

#define CONTROL_WATCHDOG_S 120          /* a probe still running after this long has hung */

/* tests/control_probe with `vars` in its environment, started through `wrapper` (NULL: none; else a
 * NULL-terminated command such as setpriv's, the probe's path appended); returns once it said "ready". */
probe_child_t control_probe_start(const char *const *vars, const char *const *wrapper);
/* The same with another copy of the probe, at path `probe`. */
probe_child_t control_probe_start_at(const char *probe, const char *const *vars, const char *const *wrapper);
/* Sends one command line (without its newline) and returns its one-line answer (static; no newline). */
const char *control_probe_say(const probe_child_t *c, const char *command);
/* Ends its stdin and reaps it; asserts it printed "allocations ok" last and nothing on stderr but `err`
 * (NULL: nothing at all). */
probe_run_t control_probe_end(probe_child_t *c, const char *err);

/* DIR/PID.sock */
const char *control_socket_of(const char *dir, pid_t pid, char *buf, size_t len);

/* A reply: the whole frame's text, its status line and what follows. */
typedef struct control_reply_s {
  char   *frame;                       /* malloc'd, NUL-terminated */
  size_t  len;
  bool    ok;                          /* the status line is "ok" */
  char    status[256];
  char   *body;                        /* after the status line */
  size_t  body_len;
} control_reply_t;

int  control_connect(const char *path);                                   /* -1 with errno */
void control_send_frame(int fd, const void *text, size_t len);            /* length word + text */
/* Reads one reply; false when the connection ended first (nothing, or part of a frame). */
bool control_read_reply(int fd, control_reply_t *r);
/* Connects, sends `request`, reads the reply (asserting one comes), closes. */
control_reply_t control_ask(const char *path, const char *request);
void control_reply_free(control_reply_t *r);
/* The number on the line "key N" of a stats reply (fails the test when absent). */
uint64_t control_stat(const control_reply_t *stats, const char *key);

/* ---------------------------------------------------------------------------------------------------
   The command's services (test_tool_service.c, test_tool_access.c)
--------------------------------------------------------------------------------------------------- */

/* tests/control_probe with its socket in dir, sampling one allocation per 4096 bytes from the start or
 * not at all. */
probe_child_t service_probe_start(const char *dir, bool sampling);
/* "1234" (static: the next call replaces it). */
const char *pid_text(pid_t pid);
/* mimalloc-prof serve ARGS..., once it said where it listens: "http://ADDR:PORT/" in url.
 * serve_start_as runs `command` (NULL-terminated, the program first: setpriv and the command, say) with
 * extra environment `env` (NULL: none). */
probe_child_t serve_start(const char *const *args, char *url, size_t len);
probe_child_t serve_start_as(const char *const *command, const char *const *env, char *url, size_t len);
/* SIGTERM, and the exit status must be 0. */
void serve_stop(probe_child_t *s);
/* curl's HTTP status for url (000 when there was no response), the body saved in out (NULL: discarded),
 * with more arguments (NULL-terminated; NULL: none), run through wrapper (as control_probe_start's). */
long curl_status(const char *const *wrapper, const char *url, const char *out, const char *const *more);
/* go tool pprof ARGS... (at most 5; a URL among them) with HOME and PPROF_TMPDIR in dir, where it keeps
 * what it fetched; its exit status must be 0. */
probe_run_t go_pprof_url(const char *dir, const char *const *args);
/* Copies file src into dir under its own name, mode 0755; the copy's path in buf. */
const char *control_copy_into(const char *src, const char *dir, char *buf, size_t len);
/* For a program run as another user (setpriv), who may not reach this build: a new directory of /tmp
 * that others may pass through (0711; /tmp/mprof-TAG-XXXXXX) into buf, for copies of what that user
 * runs.  Not below TMPDIR, which may be private (scripts/deb.sh gives dpkg-buildpackage a 0700 one), nor
 * beside the build, which may sit below a directory closed to others (a clone under /root, as on CI
 * machines).  The test removes it. */
const char *passable_dir(char *buf, size_t len, const char *tag);

#endif
