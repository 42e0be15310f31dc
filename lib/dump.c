/* dump.c - heap profile dumps: the API, automatic dumps and their file names, the final profile and the
 * leak report.
 *
 * Files are <MIMALLOC_PROF_PREFIX>.<pid>.<seq>.<kind>.pb.gz, <seq> zero-padded to six digits (listed by
 * name, they come in the order written), with kind m (mi_prof_dump), f (final: at exit,
 * or on a MIMALLOC_PROF_FINAL_SIGNALS signal), i (interval), u (new peak), s (MIMALLOC_PROF_SIGNAL), p
 * (periodic, MIMALLOC_PROF_PERIOD).  The triggers and the thread that writes i, u, s, p and the signals' f
 * profiles are profiler.c's; MIMALLOC_PROF_KEEP's retention of p, i and u files is retain.c's.
 *
 * A dump runs in two steps.  First, holding no profiler lock, it copies the loaded objects (objects.c):
 * that takes the dynamic loader's locks, which rank before every profiler lock (internal.h), because a
 * thread inside dlopen() holds them while constructors run, and a constructor may call mi_prof_dump,
 * fork, or malloc.  Then, under dump_lock, it opens the file, takes the snapshot (the record locks,
 * briefly), writes (pprof.c: names come from the copy, read without the loader's locks) and closes.  So
 * the holder of dump_lock never waits for a loader lock.  dump_lock serialises dumps (one dump's memory
 * is what pmem.c keeps free) and lets exit wait for an automatic dump in progress.
 *
 * Every file is made by fsout.c: automatic dumps under an unpredictable temporary name in the prefix's
 * directory, renamed when complete to the next name that is free (nothing is ever replaced); at exit the
 * library takes dump_lock (waiting for a dump being written) and starts no more i, u or s dumps, so no
 * dump is ever cut off by exit.  fork does not wait for dump_lock (api.c): a writer may be blocked on a
 * pipe the forking thread reads; in the child, where no dump is running, this file's state is
 * re-initialised instead.
 */
#include "api.h"
#include "dump.h"
#include "fsout.h"
#include "internal.h"
#include "lazyload.h"
#include "objects.h"
#include "options.h"
#include "pmem.h"
#include "pprof.h"
#include "profiler.h"
#include "snapshot.h"
#include "warn.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t dump_lock = PTHREAD_MUTEX_INITIALIZER;
static bool exiting;                        /* exit began: no more i, u, s dumps (dump_lock) */
static bool final_done;                     /* the final profile and leak report are written (dump_lock) */
static uint64_t dump_seq;                   /* files named so far (atomic) */
static uint64_t session_start_mono;         /* CLOCK_MONOTONIC at the session's start or reset (atomic) */
static uint64_t session_rate;               /* of the session whose data the tables hold, running or
                                             * stopped; 0: none (atomic) */
static uint64_t session_end_mono, session_end_real;   /* when it stopped (CLOCK_MONOTONIC, CLOCK_REALTIME);
                                                       * 0 while it runs (atomic) */
static uint64_t periodic_mono;              /* CLOCK_MONOTONIC of the last periodic profile (dump_lock) */
static int write_failure_said, leak_failure_said;

static uint64_t clock_ns(clockid_t clock)
{
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The variable to look at when a dump fails with err. */
static const char *failure_option(int err)
{
  return err == ENOMEM ? "MIMALLOC_PROF_MAX_BYTES" : "MIMALLOC_PROF_PREFIX";
}

/* ---------------------------------------------------------------------------------------------------
   Writing a profile
--------------------------------------------------------------------------------------------------- */

/* Whether the tables hold a session's data (it runs, or it stopped and nothing discarded it since). */
static bool session_kept(void) { return __atomic_load_n(&session_rate, __ATOMIC_RELAXED) != 0; }

/* Snapshot and write (dump_lock held).  duration_nanos is the time since the session's start or reset
 * (up to its stop when it stopped); for a periodic profile (kind p), since the previous periodic profile
 * if that came later. */
static bool write_locked(int fd, const mprof_objects_t *objs, char kind)
{
  mprof_snapshot_t snap;
  if (!mprof_snapshot_take(&snap, mprof_option(MPROF_OPT_ACCUM) != 0, true)) return false;
  uint64_t now = clock_ns(CLOCK_REALTIME), mono = clock_ns(CLOCK_MONOTONIC);
  mi_prof_stats_t st;
  mi_prof_stats(&st, sizeof st);
  uint64_t start = __atomic_load_n(&session_start_mono, __ATOMIC_RELAXED);
  uint64_t rate = __atomic_load_n(&session_rate, __ATOMIC_RELAXED);
  uint64_t end = __atomic_load_n(&session_end_mono, __ATOMIC_RELAXED);
  if (kind == 'p') {
    if (periodic_mono > start) start = periodic_mono;
    periodic_mono = mono;
  }
  if (end == 0) end = mono;
  mprof_pprof_meta_t meta = {
    .sample_rate = rate != 0 ? rate : mprof_option(MPROF_OPT_SAMPLE_RATE),
    .time_ns = now,
    .duration_ns = rate != 0 && end > start ? end - start : 0,   /* no session: 0 */
    .stopped_ns = rate != 0 ? __atomic_load_n(&session_end_real, __ATOMIC_RELAXED) : 0,
    .totals = &snap.totals,
  };
  memcpy(meta.dropped, st.dropped, sizeof meta.dropped);
  bool ok = mprof_pprof_write(fd, &snap, objs, &meta);
  int err = errno;
  mprof_snapshot_release(&snap);
  errno = err;
  return ok;
}

/* Writes the profile to o->fd and closes it (dump_lock held). */
static bool write_file_locked(mprof_fsout_t *o, const mprof_objects_t *objs, char kind)
{
  bool ok = write_locked(o->fd, objs, kind);
  int err = errno;
  if (mprof_fsout_close(o) != 0 && ok) {
    ok = false;
    err = errno;
  }
  errno = err;
  return ok;
}

/* mi_prof_dump(path) (dump_lock held): the file the program named, in place when it exists, else made
 * beside it and renamed to it (fsout.c).  What a failed dump made is removed; an existing file never is. */
static bool write_path_locked(const char *path, const mprof_objects_t *objs)
{
  const char *base = strrchr(path, '/');
  mprof_fsout_t o;
  if (!mprof_fsout_open_path(&o, path)) return false;
  bool ok = write_file_locked(&o, objs, 'm') &&
            mprof_fsout_publish(&o, base != NULL ? base + 1 : path, true) == 0;
  mprof_fsout_end(&o);
  return ok;
}

/* SIGPIPE blocked on this thread for a dump, so that a reader that went away gives EPIPE rather than the
 * signal's default action (the end of the program); a SIGPIPE our write raised is taken back, one that
 * was pending before is left.  Cancellation is off too: open, write and close are cancellation points,
 * and a thread cancelled there left dump_lock held, so every later dump and exit with
 * MIMALLOC_PROF_FINAL hung (adversarial run). */
typedef struct dump_shield_s {
  sigset_t mask;
  bool pipe_pending;
  int cancel_state;
} dump_shield_t;

static void shield_up(dump_shield_t *sh)
{
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &sh->cancel_state);
  sigset_t pipe, pending;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, &sh->mask);
  sh->pipe_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
}

static void shield_down(dump_shield_t *sh)
{
  int err = errno;
  if (!sh->pipe_pending && !sigismember(&sh->mask, SIGPIPE)) {
    sigset_t pipe, pending;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    const struct timespec now = {0, 0};
    if (sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1) sigtimedwait(&pipe, NULL, &now);
  }
  pthread_sigmask(SIG_SETMASK, &sh->mask, NULL);
  int ignored;
  pthread_setcancelstate(sh->cancel_state, &ignored);
  errno = err;
}

/* The next <prefix>.<pid>.<seq>.<kind>.pb.gz: every name tried uses up a sequence number. */
static bool next_name(char kind, char *out, size_t len)
{
  uint64_t seq = __atomic_fetch_add(&dump_seq, 1, __ATOMIC_RELAXED);
  int n = snprintf(out, len, "%s.%d." MPROF_SEQ_FORMAT ".%c.pb.gz", mprof_option_str(MPROF_OPT_PREFIX),
                   (int)getpid(), (unsigned long long)seq, kind);
  if (n > 0 && (size_t)n < len) return true;
  errno = ENAMETOOLONG;
  return false;
}

/* An automatically named profile (dump_lock held): written to a temporary file in the prefix's
 * directory and renamed, without replacing anything, to the next free name: a name already there (left
 * by the program this one replaced with execve, under the same pid, or put there by anyone) is skipped,
 * never overwritten, never removed.  `name` gets the name tried last (for messages). */
static bool write_auto_locked(char kind, const mprof_objects_t *objs, char *name, size_t len)
{
  const char *prefix = mprof_option_str(MPROF_OPT_PREFIX), *slash = strrchr(prefix, '/');
  char stem[NAME_MAX + 1];
  mprof_fsout_t o;
  int n = snprintf(stem, sizeof stem, "%s.%d.%c", slash != NULL ? slash + 1 : prefix, (int)getpid(), kind);
  if (!next_name(kind, name, len)) return false;
  if (n <= 0 || (size_t)n >= sizeof stem) {
    errno = ENAMETOOLONG;
    return false;
  }
  if (!mprof_fsout_create(&o, prefix, stem)) return false;
  bool ok = write_file_locked(&o, objs, kind);
  for (int tries = 0; ok && tries < 10000; tries++) {
    const char *last = strrchr(name, '/');
    if (mprof_fsout_publish(&o, last != NULL ? last + 1 : name, false) == 0) break;
    ok = errno == EEXIST && next_name(kind, name, len);
  }
  if (ok && o.tmp[0] != '\0') {             /* every name taken */
    ok = false;
    errno = EEXIST;
  }
  if (ok && (kind == 'p' || kind == 'i' || kind == 'u')) mprof_retain(kind, o.dir);
  mprof_fsout_end(&o);
  return ok;
}

/* A dump from the API: to path; to fd when path is NULL and fd >= 0; else automatically named (kind m).
 * The objects first, holding no lock; then the rest under dump_lock.  The guard is up throughout:
 * nothing here is sampled (and nothing here allocates). */
static bool dump_api(const char *path, int fd)
{
  mprof_fork_handlers();
  char name[4096];
  dump_shield_t shield;
  shield_up(&shield);
  size_t countdown = mprof_guard_enter();
  mprof_objects_t objs;
  bool ok = mprof_lazy_load(MPROF_LAZY_PPROF) && mprof_objects_take(&objs);
  if (ok) {
    pthread_mutex_lock(&dump_lock);
    if (path != NULL) ok = write_path_locked(path, &objs);
    else if (fd >= 0) ok = write_locked(fd, &objs, 'm');
    else ok = write_auto_locked('m', &objs, name, sizeof name);
    pthread_mutex_unlock(&dump_lock);
    int err = errno;
    mprof_objects_release(&objs);
    errno = err;
  }
  mprof_guard_leave(countdown);
  shield_down(&shield);
  return ok;
}

bool mi_prof_dump_fd(int fd)
{
  if (fd < 0) {
    errno = EBADF;
    return false;
  }
  return dump_api(NULL, fd);
}

bool mi_prof_dump(const char *path)
{
  if (path == NULL && mprof_options_secure()) {   /* the working directory is the caller's, not ours */
    errno = EPERM;
    return false;
  }
  return dump_api(path, -1);
}

/* An automatic dump (dump_lock held).  objs NULL: they could not be copied (ENOMEM).  Failures are said
 * once on stderr: the program is never disturbed. */
static void auto_locked(char kind, const mprof_objects_t *objs)
{
  char name[4096];
  name[0] = '\0';
  bool ok = false;
  if (objs == NULL) errno = ENOMEM;
  else ok = write_auto_locked(kind, objs, name, sizeof name);
  int err = errno;
  if (!ok && mprof_warn_once_claim(&write_failure_said))
    mprof_warn("cannot write heap profile %s: %s (%s)",
               name[0] != '\0' ? name : mprof_option_str(MPROF_OPT_PREFIX), strerrorname_np(err),
               failure_option(err));
}

/* kind i, u, s or p: on the profiler thread. */
void mprof_dump_auto(char kind)
{
  mprof_objects_t objs;
  bool have = mprof_objects_take(&objs);
  pthread_mutex_lock(&dump_lock);
  if (!exiting) auto_locked(kind, have ? &objs : NULL);
  pthread_mutex_unlock(&dump_lock);
  if (have) mprof_objects_release(&objs);
}

/* ---------------------------------------------------------------------------------------------------
   The leak report: the top in-use sites, on stderr
--------------------------------------------------------------------------------------------------- */

#define LEAK_SITES  10
#define LEAK_FRAMES 8

static bool say(int fd, const char *text)
{
  size_t n = strlen(text);
  while (n > 0) {
    ssize_t w = write(fd, text, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    text += w;
    n -= (size_t)w;
  }
  return true;
}

/* One frame: "#i 0xpc module+0xoffset (symbol+0xoffset)", as far as the objects tell; a dropped sample's
 * frame by its synthetic name. */
static void say_frame(int fd, size_t i, uintptr_t pc, const mprof_objects_t *objs, uint64_t key,
                      uint32_t offset)
{
  char line[512], name[256];
  int n;
  if (MPROF_FRAME_IS_DROPPED(pc)) {
    n = snprintf(line, sizeof line, "    #%zu [mimalloc-prof: dropped (%s)]", i,
                 mprof_drop_name((mi_prof_drop_reason_t)(pc - 1)));
  } else {
    n = snprintf(line, sizeof line, "    #%zu 0x%lx", i, (unsigned long)pc);
    size_t seg = mprof_objects_find(objs, pc - 1);
    if (seg != 0) {
      const mprof_object_t *ob = &objs->object[objs->segment[seg - 1].object];
      const char *base = strrchr(ob->path, '/');
      n += snprintf(line + n, sizeof line - (size_t)n, " %s+0x%lx", base != NULL ? base + 1 : ob->path,
                    (unsigned long)(pc - ob->map_start));
    }
    if (key != 0 && (size_t)n < sizeof line && mprof_objects_key_name(objs, key, name, sizeof name))
      n += snprintf(line + n, sizeof line - (size_t)n, " (%s+0x%lx)", name, (unsigned long)offset);
  }
  if ((size_t)n >= sizeof line - 1) n = (int)sizeof line - 2;
  line[n++] = '\n';
  line[n] = '\0';
  say(fd, line);
}

bool mprof_dump_leak_write(int fd, const mprof_snapshot_t *snap, const mprof_objects_t *objs)
{
  size_t top[LEAK_SITES], n = 0;                  /* indices of the largest in-use stacks, descending */
  for (size_t i = 0; i < snap->n; i++) {
    uint64_t b = snap->stack[i].counts.inuse_bytes;
    if (b == 0) continue;                         /* a stack of the peak only */
    size_t at = n < LEAK_SITES ? n++ : LEAK_SITES;
    while (at > 0 && snap->stack[top[at - 1]].counts.inuse_bytes < b) {
      if (at < LEAK_SITES) top[at] = top[at - 1];
      at--;
    }
    if (at < LEAK_SITES) top[at] = i;
  }
  /* Names for the frames shown: sorted distinct pcs (insertion sort: at most 80). */
  uintptr_t pcs[LEAK_SITES * LEAK_FRAMES] = {0};
  uint64_t keys[LEAK_SITES * LEAK_FRAMES];
  uint32_t offsets[LEAK_SITES * LEAK_FRAMES];
  size_t n_pcs = 0;
  for (size_t k = 0; k < n; k++) {
    const mprof_snap_stack_t *st = &snap->stack[top[k]];
    for (size_t f = 0; f < st->depth && f < LEAK_FRAMES; f++) {
      uintptr_t pc = st->frames[f];
      size_t j = n_pcs;
      while (j > 0 && pcs[j - 1] > pc) j--;
      if (j > 0 && pcs[j - 1] == pc) continue;
      for (size_t m = n_pcs; m > j; m--) pcs[m] = pcs[m - 1];
      pcs[j] = pc;
      n_pcs++;
    }
  }
  mprof_objects_name(objs, pcs, n_pcs, keys, offsets);

  char line[256];
  snprintf(line, sizeof line, "mimalloc-prof: leak report: about %llu bytes in %llu objects still in use "
           "at exit (estimated from %llu live samples), top %zu sites:\n",
           (unsigned long long)snap->totals.inuse_bytes,
           (unsigned long long)((snap->totals.inuse_obj_fx + MPROF_FX_ONE / 2) / MPROF_FX_ONE),
           (unsigned long long)snap->totals.live, n);
  bool ok = say(fd, line);
  for (size_t k = 0; k < n && ok; k++) {
    const mprof_snap_stack_t *st = &snap->stack[top[k]];
    snprintf(line, sizeof line, "  %llu bytes in %llu objects allocated at:\n",
             (unsigned long long)st->counts.inuse_bytes, (unsigned long long)st->counts.inuse_objects);
    ok = say(fd, line);
    for (size_t f = 0; f < st->depth && f < LEAK_FRAMES; f++) {
      size_t j = 0;
      while (pcs[j] != st->frames[f]) j++;
      say_frame(fd, f, st->frames[f], objs, keys[j], offsets[j]);
    }
  }
  return ok;
}

/* ---------------------------------------------------------------------------------------------------
   The final profile and the leak report: at exit, or on a final signal (profiler.c)
--------------------------------------------------------------------------------------------------- */

/* Once per process (dump_lock held); objs NULL: they could not be copied. */
static void final_locked(const mprof_objects_t *objs, bool profile, bool leak)
{
  if (final_done || !session_kept()) return;
  final_done = true;
  if (profile) auto_locked('f', objs);
  if (!leak) return;
  mprof_snapshot_t snap;
  if (objs == NULL || !mprof_snapshot_take(&snap, false, false)) {
    if (mprof_warn_once_claim(&leak_failure_said))
      mprof_warn("cannot write the leak report: %s", objs == NULL || errno == ENOMEM
                 ? "ENOMEM (MIMALLOC_PROF_MAX_BYTES)" : strerrorname_np(errno));
    return;
  }
  mprof_dump_leak_write(2, &snap, objs);
  mprof_snapshot_release(&snap);
}

void mprof_dump_final(void)
{
  mprof_objects_t objs;
  mprof_lazy_load(MPROF_LAZY_PPROF);               /* the profile fails without it, the leak report not */
  bool have = session_kept() && mprof_objects_take(&objs);
  pthread_mutex_lock(&dump_lock);
  final_locked(have ? &objs : NULL, true, mprof_option(MPROF_OPT_LEAK) != 0);
  pthread_mutex_unlock(&dump_lock);
  if (have) mprof_objects_release(&objs);
}

/* At exit.  A final signal that arrived and is not served yet (the program was exiting anyway) gets its
 * final profile here, and is re-raised here: the process then ends as the signal says, not with exit's
 * status. */
static void at_exit(void)
{
  bool signalled = mprof_profiler_final_pending();
  bool profile = signalled || mprof_option(MPROF_OPT_FINAL) != 0, leak = mprof_option(MPROF_OPT_LEAK) != 0;
  size_t countdown = mprof_guard_enter();         /* nothing done here is sampled */
  mprof_objects_t objs;
  if (profile) mprof_lazy_load(MPROF_LAZY_PPROF);  /* the profile fails without it, the leak report not */
  bool have = (profile || leak) && session_kept() && mprof_objects_take(&objs);
  /* Waits for an automatic dump being written and stops any later one: exit must not cut a file off. */
  pthread_mutex_lock(&dump_lock);
  exiting = true;
  if (profile || leak) final_locked(have ? &objs : NULL, profile, leak);
  pthread_mutex_unlock(&dump_lock);
  if (have) mprof_objects_release(&objs);
  mprof_guard_leave(countdown);
  mprof_profiler_reraise();
}

/* ---------------------------------------------------------------------------------------------------
   Sessions, start-up, fork
--------------------------------------------------------------------------------------------------- */

/* A new session (sampling at `rate` bytes): profiles measure their duration from now, the interval and
 * peak triggers start over. */
MPROF_SESSION_TEXT void mprof_dump_session_begin(uint64_t rate)
{
  __atomic_store_n(&session_start_mono, clock_ns(CLOCK_MONOTONIC), __ATOMIC_RELAXED);
  __atomic_store_n(&session_end_mono, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&session_end_real, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&session_rate, rate, __ATOMIC_RELAXED);
  mprof_profiler_session_begin(rate);
}

/* mi_prof_stop: profiles still show the session (its rate, its time up to now) and say it stopped. */
MPROF_SESSION_TEXT void mprof_dump_session_end(void)
{
  __atomic_store_n(&session_end_mono, clock_ns(CLOCK_MONOTONIC), __ATOMIC_RELAXED);
  __atomic_store_n(&session_end_real, clock_ns(CLOCK_REALTIME), __ATOMIC_RELAXED);
}

/* mi_prof_reset while stopped: no session's data any more (no final profile either). */
MPROF_SESSION_TEXT void mprof_dump_session_discard(void)
{
  __atomic_store_n(&session_rate, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&session_end_mono, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&session_end_real, 0, __ATOMIC_RELAXED);
}

/* mi_prof_reset: the allocated totals start over, and so does the time they cover. */
void mprof_dump_session_reset(void)
{
  __atomic_store_n(&session_start_mono, clock_ns(CLOCK_MONOTONIC), __ATOMIC_RELAXED);
}

/* At load (the constructor): the profiler thread if a trigger needs it, and the exit handler. */
MPROF_COLD MPROF_LOAD_TEXT void mprof_dump_init(void)
{
  bool thread = mprof_profiler_init();
  if (thread || mprof_option(MPROF_OPT_FINAL) || mprof_option(MPROF_OPT_LEAK)) atexit(at_exit);
}

/* In a fork child only the forking thread runs, and it is not writing a dump: dump_lock may have been
 * held by a thread that is gone.  Async-signal-safe (assignments, atomics, sigaction). */
void mprof_dump_postfork_child(void)
{
  dump_lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
  mprof_pmem_postfork_child();
  mprof_profiler_postfork_child();
}
