/* profiler.c - the profiler thread and the triggers that wake it.
 *
 * Triggers (MIMALLOC_PROF_*): INTERVAL (about every N estimated allocated bytes), GDUMP (at each new peak
 * of estimated in-use bytes, growing by at least a tenth each time), SIGNAL (a profile per signal) and
 * FINAL_SIGNALS (the final profile and leak report on a termination signal, then the signal's own
 * disposition).  None of them writes anything itself: the thread that trips a trigger may be inside
 * malloc holding the application's locks, or in a signal handler.  A trigger counts a request of its kind
 * and posts a semaphore (an atomic add and sem_post(3): async-signal-safe), and the profiler thread
 * writes (dump.c).  No file descriptor is involved: a program that closes every descriptor and reuses
 * the numbers (daemons do) cannot cross wires with the profiler.  With the control socket on, a trigger
 * also wakes the thread through the socket's wake pair, after checking that its descriptor is still ours
 * (control.c).
 *
 * PERIOD (a profile every N seconds) is a deadline on CLOCK_MONOTONIC, and CONTROL (control.c) adds the
 * socket: the thread waits in sem_clockwait(3) until the next deadline, or, with the socket on, in
 * poll(2) on the socket's descriptors until the earlier of that deadline and the connections' own.
 *
 * The thread exists only when one of these is configured: it is created at load, with every signal
 * blocked, never exits, runs with the reentrancy guard up (nothing it does is sampled) and never calls
 * malloc (its dumps use profiler memory only; tests/nomalloc_shim.c proves it).  So the control socket's
 * start cannot load the unwinder there (dlopen allocates): with the socket on, the unwinder is primed at
 * load instead, by the loading thread, once the profiler thread exists.  A program without these options
 * stays single-threaded.  Its loop is general: a request kind is a counter and a function, served in kind
 * order, so interval and peak dumps requested before a signal are written before the signal's.
 *
 * A fork child has no profiler thread: its interval and peak triggers are off, it has no periodic profiles
 * and no control socket, and the signals whose handler is still ours get their earlier disposition back.
 */
#include "profiler.h"
#include "control.h"
#include "dump.h"
#include "internal.h"
#include "lazyload.h"
#include "options.h"
#include "peak.h"
#include "sheap.h"
#include "unwind.h"
#include "warn.h"

#include <errno.h>
#include <semaphore.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

enum { REQ_INTERVAL, REQ_PEAK, REQ_SIGNAL, REQ_FINAL, REQ_KINDS };

static sem_t requests;                       /* posted once per request */
static unsigned pending[REQ_KINDS];          /* requests not served yet, by kind (atomic) */
static bool running;                         /* the thread exists (false in a fork child) */
static uint64_t period_ns MPROF_LOAD_DATA;   /* MIMALLOC_PROF_PERIOD, 0 = off */

/* Interval and peak triggers: peak.c watches the estimated totals against them (mprof_peak_configure). */
static uint64_t interval_bytes MPROF_LOAD_DATA;   /* MIMALLOC_PROF_INTERVAL, 0 = off */
static bool gdump MPROF_LOAD_DATA;

/* Signals: MIMALLOC_PROF_SIGNAL's and MIMALLOC_PROF_FINAL_SIGNALS', with the dispositions ours replaced. */
static int dump_signal MPROF_LOAD_DATA;
static uint64_t final_signals;               /* bit sig - 1: our final handler was installed for sig */
static struct sigaction old_action[65];      /* by signal number, written before our handler goes in */
static uint64_t final_reraise;               /* bit sig - 1: re-raise sig after the final dump (atomic) */

/* Async-signal-safe: an atomic increment, sem_post(3), and with the control socket on its wake (fstat,
 * send). */
static void request(int kind)
{
  int saved = errno;
  __atomic_add_fetch(&pending[kind], 1, __ATOMIC_RELEASE);
  sem_post(&requests);
  mprof_control_wake();
  errno = saved;
}

/* A free slot of the sampled-block heap will be due for giving back (sheap.c): where this thread runs, it
 * gives it back on time, whatever the program does meanwhile.  Async-signal-safe, as request(). */
MPROF_SESSION_TEXT void mprof_profiler_purge_wake(void)
{
  if (!__atomic_load_n(&running, __ATOMIC_RELAXED)) return;
  int saved = errno;
  sem_post(&requests);
  mprof_control_wake();
  errno = saved;
}

/* Takes every pending request, as a set of kinds (bit k: kind k).  The thread serves one such round at a
 * time, one profile per kind, however many requests of that kind came while the last round was written:
 * a program that crosses MIMALLOC_PROF_INTERVAL faster than profiles are written gets one interval
 * profile per round, not a backlog, and a signal or a final signal waits for one round at most (served
 * one by one, a small interval's requests would keep a SIGTERM waiting for as long as the program
 * allocates). */
static unsigned take_requests(void)
{
  unsigned kinds = 0;
  for (int k = 0; k < REQ_KINDS; k++)
    if (__atomic_exchange_n(&pending[k], 0, __ATOMIC_ACQ_REL) != 0) kinds |= 1u << k;
  return kinds;
}

/* ---------------------------------------------------------------------------------------------------
   Signals
--------------------------------------------------------------------------------------------------- */

static void on_dump_signal(int sig)
{
  (void)sig;
  request(REQ_SIGNAL);
}

static bool handler_is(const struct sigaction *sa, void (*fn)(int, siginfo_t *, void *))
{
  return (sa->sa_flags & SA_SIGINFO) != 0 && sa->sa_sigaction == fn;
}

/* A final signal.  Async-signal-safe: sigaction, atomics, sem_post.  The first asks for the final
 * profile, to be followed by the signal's earlier disposition (re-raised after the dump).  A second
 * while that profile is written is held until it is done: the same signal often arrives twice, once
 * sent to the process group (a terminal, timeout(1), a supervisor) and once forwarded by a wrapper such
 * as `mimalloc-prof run`, and it must not cut the profile off.  A third acts at once (the earlier
 * disposition is put back and the signal raised again): someone insists.  If the program installed its
 * own handler later and calls ours from it, the program's handler stays and decides what the signal
 * does: we only write the profile. */
static unsigned final_count;                   /* final signals to our own handler (atomic) */

static void on_final_signal(int sig, siginfo_t *info, void *context)
{
  (void)info, (void)context;
  int saved = errno;
  struct sigaction now;
  if (sigaction(sig, NULL, &now) == 0 && handler_is(&now, on_final_signal)) {
    unsigned n = __atomic_add_fetch(&final_count, 1, __ATOMIC_RELAXED);
    __atomic_or_fetch(&final_reraise, (uint64_t)1 << (sig - 1), __ATOMIC_RELAXED);
    if (n >= 3) {                               /* insisted: as without the library, now */
      sigaction(sig, &old_action[sig], NULL);
      kill(getpid(), sig);                      /* delivered when this handler returns */
      errno = saved;
      return;
    }
    if (n > 1) {                                /* the profile is being written: it ends after */
      errno = saved;
      return;
    }
  }
  request(REQ_FINAL);
  errno = saved;
}

/* Installs fn (a plain handler for the dump signal, a siginfo one for the final signals) unless the
 * signal is ignored, which it stays.  False when the signal cannot be caught. */
static bool catch(int sig, void (*plain)(int), void (*info)(int, siginfo_t *, void *))
{
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  if (info != NULL) {
    sa.sa_flags |= SA_SIGINFO;
    sa.sa_sigaction = info;
  } else {
    sa.sa_handler = plain;
  }
  if (sigaction(sig, NULL, &old_action[sig]) != 0) return false;
  if (info != NULL && old_action[sig].sa_handler == SIG_IGN) return true;   /* ignored: nothing ends */
  return sigaction(sig, &sa, NULL) == 0;
}

/* Puts the earlier disposition back where our handler is still installed (a fork child;
 * async-signal-safe). */
static void uncatch(int sig)
{
  struct sigaction now;
  if (sigaction(sig, NULL, &now) != 0) return;
  bool ours = sig == dump_signal ? !(now.sa_flags & SA_SIGINFO) && now.sa_handler == on_dump_signal
                                 : handler_is(&now, on_final_signal);
  if (ours) sigaction(sig, &old_action[sig], NULL);
}

/* The signals that came to our own final handler go again, now to their earlier disposition
 * (process-directed: with the default action the process ends).  Each is re-raised once, by the profiler
 * thread after the final profile or by the exit handler, whichever comes first. */
bool mprof_profiler_reraise(void)
{
  uint64_t again = __atomic_exchange_n(&final_reraise, 0, __ATOMIC_ACQ_REL);
  bool ending = false;
  for (int sig = 1; sig <= 64; sig++) {
    if (!(again & ((uint64_t)1 << (sig - 1)))) continue;
    uncatch(sig);                               /* the earlier disposition, where ours still is */
    struct sigaction now;
    if (sigaction(sig, NULL, &now) == 0 && !(now.sa_flags & SA_SIGINFO) && now.sa_handler == SIG_DFL &&
        sig != SIGCHLD && sig != SIGCONT && sig != SIGURG && sig != SIGWINCH && sig != SIGTSTP &&
        sig != SIGTTIN && sig != SIGTTOU)
      ending = true;                            /* its default action ends the process */
    kill(getpid(), sig);
  }
  return ending;
}

bool mprof_profiler_final_pending(void) { return __atomic_load_n(&final_reraise, __ATOMIC_ACQUIRE) != 0; }

/* The final profile, then the signal again.  When that ends the process (the default action), this
 * thread writes nothing more: the signal reaches the program's threads a moment later, and a profile begun
 * meanwhile was cut off, its temporary file left beside the final one (arm64 under qemu-user). */
static void serve_final(void)
{
  mprof_dump_final();
  if (mprof_profiler_reraise())
    for (;;) pause();                           /* every signal is blocked here: until the process ends */
}

/* ---------------------------------------------------------------------------------------------------
   The thread
--------------------------------------------------------------------------------------------------- */

static void serve(int kind)
{
  switch (kind) {
  case REQ_INTERVAL: mprof_dump_auto('i'); break;
  case REQ_PEAK: mprof_dump_auto('u'); break;
  case REQ_SIGNAL: mprof_dump_auto('s'); break;
  case REQ_FINAL: serve_final(); break;
  default: break;
  }
}

static uint64_t mono_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Until a request is posted or CLOCK_MONOTONIC reaches `until` (UINT64_MAX: no deadline). */
static void wait_requests(uint64_t until)
{
  if (until == UINT64_MAX) {
    while (sem_wait(&requests) != 0 && errno == EINTR) {
    }
    return;
  }
  struct timespec ts = {.tv_sec = (time_t)(until / 1000000000u), .tv_nsec = (long)(until % 1000000000u)};
  while (sem_clockwait(&requests, CLOCK_MONOTONIC, &ts) != 0 && errno == EINTR) {
  }
}

#define PURGE_MARGIN_NS ((uint64_t)5 * 1000000)

static void *profiler_main(void *arg)
{
  (void)arg;
  mprof_tls.guard = 1;                       /* nothing this thread does is ever sampled */
  prctl(PR_SET_NAME, "mimalloc-prof", 0, 0, 0);
  uint64_t next_period = period_ns != 0 ? mono_ns() + period_ns : UINT64_MAX;
  for (;;) {
    /* The sampled-block heap's purge, when one is due: its clock is the coarse one, a tick (4 ms at most)
     * behind, hence the margin. */
    uint64_t purge = mprof_sheap_purge_due(), wake = next_period;
    if (purge != 0 && purge + PURGE_MARGIN_NS < wake) wake = purge + PURGE_MARGIN_NS;
    if (mprof_control_active()) mprof_control_wait(wake);   /* woken through the wake pair */
    else wait_requests(wake);
    if (purge != 0 && mono_ns() >= purge) mprof_sheap_purge_tick();
    while (sem_trywait(&requests) == 0) {    /* posts whose requests this round takes too */
    }
    for (unsigned kinds; (kinds = take_requests()) != 0;) {
      if (kinds & (1u << REQ_FINAL)) serve(REQ_FINAL);   /* first: it usually ends the process */
      for (int k = 0; k < REQ_FINAL; k++)                /* in kind order: a signal dump comes after the */
        if (kinds & (1u << k)) serve(k);                 /* interval and peak requests before it */
    }
    uint64_t now = mono_ns();
    if (now >= next_period) {
      if (mi_prof_is_enabled()) mprof_dump_auto('p');
      next_period += period_ns;
      now = mono_ns();
      if (next_period <= now) next_period = now + period_ns;   /* fell behind (a long dump, a stopped
                                                                * process): the missed ones are skipped */
    }
  }
  return NULL;
}

static bool start_thread(void)
{
  sigset_t all, old;
  pthread_attr_t attr;
  pthread_t thread;
  sigfillset(&all);
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, (size_t)256 << 10);
  pthread_sigmask(SIG_SETMASK, &all, &old);        /* the thread inherits a fully blocked mask */
  int rc = pthread_create(&thread, &attr, profiler_main, NULL);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&attr);
  if (rc == 0) pthread_setname_np(thread, "mimalloc-prof");   /* named before anyone looks (ps, tests) */
  if (rc != 0) mprof_warn("cannot start the profiler thread: %s; interval, peak and signal profiles are off",
                          strerrorname_np(rc));
  return rc == 0;
}

/* At load: the triggers the options ask for, and the thread if one needs it. */
MPROF_COLD MPROF_LOAD_TEXT bool mprof_profiler_init(void)
{
  interval_bytes = mprof_option(MPROF_OPT_INTERVAL);
  gdump = mprof_option(MPROF_OPT_GDUMP) != 0;
  dump_signal = (int)mprof_option(MPROF_OPT_SIGNAL);
  uint64_t finals = mprof_option(MPROF_OPT_FINAL_SIGNALS);
  if (dump_signal != 0 && (finals & ((uint64_t)1 << (dump_signal - 1)))) {
    mprof_warn("MIMALLOC_PROF_FINAL_SIGNALS: signal %d is MIMALLOC_PROF_SIGNAL's; it keeps writing a profile "
               "per signal", dump_signal);
    finals &= ~((uint64_t)1 << (dump_signal - 1));
  }
  period_ns = mprof_option(MPROF_OPT_PERIOD) * 1000000000u;
  bool control = mprof_control_init();
  if (interval_bytes == 0 && !gdump && dump_signal == 0 && finals == 0 && period_ns == 0 && !control)
    return false;
  if (sem_init(&requests, 0, 0) != 0 || !start_thread()) {
    if (control) mprof_control_shutdown();   /* nobody serves it: closed (the file goes at exit) */
    interval_bytes = 0;
    gdump = false;
    return false;
  }
  running = true;
  /* The socket's start may not load the unwinder on the thread: it is loaded now, once the thread exists,
   * as mi_prof_start would load it in a program whose threads run (libgcc too: fork children and new
   * threads' first samples use it).  A start that comes before this is done drops its first samples.
   * Nor may the thread load what its profiles need (zlib, protobuf-c): they too are loaded now. */
  size_t countdown = mprof_guard_enter();
  mprof_lazy_load(MPROF_LAZY_PPROF);
  if (control && mprof_unwind_current() != MPROF_UNWIND_FP) mprof_unwind_prime();
  mprof_guard_leave(countdown);
  if (dump_signal != 0 && !catch(dump_signal, on_dump_signal, NULL))
    mprof_warn("cannot catch signal %d: %s", dump_signal, strerrorname_np(errno));
  for (int sig = 1; sig <= 64; sig++) {
    if (!(finals & ((uint64_t)1 << (sig - 1)))) continue;
    if (catch(sig, NULL, on_final_signal)) final_signals |= (uint64_t)1 << (sig - 1);
    else mprof_warn("cannot catch signal %d: %s (MIMALLOC_PROF_FINAL_SIGNALS)", sig, strerrorname_np(errno));
  }
  return true;
}

/* A new session (sampling at `rate` bytes): the interval and peak triggers start over (peak.c watches the
 * totals; a peak profile waits for at least ten sample periods of growth). */
MPROF_SESSION_TEXT void mprof_profiler_session_begin(uint64_t rate)
{
  mprof_peak_configure(rate, interval_bytes, gdump ? 10 * rate : 0);
}

/* peak.c: the allocated estimate passed the interval, or a new peak the last peak profile's by a tenth.
 * Async-signal-safe (request). */
void mprof_profiler_trigger(unsigned triggers)
{
  if (triggers & MPROF_TRIGGER_INTERVAL) request(REQ_INTERVAL);
  if (triggers & MPROF_TRIGGER_PEAK) request(REQ_PEAK);
}

/* In a fork child the thread does not exist: triggers off, our handlers replaced by what they replaced
 * (async-signal-safe: assignments and sigaction). */
void mprof_profiler_postfork_child(void)
{
  if (!running) return;
  running = false;
  interval_bytes = 0;
  gdump = false;
  mprof_peak_configure(mprof_session.rate, 0, 0);
  period_ns = 0;
  mprof_control_shutdown();
  if (dump_signal != 0) uncatch(dump_signal);
  for (int sig = 1; sig <= 64; sig++)
    if (final_signals & ((uint64_t)1 << (sig - 1))) uncatch(sig);
}
