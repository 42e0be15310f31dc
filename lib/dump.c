/* dump.c - heap profile dumps: the API, the automatic triggers, file names and the leak report.
 *
 * Triggers (MIMALLOC_PROF_*): FINAL (at exit), INTERVAL (about every N allocated bytes, estimated),
 * GDUMP (at each new peak of estimated in-use bytes, growing by at least a tenth each time), SIGNAL (on a
 * signal), LEAK (a text report of the top in-use sites at exit).  Files are
 * <MIMALLOC_PROF_PREFIX>.<pid>.<seq>.<kind>.pb.gz with kind m (mi_prof_dump), f (final), i (interval),
 * u (new peak), s (signal).
 *
 * Interval, peak and signal dumps are never written by the thread that triggers them (it may be inside
 * malloc holding the application's locks, or in a signal handler): the trigger writes one byte, the kind,
 * to a pipe, and the profiler's own thread (the parked owner of the sampled-block heap, sheap.c) reads
 * it and writes the file.  The signal handler does nothing but that write(2).  Dumps are serialised by
 * dump_lock, taken before any other profiler lock (rank 0 in internal.h's order).
 */
#include "internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t dump_lock = PTHREAD_MUTEX_INITIALIZER;
static int request_pipe[2] = {-1, -1};      /* trigger -> profiler thread */
static uint64_t dump_seq;                   /* files named so far (atomic) */
static uint64_t session_start_ns;
static int write_failure_said;

/* Interval and peak state (relaxed atomics; triggers are approximate by nature). */
static uint64_t interval_bytes;             /* MIMALLOC_PROF_INTERVAL, 0 = off */
static bool gdump;
static uint64_t allocated;                  /* estimated bytes allocated this session */
static uint64_t next_interval;              /* dump when allocated passes it */
static int64_t inuse;                       /* estimated bytes in use this session */
static int64_t next_peak;                   /* dump when inuse passes it */

static uint64_t now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---------------------------------------------------------------------------------------------------
   Writing a profile
--------------------------------------------------------------------------------------------------- */

static bool dump_fd_locked(int fd)
{
  mprof_snapshot_t snap;
  if (!mprof_snapshot_take(&snap, mprof_option(MPROF_OPT_ACCUM) != 0)) return false;
  mi_prof_stats_t st;
  mi_prof_stats(&st, sizeof st);
  uint64_t now = now_ns();
  mprof_pprof_meta_t meta = {
    .sample_rate = st.sample_rate != 0 ? st.sample_rate : mprof_option(MPROF_OPT_SAMPLE_RATE),
    .start_ns = session_start_ns != 0 ? session_start_ns : now,   /* no session yet: duration 0 */
    .now_ns = now,
    .totals = &snap.totals,
  };
  memcpy(meta.dropped, st.dropped, sizeof meta.dropped);
  bool ok = mprof_pprof_write(fd, &snap, &meta);
  int err = errno;
  mprof_snapshot_release(&snap);
  errno = err;
  return ok;
}

bool mi_prof_dump_fd(int fd)
{
  if (fd < 0) {
    errno = EBADF;
    return false;
  }
  pthread_mutex_lock(&dump_lock);
  bool ok = dump_fd_locked(fd);
  int err = errno;
  pthread_mutex_unlock(&dump_lock);
  errno = err;
  return ok;
}

/* <prefix>.<pid>.<seq>.<kind>.pb.gz */
static bool auto_name(char kind, char *out, size_t len)
{
  uint64_t seq = __atomic_fetch_add(&dump_seq, 1, __ATOMIC_RELAXED);
  int n = snprintf(out, len, "%s.%d.%llu.%c.pb.gz", mprof_option_str(MPROF_OPT_PREFIX), (int)getpid(),
                   (unsigned long long)seq, kind);
  return n > 0 && (size_t)n < len;
}

/* Writes a profile to path.  A file this call created is removed again if the dump fails; an existing
 * path (a symbolic link, a device, a file the caller prepared) is never removed. */
static bool dump_path(const char *path)
{
  bool created = true;
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0 && errno == EEXIST) {
    created = false;
    fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
  }
  if (fd < 0) return false;
  bool ok = mi_prof_dump_fd(fd);
  int err = errno;
  if (close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (!ok && created) unlink(path);
  errno = err;
  return ok;
}

bool mi_prof_dump(const char *path)
{
  char name[4096];
  if (path == NULL) {
    if (!auto_name('m', name, sizeof name)) {
      errno = ENAMETOOLONG;
      return false;
    }
    path = name;
  }
  return dump_path(path);
}

/* An automatic dump: failures are said once on stderr (the program is never disturbed). */
static void dump_auto(char kind)
{
  char name[4096];
  if (!auto_name(kind, name, sizeof name)) {
    errno = ENAMETOOLONG;
  } else if (dump_path(name)) {
    return;
  }
  if (mprof_warn_once_claim(&write_failure_said))
    mprof_warn("cannot write heap profile %s: %s (MIMALLOC_PROF_PREFIX)", name, strerrorname_np(errno));
}

/* ---------------------------------------------------------------------------------------------------
   Triggers
--------------------------------------------------------------------------------------------------- */

/* Async-signal-safe: one write(2) of one byte; a full pipe drops the request. */
static void request(char kind)
{
  int saved = errno;
  if (request_pipe[1] >= 0) {
    ssize_t w = write(request_pipe[1], &kind, 1);
    (void)w;
  }
  errno = saved;
}

static void on_signal(int sig)
{
  (void)sig;
  request('s');
}

/* The profiler thread's loop (sheap.c's owner thread, all signals blocked): writes requested dumps. */
void mprof_dump_serve(void)
{
  for (;;) {
    char kind;
    ssize_t r = request_pipe[0] >= 0 ? read(request_pipe[0], &kind, 1) : -1;
    if (r == 1) {
      dump_auto(kind);
    } else if (r < 0 && errno != EINTR) {
      for (;;) pause();             /* no triggers: parked for good */
    }
  }
}

static int64_t peak_floor;                  /* ten sample periods of the session, bytes */

/* A new session (sampling at `rate` bytes): the interval and peak triggers start over. */
void mprof_dump_session_begin(uint64_t rate)
{
  peak_floor = (int64_t)(10 * rate);
  session_start_ns = now_ns();
  __atomic_store_n(&allocated, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&next_interval, interval_bytes, __ATOMIC_RELAXED);
  __atomic_store_n(&inuse, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&next_peak, peak_floor, __ATOMIC_RELAXED);
}

/* A sample of `bytes` estimated bytes was recorded (sampler.c). */
void mprof_dump_note_alloc(uint64_t bytes)
{
  if (mprof_likely(interval_bytes == 0 && !gdump)) return;
  if (interval_bytes != 0) {
    uint64_t now = __atomic_add_fetch(&allocated, bytes, __ATOMIC_RELAXED);
    uint64_t next = __atomic_load_n(&next_interval, __ATOMIC_RELAXED);
    if (now >= next && __atomic_compare_exchange_n(&next_interval, &next, now + interval_bytes, false,
                                                   __ATOMIC_RELAXED, __ATOMIC_RELAXED))
      request('i');
  }
  mprof_dump_note_inuse((int64_t)bytes);
}

/* In-use estimate changed by `delta` bytes (a sample, a free or resize of a sampled block). */
void mprof_dump_note_inuse(int64_t delta)
{
  if (mprof_likely(!gdump)) return;
  int64_t now = __atomic_add_fetch(&inuse, delta, __ATOMIC_RELAXED);
  int64_t peak = __atomic_load_n(&next_peak, __ATOMIC_RELAXED);
  /* A new peak: dump, and wait for at least another tenth (and ten sample periods) of growth, so the
   * number of files grows with the logarithm of the peak. */
  int64_t step = now / 10 > peak_floor ? now / 10 : peak_floor;
  if (delta > 0 && now > peak &&
      __atomic_compare_exchange_n(&next_peak, &peak, now + step, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
    request('u');
}

/* ---------------------------------------------------------------------------------------------------
   At exit: the final dump and the leak report
--------------------------------------------------------------------------------------------------- */

static void say(const char *text)
{
  size_t n = strlen(text);
  while (n > 0) {
    ssize_t w = write(2, text, n);
    if (w <= 0) return;
    text += w;
    n -= (size_t)w;
  }
}

/* One frame as "module+0xoffset (symbol+0xoffset)" where dladdr can tell. */
static void say_frame(size_t i, uintptr_t pc)
{
  char line[512];
  Dl_info info;
  int n = snprintf(line, sizeof line, "    #%zu 0x%lx", i, (unsigned long)pc);
  if (dladdr((void *)(pc - 1), &info) != 0 && info.dli_fname != NULL) {
    const char *base = strrchr(info.dli_fname, '/');
    n += snprintf(line + n, sizeof line - (size_t)n, " %s+0x%lx", base ? base + 1 : info.dli_fname,
                  (unsigned long)(pc - (uintptr_t)info.dli_fbase));
    if (info.dli_sname != NULL && (size_t)n < sizeof line)
      n += snprintf(line + n, sizeof line - (size_t)n, " (%s+0x%lx)", info.dli_sname,
                    (unsigned long)(pc - (uintptr_t)info.dli_saddr));
  }
  if ((size_t)n >= sizeof line - 1) n = (int)sizeof line - 2;
  line[n++] = '\n';
  line[n] = '\0';
  say(line);
}

#define LEAK_SITES  10
#define LEAK_FRAMES 8

static void leak_report(void)
{
  mprof_snapshot_t snap;
  if (!mprof_snapshot_take(&snap, false)) return;
  size_t top[LEAK_SITES], n = 0;                  /* indices of the largest in-use stacks, descending */
  for (size_t i = 0; i < snap.n; i++) {
    uint64_t b = snap.stack[i].counts.inuse_bytes;
    size_t at = n < LEAK_SITES ? n++ : LEAK_SITES;
    while (at > 0 && snap.stack[top[at - 1]].counts.inuse_bytes < b) {
      if (at < LEAK_SITES) top[at] = top[at - 1];
      at--;
    }
    if (at < LEAK_SITES) top[at] = i;
  }
  char line[256];
  snprintf(line, sizeof line, "mimalloc-prof: leak report: about %llu bytes in %llu objects still in use "
           "at exit (estimated from %llu live samples), top %zu sites:\n",
           (unsigned long long)snap.totals.inuse_bytes,
           (unsigned long long)((snap.totals.inuse_obj_fx + MPROF_FX_ONE / 2) / MPROF_FX_ONE),
           (unsigned long long)snap.totals.live, n);
  say(line);
  for (size_t k = 0; k < n; k++) {
    const mprof_snap_stack_t *st = &snap.stack[top[k]];
    snprintf(line, sizeof line, "  %llu bytes in %llu objects allocated at:\n",
             (unsigned long long)st->counts.inuse_bytes, (unsigned long long)st->counts.inuse_objects);
    say(line);
    for (size_t f = 0; f < st->depth && f < LEAK_FRAMES; f++) say_frame(f, st->frames[f]);
  }
  mprof_snapshot_release(&snap);
}

static void at_exit(void)
{
  if (!mi_prof_is_enabled()) return;
  size_t countdown = mprof_guard_enter();         /* nothing done here is sampled */
  if (mprof_option(MPROF_OPT_FINAL)) dump_auto('f');
  if (mprof_option(MPROF_OPT_LEAK)) leak_report();
  mprof_guard_leave(countdown);
}

/* At load (the constructor): the triggers the options ask for. */
void mprof_dump_init(void)
{
  interval_bytes = mprof_option(MPROF_OPT_INTERVAL);
  gdump = mprof_option(MPROF_OPT_GDUMP) != 0;
  int sig = (int)mprof_option(MPROF_OPT_SIGNAL);
  if (interval_bytes != 0 || gdump || sig != 0) {
    if (pipe2(request_pipe, O_CLOEXEC) != 0) {
      mprof_warn("cannot create the dump request pipe: %s; interval, peak and signal dumps are off",
                 strerrorname_np(errno));
      interval_bytes = 0;
      gdump = false;
      sig = 0;
    } else {
      fcntl(request_pipe[1], F_SETFL, O_NONBLOCK);
    }
  }
  if (sig != 0) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(sig, &sa, NULL) != 0) mprof_warn("cannot catch signal %d: %s", sig, strerrorname_np(errno));
  }
  if (mprof_option(MPROF_OPT_FINAL) || mprof_option(MPROF_OPT_LEAK)) atexit(at_exit);
}

void mprof_dump_prefork(void) { pthread_mutex_lock(&dump_lock); }
void mprof_dump_postfork(void) { pthread_mutex_unlock(&dump_lock); }

/* In a fork child the profiler thread does not exist, and the pipe is the parent's: a request written to
 * it would make the parent dump its own heap.  The child's interval, peak and signal triggers are off
 * (its mi_prof_dump and final dump still work). */
void mprof_dump_postfork_child(void)
{
  if (request_pipe[0] >= 0) close(request_pipe[0]);
  if (request_pipe[1] >= 0) close(request_pipe[1]);
  request_pipe[0] = request_pipe[1] = -1;
  interval_bytes = 0;
  gdump = false;
  mprof_dump_postfork();
}
