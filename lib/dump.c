/* dump.c - heap profile dumps: the API, the automatic triggers, file names and the leak report.
 *
 * Triggers (MIMALLOC_PROF_*): FINAL (at exit), INTERVAL (about every N allocated bytes, estimated),
 * GDUMP (at each new peak of estimated in-use bytes, growing by at least a tenth each time), SIGNAL (on a
 * signal), LEAK (a text report of the top in-use sites at exit).  Files are
 * <MIMALLOC_PROF_PREFIX>.<pid>.<seq>.<kind>.pb.gz with kind m (mi_prof_dump), f (final), i (interval),
 * u (new peak), s (signal).
 *
 * Interval, peak and signal dumps are never written by the thread that triggers them (it may be inside
 * malloc holding the application's locks, or in a signal handler): the trigger counts a request of its
 * kind and posts a semaphore (sem_post is async-signal-safe), and the profiler's own thread (the parked
 * owner of the sampled-block heap, sheap.c) waits on it and writes one file per request.  No file
 * descriptor is involved: a program that closes every descriptor and reuses the numbers (daemons do)
 * cannot cross wires with the profiler.  Automatic dumps are written to a temporary name and renamed
 * when complete, and exit waits for one in progress, so a dump cut off never leaves a truncated
 * profile under a profile's name.  Dumps are serialised by
 * dump_lock, taken before any other profiler lock (rank 0 in internal.h's order).
 */
#include "internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t dump_lock = PTHREAD_MUTEX_INITIALIZER;
static sem_t requests;                      /* posted once per request (initialised at load) */
static unsigned pending[3];                 /* requests not served yet: interval, peak, signal (atomic) */
static const char pending_kind[3] = {'i', 'u', 's'};
static bool exiting;                        /* at exit: no more automatic dumps but the final (dump_lock) */
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

/* The next free <prefix>.<pid>.<seq>.<kind>.pb.gz: a name already there (left by the program this one
 * replaced with execve, under the same pid) is skipped, never overwritten. */
static bool auto_name(char kind, char *out, size_t len)
{
  for (int tries = 0; tries < 10000; tries++) {
    uint64_t seq = __atomic_fetch_add(&dump_seq, 1, __ATOMIC_RELAXED);
    int n = snprintf(out, len, "%s.%d.%llu.%c.pb.gz", mprof_option_str(MPROF_OPT_PREFIX), (int)getpid(),
                     (unsigned long long)seq, kind);
    if (n <= 0 || (size_t)n >= len) return false;
    if (access(out, F_OK) != 0) return true;
  }
  return false;
}

/* Writes a profile to path (dump_lock held).  A file this call created is removed again if the dump
 * fails; an existing path (a symbolic link, a device, a file the caller prepared) is never removed. */
static bool dump_path_locked(const char *path)
{
  bool created = true;
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0 && errno == EEXIST) {
    created = false;
    fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
  }
  if (fd < 0) return false;
  bool ok = dump_fd_locked(fd);
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
  pthread_mutex_lock(&dump_lock);
  bool ok = dump_path_locked(path);
  int err = errno;
  pthread_mutex_unlock(&dump_lock);
  errno = err;
  return ok;
}

/* An automatic dump, written as <name>.tmp and renamed when complete, all under dump_lock (so exit,
 * which takes it, never cuts one off).  Failures are said once on stderr (the program is never
 * disturbed). */
static void dump_auto(char kind)
{
  char name[4096], tmp[4096 + 8];
  pthread_mutex_lock(&dump_lock);
  if (exiting && kind != 'f') {
    pthread_mutex_unlock(&dump_lock);
    return;
  }
  bool ok = false;
  if (!auto_name(kind, name, sizeof name)) {
    errno = ENAMETOOLONG;
  } else {
    snprintf(tmp, sizeof tmp, "%s.tmp", name);
    if (dump_path_locked(tmp)) {
      ok = rename(tmp, name) == 0;
      int err = errno;
      if (!ok) unlink(tmp);
      errno = err;
    }
  }
  int err = errno;
  pthread_mutex_unlock(&dump_lock);
  if (!ok && mprof_warn_once_claim(&write_failure_said))
    mprof_warn("cannot write heap profile %s: %s (MIMALLOC_PROF_PREFIX)", name, strerrorname_np(err));
}

/* ---------------------------------------------------------------------------------------------------
   Triggers
--------------------------------------------------------------------------------------------------- */

/* Interval and peak requests are served before signal requests, so by the time a signal's file
 * appears every interval and peak dump requested before the signal is written. */
enum { REQ_INTERVAL, REQ_PEAK, REQ_SIGNAL };

/* Async-signal-safe: an atomic increment and sem_post(3). */
static void request(int which)
{
  int saved = errno;
  __atomic_add_fetch(&pending[which], 1, __ATOMIC_RELEASE);
  sem_post(&requests);
  errno = saved;
}

static void on_signal(int sig)
{
  (void)sig;
  request(REQ_SIGNAL);
}

/* Takes one pending request, in REQ_* order; -1 when none is left. */
static int take_request(void)
{
  for (int k = 0; k < 3; k++) {
    unsigned n = __atomic_load_n(&pending[k], __ATOMIC_ACQUIRE);
    while (n != 0) {
      if (__atomic_compare_exchange_n(&pending[k], &n, n - 1, true, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return k;
    }
  }
  return -1;
}

/* The profiler thread's loop (sheap.c's owner thread, all signals blocked): one file per request. */
void mprof_dump_serve(void)
{
  for (;;) {
    while (sem_wait(&requests) != 0) {
    }
    int k = take_request();
    if (k >= 0) dump_auto(pending_kind[k]);
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
      request(REQ_INTERVAL);
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
    request(REQ_PEAK);
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
  /* Wait for an automatic dump in progress on the profiler thread and stop any later one: exit must
   * not cut a file off half written. */
  pthread_mutex_lock(&dump_lock);
  exiting = true;
  pthread_mutex_unlock(&dump_lock);
  if (!mi_prof_is_enabled()) return;
  size_t countdown = mprof_guard_enter();         /* nothing done here is sampled */
  if (mprof_option(MPROF_OPT_FINAL)) dump_auto('f');
  if (mprof_option(MPROF_OPT_LEAK)) leak_report();
  mprof_guard_leave(countdown);
}

/* The profiler thread: every signal blocked, never sampled, never exits; writes requested dumps. */
static void *profiler_main(void *arg)
{
  (void)arg;
  mprof_tls.guard = 1;
  mprof_dump_serve();
}

static void start_profiler_thread(void)
{
  sigset_t all, old;
  pthread_attr_t attr;
  pthread_t thread;
  sigfillset(&all);
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, (size_t)256 << 10);
  pthread_sigmask(SIG_SETMASK, &all, &old);       /* the thread inherits a fully blocked mask */
  if (pthread_create(&thread, &attr, profiler_main, NULL) != 0)
    mprof_warn("cannot start the profiler thread: interval, peak and signal dumps are off");
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&attr);
}

/* At load (the constructor): the triggers the options ask for. */
void mprof_dump_init(void)
{
  interval_bytes = mprof_option(MPROF_OPT_INTERVAL);
  gdump = mprof_option(MPROF_OPT_GDUMP) != 0;
  int sig = (int)mprof_option(MPROF_OPT_SIGNAL);
  sem_init(&requests, 0, 0);
  if (sig != 0) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(sig, &sa, NULL) != 0) mprof_warn("cannot catch signal %d: %s", sig, strerrorname_np(errno));
  }
  if (interval_bytes != 0 || gdump || sig != 0) start_profiler_thread();
  if (interval_bytes != 0 || gdump || sig != 0 || mprof_option(MPROF_OPT_FINAL) || mprof_option(MPROF_OPT_LEAK))
    atexit(at_exit);
}

void mprof_dump_prefork(void) { pthread_mutex_lock(&dump_lock); }
void mprof_dump_postfork(void) { pthread_mutex_unlock(&dump_lock); }

/* In a fork child the profiler thread does not exist: the child's interval, peak and signal triggers are
 * off (its mi_prof_dump and final dump still work). */
void mprof_dump_postfork_child(void)
{
  interval_bytes = 0;
  gdump = false;
  mprof_dump_postfork();
}
