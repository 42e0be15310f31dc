/* test_periodic.c - periodic profiles (MIMALLOC_PROF_PERIOD) and their retention (MIMALLOC_PROF_KEEP), which
 * interval and peak profiles follow too.
 *
 * Waits are for files: an inotify watch on the profiles' directory, set before the program starts, sees
 * each profile renamed into place (IN_MOVED_TO) and each one retention removes (IN_DELETE), while the
 * program's stdout says whether it is still alive.  The profiler thread's own deadline is the only clock.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>

#include "control_util.h"
#include "pprof_util.h"

#if MPROF_PPROF

typedef struct watch_s {
  int      fd;
  char     kind;                          /* the kind counted */
  unsigned moved, deleted;                /* files of that kind renamed into place, removed */
  unsigned newest[2];                     /* the sequence numbers of the last two renamed into place */
} watch_t;

static watch_t watch_dir(const char *dir, char kind)
{
  watch_t w = {.fd = inotify_init1(IN_CLOEXEC), .kind = kind};
  ck_assert_int_ge(w.fd, 0);
  ck_assert_int_ge(inotify_add_watch(w.fd, dir, IN_MOVED_TO | IN_DELETE), 0);
  return w;
}

/* Reads what the watch has seen; with `block`, waits for at least one event (or the program's end, which
 * fails the test: its stdout is readable only at its end). */
static void watch_read(watch_t *w, const probe_child_t *c, bool block)
{
  _Alignas(struct inotify_event) char buf[8192];
  struct pollfd pf[2] = {{.fd = w->fd, .events = POLLIN}, {.fd = c != NULL ? c->out : -1, .events = POLLIN}};
  int rc = poll(pf, 2, block ? -1 : 0);
  if (rc < 0 && errno == EINTR) return;
  ck_assert_int_ge(rc, 0);
  ck_assert_msg(pf[1].revents == 0, "the program ended (or spoke) while files were awaited");
  if (pf[0].revents == 0) return;
  ssize_t r = read(w->fd, buf, sizeof buf);
  ck_assert_int_gt(r, 0);
  for (char *at = buf; at < buf + r;) {
    const struct inotify_event *ev = (const struct inotify_event *)at;
    int pid;
    unsigned seq;
    char kind;
    if (ev->len > 0 && sscanf(ev->name, "prof.%d.%u.%c.pb.gz", &pid, &seq, &kind) == 3 && kind == w->kind &&
        ends_with(ev->name, ".pb.gz")) {
      if (ev->mask & IN_DELETE) {
        w->deleted++;
      } else {
        w->moved++;
        w->newest[0] = w->newest[1];
        w->newest[1] = seq;
      }
    }
    at += sizeof *ev + ev->len;
  }
}

static void watch_until(watch_t *w, const probe_child_t *c, unsigned moved, unsigned deleted)
{
  while (w->moved < moved || w->deleted < deleted) watch_read(w, c, true);
}

/* The profiles in dir, by sequence number; fails on any file that is not one. */
static size_t list_profiles(const char *dir, dump_file_t *out)
{
  DIR *d = opendir(dir);
  ck_assert_ptr_nonnull(d);
  size_t n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.') continue;
    int pid;
    ck_assert_uint_lt(n, MAX_DUMPS);
    ck_assert_msg(sscanf(e->d_name, "prof.%d.%u.%c.pb.gz", &pid, &out[n].seq, &out[n].kind) == 3 &&
                  ends_with(e->d_name, ".pb.gz"), "unexpected file %s", e->d_name);
    snprintf(out[n].path, sizeof out[n].path, "%s/%s", dir, e->d_name);
    for (size_t k = n++; k > 0 && out[k - 1].seq > out[k].seq; k--) {
      dump_file_t t = out[k];
      out[k] = out[k - 1];
      out[k - 1] = t;
    }
  }
  closedir(d);
  return n;
}

static size_t count_kind(const dump_file_t *f, size_t n, char kind)
{
  size_t k = 0;
  for (size_t i = 0; i < n; i++) k += f[i].kind == kind;
  return k;
}

/* CLOCK_REALTIME less CLOCK_MONOTONIC now: it changes when the system's clock is stepped (this VM's time
 * sync steps it by 5 ms now and then). */
static int64_t realtime_offset_ns(void)
{
  struct timespec m;
  clock_gettime(CLOCK_MONOTONIC, &m);
  return (int64_t)realtime_ns() - ((int64_t)m.tv_sec * 1000000000 + m.tv_nsec);
}

/* A profile every second (kind p) while a session runs, each with the time its data was collected and a
 * duration that runs from the previous periodic profile: equal to the difference of their times up to the
 * clocks' reads (microseconds apart; 5 ms allowed, NTP slewing at most 0.05% of a second included) and
 * any step of the system's clock while the test ran (the change of realtime_offset_ns() is added), and
 * about the period (0.5 to 10 s: a loaded machine delays a deadline, never advances it by half).  The
 * first runs from the session's start, at load: no earlier than the test started the program. */
START_TEST(periodic_profiles)
{
  char dir[PATH_MAX], prefix[PATH_MAX + 32];
  snprintf(dir, sizeof dir, "%s", tmp_dir_make());
  prefix_var(prefix, sizeof prefix, dir);
  watch_t w = watch_dir(dir, 'p');
  uint64_t started = realtime_ns();
  int64_t offset_before = realtime_offset_ns();
  probe_child_t c = control_probe_start((const char *const[]){"MIMALLOC_PROF=1", "MIMALLOC_PROF_SAMPLE_RATE=4096",
                                                              "MIMALLOC_PROF_PERIOD=1", prefix, NULL}, NULL);
  ck_assert_str_eq(control_probe_say(&c, "alloc b 100 4096"), "done b 100");
  watch_until(&w, &c, 3, 0);
  probe_run_t run = control_probe_end(&c, NULL);
  probe_run_free(&run);
  close(w.fd);
  int64_t stepped = realtime_offset_ns() - offset_before;
  uint64_t allowed = 5000000 + (uint64_t)(stepped < 0 ? -stepped : stepped);
  dump_file_t f[MAX_DUMPS];
  size_t n = list_profiles(dir, f);
  ck_assert_uint_ge(n, 3);
  uint64_t time_prev = 0;
  for (size_t i = 0; i < 3; i++) {
    ck_assert_int_eq(f[i].kind, 'p');
    ck_assert_uint_eq(f[i].seq, i);
    profile_t *p = profile_load(f[i].path);
    uint64_t t = (uint64_t)p->time_nanos, d = (uint64_t)p->duration_nanos;
    if (i == 0) {
      ck_assert_msg(d > 0 && d <= t - started, "first duration %llu, %llu since the start", (unsigned long long)d,
                    (unsigned long long)(t - started));
    } else {
      ck_assert_uint_gt(t, time_prev);
      uint64_t gap = t - time_prev, diff = d > gap ? d - gap : gap - d;
      ck_assert_msg(diff < allowed, "duration %llu, time since the previous %llu (the clock stepped %lld ns)",
                    (unsigned long long)d, (unsigned long long)gap, (long long)stepped);
      ck_assert_msg(d > 500000000 && d < 10000000000ull, "duration %llu", (unsigned long long)d);
    }
    time_prev = t;
    test_profile_free(p);
  }
}
END_TEST

/* MIMALLOC_PROF_KEEP=2 with a profile a second, served by a thread that also serves the control socket
 * (so it waits in poll, not on its semaphore) and that must not call malloc (tests/nomalloc_shim.so
 * preloaded): after five, the directory holds the two newest, and the other three were removed. */
START_TEST(periodic_keep)
{
  char dir[PATH_MAX], sockets[PATH_MAX], prefix[PATH_MAX + 32], control[PATH_MAX + 32], preload[PATH_MAX];
  snprintf(sockets, sizeof sockets, "%s", tmp_dir_make());
  snprintf(dir, sizeof dir, "%s", tmp_dir_make());
  prefix_var(prefix, sizeof prefix, dir);
  set_var(control, sizeof control, "MIMALLOC_PROF_CONTROL", sockets);
  set_var(preload, sizeof preload, "LD_PRELOAD", probe_getenv("MPROF_TEST_NOMALLOC_SHIM"));
  watch_t w = watch_dir(dir, 'p');
  probe_child_t c = control_probe_start((const char *const[]){"MIMALLOC_PROF=1", "MIMALLOC_PROF_PERIOD=1",
                                                              "MIMALLOC_PROF_KEEP=2", prefix, control, preload, NULL},
                                        NULL);
  ck_assert_str_eq(control_probe_say(&c, "alloc b 100 4096"), "done b 100");
  watch_until(&w, &c, 5, 3);
  dump_file_t f[MAX_DUMPS];
  size_t n = list_profiles(dir, f);
  ck_assert_uint_eq(count_kind(f, n, 'p'), 2);
  ck_assert_uint_eq(f[n - 2].seq, w.newest[0]);
  ck_assert_uint_eq(f[n - 1].seq, w.newest[1]);
  probe_run_t run = control_probe_end(&c, NULL);
  probe_run_free(&run);
  close(w.fd);
}
END_TEST

/* Interval and peak profiles follow MIMALLOC_PROF_KEEP too, each kind on its own; signal profiles are
 * never removed.  8 MiB grown at rate 16 KiB with an interval of 1 MiB, in four steps of 2 MiB each
 * followed by a barrier (a signal profile, written after every request before it), give at least one
 * interval and one peak profile per step: requests that come while a profile is written are served by
 * one (lib/profiler.c), so without the barriers a slow machine (qemu-user) could write a single one.
 * Left: the newest interval and peak profile, and the four signal profiles. */
START_TEST(keep_interval_peak)
{
  char dir[PATH_MAX], prefix[PATH_MAX + 32];
  snprintf(dir, sizeof dir, "%s", tmp_dir_make());
  prefix_var(prefix, sizeof prefix, dir);
  watch_t wi = watch_dir(dir, 'i'), wu = watch_dir(dir, 'u');
  const char *vars[] = {"MIMALLOC_PROF=1", "MIMALLOC_PROF_SAMPLE_RATE=16384", "MIMALLOC_PROF_INTERVAL=1m",
                        "MIMALLOC_PROF_GDUMP=1", "MIMALLOC_PROF_SIGNAL=USR2", "MIMALLOC_PROF_KEEP=1", prefix, NULL};
  probe_run_t r = run_probe(vars, (const char *const[]){"phases", "grow:2097152", "barrier", "grow:2097152", "barrier",
                                                         "grow:2097152", "barrier", "grow:2097152", "barrier", NULL});
  probe_assert_exit0(&r, NULL);
  ck_assert_str_eq(r.err, "");
  for (watch_t *w = &wi; w != NULL; w = w == &wi ? &wu : NULL) {
    for (unsigned seen = ~0u; seen != w->moved + w->deleted;) {   /* every event queued by now */
      seen = w->moved + w->deleted;
      watch_read(w, NULL, false);
    }
    ck_assert_msg(w->moved >= 3 && w->deleted == w->moved - 1, "kind %c: %u written, %u removed", w->kind, w->moved,
                  w->deleted);
    close(w->fd);
  }
  dump_file_t f[MAX_DUMPS];
  size_t n = list_profiles(dir, f);
  ck_assert_uint_eq(count_kind(f, n, 'i'), 1);
  ck_assert_uint_eq(count_kind(f, n, 'u'), 1);
  ck_assert_uint_eq(count_kind(f, n, 's'), 4);
  for (size_t k = 0; k < n; k++) {
    if (f[k].kind == 'i') ck_assert_uint_eq(f[k].seq, wi.newest[1]);
    if (f[k].kind == 'u') ck_assert_uint_eq(f[k].seq, wu.newest[1]);
  }
  probe_run_free(&r);
}
END_TEST

Suite *periodic_suite(void)
{
  Suite *s = suite_create("periodic");
  TCase *tc = tcase_create("periodic");
  tcase_add_unchecked_fixture(tc, run_dir_setup, run_dir_teardown);
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, periodic_profiles);
  tcase_add_test(tc, periodic_keep);
  tcase_add_test(tc, keep_interval_peak);
  suite_add_tcase(s, tc);
  return s;
}

#endif
