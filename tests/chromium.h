/* chromium.h - headless Chromium driven through its DevTools protocol over a pipe
 * (--remote-debugging-pipe: JSON messages separated by NUL bytes on descriptors 3 and 4), for the
 * flame-graph test.  One page; script exceptions, console errors and log errors are collected; a
 * JavaScript dialog (prompt) is answered with the text set beforehand. */
#ifndef MPROF_TEST_CHROMIUM_H
#define MPROF_TEST_CHROMIUM_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <jansson.h>

typedef struct chromium_s {
  pid_t  pid;
  int    to, from;              /* our ends: commands to Chromium, messages from it */
  char  *buf;                   /* received, not yet split */
  size_t len, cap;
  int    next_id;
  char   session[128];          /* the page's session */
  char   errors[4096];          /* exceptions and error messages, one a line */
  const char *prompt_answer;    /* for window.prompt; NULL cancels */
  int    dialogs;               /* dialogs answered */
  bool   loaded;                /* Page.loadEventFired seen */
} chromium_t;

/* Starts Chromium (user data in `profile_dir`) with one page of width x height CSS pixels. */
void   chromium_start(chromium_t *c, const char *profile_dir, int width, int height);
/* Loads `url` and waits for its load event. */
void   chromium_load(chromium_t *c, const char *url);
/* chromium_start (user data in dir/chromium), then chromium_load of the file at `path`; fails the test when
 * the page reports errors while loading. */
void   chromium_open_file(chromium_t *c, const char *dir, const char *path, int width, int height);
/* A command to the page's session; returns its "result" (the caller decrefs). */
json_t *chromium_call(chromium_t *c, const char *method, json_t *params);
/* Evaluates a JavaScript expression in the page; its value (by value; the caller decrefs). */
json_t *chromium_eval(chromium_t *c, const char *expression);
/* A left click (press and release) at (x, y), or a mouse move there. */
void   chromium_click(chromium_t *c, double x, double y);
void   chromium_move(chromium_t *c, double x, double y);
/* Writes a PNG screenshot of the page to `path`. */
void   chromium_screenshot(chromium_t *c, const char *path);
/* Closes the browser and reaps it. */
void   chromium_stop(chromium_t *c);

#endif
