/* api.c - the mi_prof_* API, library initialisation and fork handling.
 *
 * api_lock (rank 1, the outermost lock) serialises start, stop, reset, stats and observer changes.  A
 * session is one start..stop; each start or stop publishes a new session word (sampler.c), which every
 * thread picks up within MI_PROF_RECHECK_BYTES of its own allocation.  A stop keeps what the session
 * recorded (its samples, stacks and totals: dumps, visits and stats show them, and frees of its blocks
 * still count) until the next start, or a reset while stopped, discards it (doc/design.md, "The API and
 * sessions").  Functions that change the session refuse to run inside an observer callback (EDEADLK): the
 * callback runs in the middle of a sample or free on its thread.
 */
#include "api.h"
#include "alloc.h"
#include "dump.h"
#include "internal.h"
#include "observer.h"
#include "options.h"
#include "pmem.h"
#include "record.h"
#include "sampler.h"
#include "sheap.h"
#include "stacktab.h"
#include "unwind.h"
#include "warn.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t api_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t session_id;     /* last session id published (under api_lock) */
static bool running;            /* under api_lock */
static bool kept;               /* the tables hold a session's data, running or stopped (under api_lock) */
static uint64_t running_rate;   /* under api_lock */

static bool in_callback(void) { return mprof_tls.guard != 0; }

/* The API's lock, with the guard up while it is held: a signal handler that interrupts an API call and
 * frees a sampled block has that free deferred, never taking a profiler lock this thread holds. */
static size_t api_enter(void)
{
  mprof_fork_handlers();
  size_t countdown = mprof_guard_enter();
  mprof_lock(&api_lock);
  return countdown;
}

static void api_leave(size_t countdown)
{
  mprof_unlock(&api_lock);
  mprof_guard_leave(countdown);
}

/* prime: load the unwinder first (the API's callers; the control socket's thread must not allocate, and
 * its unwinder was primed at load). */
static bool start(size_t sample_rate, uint64_t seed, bool prime, mprof_discarded_t *gone)
{
  if (mprof_frozen) return mprof_fail(ENOTRECOVERABLE);   /* a fork child whose tables may be half-done */
  uint64_t rate = sample_rate != 0 ? sample_rate : mprof_option(MPROF_OPT_SAMPLE_RATE);
  if (rate < 1 || rate > ((uint64_t)1 << 40)) return mprof_fail(EINVAL);
  size_t countdown;
  if (prime) {
    countdown = mprof_guard_enter();             /* what loading the unwinder allocates is not sampled */
    mprof_unwind_prime();                        /* may take the loader locks: before api_lock */
    mprof_guard_leave(countdown);
  }
  countdown = api_enter();
  if (running) {
    api_leave(countdown);
    return mprof_fail(EALREADY);
  }
  if (!mprof_sheap_init()) {
    mprof_drop(MI_PROF_DROP_NO_ARENA);
    api_leave(countdown);
    return mprof_fail(ENOMEM);
  }
  mprof_pmem_begin();
  session_id++;
  mprof_sampler_session_begin();
  mprof_record_begin((session_id << 1) | 1, gone);   /* what a stopped session kept goes: fresh counters
                                                      * and stacks, this session only */
  mprof_drops_reset();
  mprof_sampler_reset_calls();
  mprof_dump_session_begin(rate);
  running = kept = true;
  running_rate = rate;
  mprof_session_publish(session_id, true, rate, seed);
  api_leave(0);                   /* countdown 0: the caller samples from its next allocation */
  return true;
}

bool mi_prof_start(size_t sample_rate)
{
  mprof_discarded_t gone;
  return in_callback() ? mprof_fail(EDEADLK) : start(sample_rate, mprof_option(MPROF_OPT_SEED), true, &gone);
}

bool mi_prof_start_seeded(size_t sample_rate, uint64_t seed)
{
  mprof_discarded_t gone;
  return in_callback() ? mprof_fail(EDEADLK) : start(sample_rate, seed, true, &gone);
}

static bool stop(void)
{
  size_t countdown = api_enter();
  if (!running) {
    api_leave(countdown);
    return mprof_fail(EALREADY);
  }
  session_id++;
  running = false;
  mprof_session_publish(session_id, false, 0, 0);
  mprof_record_end();                            /* no sample from now on; what was recorded stays */
  mprof_unwind_release();                        /* the unwinder's tables (no loader lock, no wait) */
  mprof_dump_session_end();
  mprof_sheap_purge_all();                       /* nothing reuses a free slot until the next start */
  api_leave(countdown);
  return true;
}

bool mi_prof_stop(void) { return in_callback() ? mprof_fail(EDEADLK) : stop(); }

MPROF_LOAD_TEXT bool mi_prof_is_enabled(void)
{
  return (__atomic_load_n(&mprof_session.word, __ATOMIC_ACQUIRE) & 1) != 0;
}

bool mi_prof_available(void) { return true; }

int mi_prof_version(void) { return MI_PROF_VERSION; }

/* Running: the allocated totals and the peak start over (*gone: what they were).  Stopped: what the
 * session kept goes, as a start would discard it (*gone). */
static bool reset(mprof_discarded_t *gone)
{
  size_t countdown = api_enter();
  bool ok = kept;
  memset(gone, 0, sizeof *gone);
  if (running) {
    mprof_totals_t t;
    mprof_record_totals(&t);
    gone->samples = t.samples;
    gone->alloc_bytes = t.alloc_bytes;
    gone->peak_bytes = t.peak_bytes;
    mprof_record_reset_alloc();
  } else if (kept) {
    mprof_record_discard(gone);
    mprof_dump_session_discard();
    kept = false;
  }
  if (ok) {
    mprof_drops_reset();
    mprof_sampler_reset_calls();
    mprof_dump_session_reset();
    mprof_sheap_purge_all();
  }
  api_leave(countdown);
  return ok ? true : mprof_fail(EALREADY);
}

bool mi_prof_reset(void)
{
  mprof_discarded_t gone;
  return in_callback() ? mprof_fail(EDEADLK) : reset(&gone);
}

/* The control socket's start, stop and reset (control.c), on the profiler thread.  That thread's guard is
 * always up, yet it is no observer callback; and it must never allocate, so start loads nothing: the
 * unwinder was primed at load when the socket was enabled (profiler.c). */
bool mprof_api_control_start(size_t sample_rate, mprof_discarded_t *gone)
{
  return start(sample_rate, mprof_option(MPROF_OPT_SEED), false, gone);
}

bool mprof_api_control_stop(void) { return stop(); }

bool mprof_api_control_reset(mprof_discarded_t *gone) { return reset(gone); }

static uint64_t fx_to_objects(uint64_t fx) { return (fx + MPROF_FX_ONE / 2) / MPROF_FX_ONE; }

bool mi_prof_stats(mi_prof_stats_t *stats, size_t size)
{
  if (stats == NULL || (size != sizeof(mi_prof_stats_t) && size != MI_PROF_STATS_SIZE_V2 &&
                        size != MI_PROF_STATS_SIZE_V1))
    return mprof_fail(EINVAL);
  mprof_totals_t t;
  mi_prof_stats_t st;
  memset(&st, 0, sizeof st);
  mprof_sheap_usage_t heap = {0};
  size_t countdown = api_enter();
  mprof_record_totals(&t);
  st.sample_rate = running ? running_rate : 0;
  if (mprof_sheap_init_done()) mprof_sheap_usage(&heap);
  api_leave(countdown);
  st.samples = t.samples;
  st.live_samples = t.live;
  st.inuse_objects = fx_to_objects(t.inuse_obj_fx);
  st.inuse_bytes = t.inuse_bytes;
  st.alloc_objects = fx_to_objects(t.alloc_obj_fx);
  st.alloc_bytes = t.alloc_bytes;
  mprof_drops_read(st.dropped);
  st.untracked_frees = t.untracked_frees;
  st.profiler_bytes = mprof_pmem_mapped();
  st.profiler_bytes_max = mprof_option(MPROF_OPT_MAX_BYTES);
  st.arena_bytes = heap.mapped_bytes;
  st.arena_limit_bytes = heap.limit_bytes;
  st.arena_resident_bytes = heap.resident_bytes;
  st.sampled_bytes = heap.live_bytes;
  st.slow_path_calls = mprof_sampler_slow_path_calls();
  st.peak_inuse_objects = fx_to_objects(t.peak_obj_fx);
  st.peak_inuse_bytes = t.peak_bytes;
  st.peak_time_ns = t.peak_ns;
  memcpy(stats, &st, size);          /* a 0.1 or 0.2 caller gets the fields it knows */
  return true;
}

bool mi_prof_debug_stats(size_t *live_records, size_t *live_bytes)
{
  mprof_totals_t t;
  size_t countdown = mprof_guard_enter();
  mprof_record_totals(&t);
  mprof_guard_leave(countdown);
  if (live_records != NULL) *live_records = (size_t)t.live;
  if (live_bytes != NULL) *live_bytes = (size_t)t.live_req_bytes;
  return true;
}

bool mi_prof_set_observer(mi_prof_sample_fn *on_sample, mi_prof_free_fn *on_free, void *arg)
{
  if (in_callback()) return mprof_fail(EDEADLK);
  mprof_observer_t obs = {on_sample, on_free, arg};
  size_t countdown = api_enter();
  mprof_observer_set(&obs);
  api_leave(countdown);
  return true;
}

/* ---------------------------------------------------------------------------------------------------
   fork: the prepare handler takes ranks 1..4 (api_lock to the stack shards) in order, so the child starts
   with none held and with consistent tables; the child keeps sampling (the sampled-block heap needs no
   thread of its own to be used, only sheap_lock).  It does not wait for a dump being written (dump_lock):
   the writer may be blocked on a reader that is the forking thread, or on I/O; dump.c re-initialises its
   state in the child instead.
--------------------------------------------------------------------------------------------------- */

/* A signal handler may fork while its thread holds one of the profiler's locks (a sample, a free of a
 * sampled block): then the fork handlers take none (taking that one again would hang the thread), and
 * the child, which may have inherited tables that another thread was changing, gets fresh locks and stops
 * sampling for good (frees of sampled blocks leak there).  Per thread: postfork runs where prefork did. */
static __thread bool fork_with_locks;
/* The guard is up from prepare to parent/child: a signal handler that runs while fork(2) holds every
 * profiler lock on this thread (the kernel restarts fork after it) allocates unsampled and defers its
 * frees of sampled blocks, instead of asking for a lock its own thread holds. */
static __thread size_t fork_countdown;

static void prefork(void)
{
  fork_countdown = mprof_guard_enter();
  mprof_sampler_prefork();
  mprof_unwind_prefork();              /* never waits (see unwind.c) */
  fork_with_locks = mprof_tls.locks != 0;
  if (fork_with_locks) return;
  mprof_lock(&api_lock);
  mprof_sheap_prefork();
  mprof_record_lock_all();
  mprof_stacks_prefork();
}

static void postfork_parent(void)
{
  if (!fork_with_locks) {
    mprof_stacks_postfork();
    mprof_record_unlock_all();
    mprof_sheap_postfork();
    mprof_unlock(&api_lock);
  }
  mprof_guard_leave(fork_countdown);
}

static void postfork_child(void)
{
  mprof_stacks_postfork_child();
  if (mprof_sampler_postfork_child()) fork_countdown = 0;   /* the next allocation draws afresh */
  if (fork_with_locks) {
    pthread_mutex_init(&api_lock, NULL);
    mprof_sheap_postfork_reinit();
    mprof_record_postfork_reinit();
    mprof_stacks_postfork_reinit();
    __atomic_store_n(&mprof_frozen, true, __ATOMIC_RELAXED);
    running = false;
    mprof_session_publish(++session_id, false, 0, 0);
  } else {
    mprof_stacks_postfork();
    mprof_record_unlock_all();
    mprof_sheap_postfork();
    mprof_unlock(&api_lock);
  }
  mprof_unwind_postfork_child();
  mprof_dump_postfork_child();
  mprof_guard_leave(fork_countdown);
}

/* The handlers are registered by the first call that can take a profiler lock or start a session: a
 * process that never profiles takes no lock of ours and has no state a fork child must reset, and glibc's
 * first registration reads a page of its read-only data, which maps a whole folio (about 50 KiB resident
 * in /bin/true).  Registering before the lock is taken keeps fork safe: fork runs the handlers under
 * glibc's atfork lock, which the registration takes too, so a fork either sees them or precedes the
 * lock. */
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void register_fork_handlers(void) { pthread_atfork(prefork, postfork_parent, postfork_child); }

void mprof_fork_handlers(void) { pthread_once(&fork_once, register_fork_handlers); }

/* At exit, with sampling on: does malloc reach this library at all?  Asked only when no countdown ever
 * ran out (every thread's first allocation while running does that): one malloc(1) through the symbol
 * the program would call, watched on this thread's countdown.  Not ours in this process (valgrind's
 * memcheck, a static malloc, a library that binds its own) is said once: the profile would otherwise look
 * like an idle program's.  A program that merely allocated nothing gets no warning. */
MPROF_COLD MPROF_LOAD_TEXT static void check_interposed(void)
{
  if (!mi_prof_is_enabled() || mprof_sampler_slow_path_calls() != 0) return;
  void *(*program_malloc)(size_t) = (void *(*)(size_t))dlsym(RTLD_DEFAULT, "malloc");
  if (program_malloc == NULL) return;
  size_t before = __atomic_load_n(&mprof_tls.countdown, __ATOMIC_RELAXED);
  void *p = program_malloc(1);
  bool reached = __atomic_load_n(&mprof_tls.countdown, __ATOMIC_RELAXED) != before ||
                 mprof_sampler_slow_path_calls() != 0;
  free(p);
  if (!reached)
    mprof_warn("sampling was on, but no allocation reached this library (is malloc replaced, e.g. by "
               "valgrind's memcheck?): the profile is empty");
}

/* Runs when the library is loaded (after mimalloc's own initialisation: it is our dependency). */
__attribute__((constructor)) MPROF_COLD MPROF_LOAD_TEXT static void mprof_init(void)
{
  mprof_options_init();
  mprof_lifetimes = mprof_option(MPROF_OPT_LIFETIMES) != 0;
  mprof_unwind_init();
  mprof_dump_init();
  if (mprof_options_given()) mprof_fork_handlers();   /* a session, a thread or an exit dump may follow */
  atexit(check_interposed);
  if (mprof_option(MPROF_OPT_PROF) && !mi_prof_start(0) && errno != ENOMEM)   /* ENOMEM: said already */
    mprof_warn("MIMALLOC_PROF=1 but profiling could not start (errno %d)", errno);
}
