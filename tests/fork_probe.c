/* fork_probe.c - fork while an unwind is under way, for tests/test_unwind.c (one unwinder per run,
 * MIMALLOC_PROF_UNWIND).  Prints "key value" lines; something the test cannot see going wrong prints
 * "fork_probe: ..." on stderr and exits with status 1.
 *
 * Modes (argv[1]):
 *   forksig             fork from a signal handler that interrupted the thread's own unwind (libgcc or
 *                       libunwind); the child's samples
 *   forkinside          fork while another thread is stopped inside the unwinder; the child's samples
 *   forkstorm [N RATE]  4 threads allocate at RATE while the main thread forks N times; the samples lost
 *   forklock N          fork N times from a signal handler that interrupted the profiler itself (rate 1:
 *                       often inside its locks); each child allocates, frees, reallocs sampled blocks
 *                       of its parent (their bytes kept), starts a session and dumps (refused with
 *                       ENOTRECOVERABLE where the child froze the profiler), reads the stats and exits
 *   forkchld N          fork N children that exit at once, reaped by a SIGCHLD handler that allocates (rate
 *                       1: every allocation sampled); the handler often runs inside fork(2), after the
 *                       prepare handlers took the profiler's locks; prints the children reaped
 */
#define _GNU_SOURCE 1

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include "mimalloc-prof.h"

#define PROBE_NAME "fork_probe"
#include "probe_util.h"

static void start_rate(size_t rate)
{
  if (!mi_prof_start_seeded(rate, 0xf0c5ull)) die("mi_prof_start_seeded failed");
}

static volatile sig_atomic_t stop_allocating;

/* ---------------------------------------------------------------------------------------------------
   fork while an unwind is under way
--------------------------------------------------------------------------------------------------- */

/* The code the unwinder runs: libunwind's or libgcc's (fp: none of its own). */
static const char *unwinder_object(void)
{
  const char *u = getenv("MIMALLOC_PROF_UNWIND");
  if (u == NULL || strcmp(u, "auto") == 0 || strcmp(u, "libunwind") == 0) return "libunwind.so";
  if (strcmp(u, "libgcc") == 0) return "libgcc_s.so";
  die("forksig and forkinside need libunwind or libgcc");
}

static const char *target_object;  /* where the interrupted code must be */

static bool interrupted_in_target(void *uc_arg)
{
  ucontext_t *uc = uc_arg;
#if defined(__x86_64__)
  uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
  uintptr_t pc = (uintptr_t)uc->uc_mcontext.pc;
#elif defined(__i386__)
  uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_EIP];
#else
  uintptr_t pc = 0;
  (void)uc;
#endif
  Dl_info info;   /* dladdr is not async-signal-safe; the thread it interrupts is always in the library */
  return pc != 0 && dladdr((void *)pc, &info) != 0 && info.dli_fname != NULL &&
         strstr(info.dli_fname, target_object) != NULL;
}

/* Stats deltas a fork child sends its parent. */
typedef struct child_report_s {
  uint64_t samples, dropped_fork, dropped_unwind;
} child_report_t;

static int report_pipe[2];

/* In a fork child: 8 allocations at rate 1 (all sampled), the stats they moved sent to the parent. */
static _Noreturn void child_report(void)
{
  mi_prof_stats_t before = stats_now();
  for (int i = 0; i < 8; i++) free(malloc(100));
  mi_prof_stats_t after = stats_now();
  child_report_t r = {after.samples - before.samples,
                      after.dropped[MI_PROF_DROP_FORK] - before.dropped[MI_PROF_DROP_FORK],
                      after.dropped[MI_PROF_DROP_UNWIND] - before.dropped[MI_PROF_DROP_UNWIND]};
  _exit(write(report_pipe[1], &r, sizeof r) == sizeof r ? 0 : 1);
}

/* The parent's side: the child's report and its exit. */
static void read_child(pid_t pid, const char *what)
{
  child_report_t r;
  if (read(report_pipe[0], &r, sizeof r) != sizeof r) die("no report from the fork child");
  int status;
  if (waitpid(pid, &status, 0) != pid) die("waitpid failed");
  printf("%s_exit %d\n%s_samples %" PRIu64 "\n%s_dropped_fork %" PRIu64 "\n%s_dropped_unwind %" PRIu64 "\n", what,
         WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), what, r.samples, what,
         r.dropped_fork, what, r.dropped_unwind);
}

/* forksig: the main thread samples at rate 1 while another thread signals it; the handler forks when it
 * interrupted the unwinder (so the forking thread is itself inside it).  The fork handlers must not wait
 * for that unwind, which can only finish once the handler returns; in the child it resumes and the
 * child goes on sampling. */
static volatile sig_atomic_t fork_done, in_child;
static pid_t forked_pid;

static void forking_handler(int sig, siginfo_t *si, void *uc)
{
  (void)sig, (void)si;
  if (fork_done || !interrupted_in_target(uc)) return;
  pid_t pid = fork();
  if (pid == 0) in_child = 1;
  forked_pid = pid;
  fork_done = 1;
}

/* forklock's: set by its handler, cleared by the main loop's next round.  A signal sent while the
 * handler runs (it forks and waits for the child) waits, blocked, until the handler returns, then
 * interrupts the very instruction the last one did: under qemu-user, which delivers it right at the
 * handler's return, every fork of a run then found the same locks held, or none (0 or 100 frozen
 * children of 100, in 8 runs).  So the signaller waits for the main thread to have moved on. */
static volatile sig_atomic_t wait_for_progress;

/* Each signal also waits a random spin (0 to 16383 rounds of a counter) after the main thread moved on:
 * sent as soon as it moved on, the signal came a fixed time after the same line of its loop, and every
 * fork of a run again found the same locks held, or none (natively too: 0 or 100 frozen children of
 * 100, about half the runs each). */
static void *signaller(void *arg)
{
  pthread_t target = *(pthread_t *)arg;
  uint64_t x = 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
  while (!fork_done) {
    if (!wait_for_progress) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      for (volatile unsigned spin = (unsigned)(x >> 50); spin > 0; spin--) {
      }
      pthread_kill(target, SIGUSR1);
    }
    sched_yield();
  }
  return NULL;
}

static int mode_forksig(void)
{
  target_object = unwinder_object();
  if (pipe(report_pipe) != 0) die("pipe failed");
  struct sigaction sa = {.sa_sigaction = forking_handler, .sa_flags = SA_SIGINFO | SA_RESTART};
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGUSR1, &sa, NULL) != 0) die("sigaction failed");
  start_rate(1);
  pthread_t self = pthread_self(), th;
  if (pthread_create(&th, NULL, signaller, &self) != 0) die("pthread_create failed");
  unsigned long rounds = 0;
  while (!fork_done) {
    free(malloc(100));
    rounds++;
  }
  if (in_child) child_report();
  if (forked_pid < 0) die("fork failed");
  if (pthread_join(th, NULL) != 0) die("pthread_join failed");
  mi_prof_stats_t st = stats_now();
  mi_prof_stop();
  read_child(forked_pid, "child");
  printf("parent_dropped_fork %" PRIu64 "\nparent_dropped_unwind %" PRIu64 "\n", st.dropped[MI_PROF_DROP_FORK],
         st.dropped[MI_PROF_DROP_UNWIND]);
  return 0;
}

/* forkinside: another thread is stopped (in a signal handler) inside the unwinder while the main thread
 * forks.  In the child it never comes back, with whatever it held: the child must not call into an
 * unwinder that may be locked (libgcc: its samples are dropped as MI_PROF_DROP_FORK; libunwind: the
 * child unwinds with libgcc), and must not hang.  The parent loses nothing. */
static int parked[2], unpark[2];

static volatile sig_atomic_t parked_once;   /* later signals, already sent, must not park it again */

static void parking_handler(int sig, siginfo_t *si, void *uc)
{
  (void)sig, (void)si;
  char c = 'p';
  if (parked_once || !interrupted_in_target(uc)) return;
  parked_once = 1;
  if (write(parked[1], &c, 1) != 1 || read(unpark[0], &c, 1) != 1) _exit(3);
}

static void *allocating(void *arg)
{
  (void)arg;
  while (!stop_allocating) free(malloc(100));
  return NULL;
}

static int mode_forkinside(void)
{
  target_object = unwinder_object();
  if (pipe(report_pipe) != 0 || pipe(parked) != 0 || pipe(unpark) != 0) die("pipe failed");
  struct sigaction sa = {.sa_sigaction = parking_handler, .sa_flags = SA_SIGINFO | SA_RESTART};
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGUSR2, &sa, NULL) != 0) die("sigaction failed");
  start_rate(1);
  pthread_t th;
  if (pthread_create(&th, NULL, allocating, NULL) != 0) die("pthread_create failed");
  for (;;) {                       /* until the thread reports itself parked inside the unwinder */
    pthread_kill(th, SIGUSR2);
    struct pollfd p = {.fd = parked[0], .events = POLLIN};
    if (poll(&p, 1, 0) == 1) break;
    sched_yield();
  }
  char c;
  if (read(parked[0], &c, 1) != 1) die("read failed");
  pid_t pid = fork();
  if (pid == 0) child_report();
  if (pid < 0) die("fork failed");
  read_child(pid, "child");
  stop_allocating = 1;
  if (write(unpark[1], &c, 1) != 1) die("write failed");
  if (pthread_join(th, NULL) != 0) die("pthread_join failed");
  mi_prof_stats_t st = stats_now();
  mi_prof_stop();
  printf("parent_dropped_fork %" PRIu64 "\nparent_dropped_unwind %" PRIu64 "\n", st.dropped[MI_PROF_DROP_FORK],
         st.dropped[MI_PROF_DROP_UNWIND]);
  return 0;
}

/* forkstorm [FORKS RATE]: 4 threads allocate (16..4111 bytes, a window of 64 live blocks each) at RATE
 * (default 4096) while the main thread forks FORKS times (default 100) back to back; each child takes one
 * sample of 1 MiB (p = 1) and exits 0 if it got a stack, 2 if it was dropped as MI_PROF_DROP_FORK.  The
 * parent's samples and drops, and the children's outcomes (samples around fork(), measured). */
static void *storm_thread(void *arg)
{
  uint64_t x = (uintptr_t)arg * 0x9e3779b97f4a7c15ull | 1;
  void *win[64] = {0};
  while (!stop_allocating) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    unsigned slot = (unsigned)(x >> 40) % 64;
    free(win[slot]);
    win[slot] = malloc(16 + (size_t)(x % 4096));
  }
  for (int i = 0; i < 64; i++) free(win[i]);
  return NULL;
}

static int mode_forkstorm(int argc, char **argv)
{
  size_t forks = argc > 2 ? arg_size(argv[2]) : 100, rate = argc > 3 ? arg_size(argv[3]) : 4096;
  start_rate(rate);
  pthread_t th[4];
  for (uintptr_t i = 0; i < 4; i++)
    if (pthread_create(&th[i], NULL, storm_thread, (void *)(i + 1)) != 0) die("pthread_create failed");
  size_t with_stack = 0, without = 0, other = 0;
  for (size_t i = 0; i < forks; i++) {
    pid_t pid = fork();
    if (pid == 0) {
      mi_prof_stats_t before = stats_now();
      free(malloc(1 << 20));
      mi_prof_stats_t after = stats_now();
      _exit(after.dropped[MI_PROF_DROP_FORK] != before.dropped[MI_PROF_DROP_FORK] ? 2 : 0);
    }
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) != pid) die("fork or waitpid failed");
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    with_stack += code == 0, without += code == 2, other += code != 0 && code != 2;
  }
  stop_allocating = 1;
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  mi_prof_stats_t st = stats_now();
  mi_prof_stop();
  uint64_t dropped = 0;
  for (int r = 0; r < MI_PROF_DROP_REASONS; r++) dropped += st.dropped[r];
  printf("samples %" PRIu64 "\ndropped %" PRIu64 "\ndropped_unwind %" PRIu64 "\ndropped_fork %" PRIu64 "\n",
         st.samples, dropped, st.dropped[MI_PROF_DROP_UNWIND], st.dropped[MI_PROF_DROP_FORK]);
  printf("children_with_stack %zu\nchildren_dropped_fork %zu\nchildren_other %zu\n", with_stack, without, other);
  return 0;
}

/* forklock: the handler forks whenever it interrupted the library's own code, up to N times, and waits
 * for each child: the fork handlers must not take a lock the interrupted thread holds, and the child
 * (fresh locks; sampling stopped where it froze) returns from the handler, finishes what was
 * interrupted, and must then be able to allocate, free, realloc its parent's sampled blocks, start,
 * dump and read the stats, then exit. */
static volatile sig_atomic_t forks_left, children_ok, children_bad, children_frozen, in_child;

#define STABLE 8
static unsigned char *stable[STABLE];   /* sampled blocks of the parent's, 1000 bytes of (j + 1) each */

/* A forklock child's work; its exit status (0: all fine, 64 more when frozen). */
static int forklock_child(void)
{
  for (int i = 0; i < 8; i++) free(malloc(100 + (size_t)i * 500));
  for (int j = 0; j < STABLE; j++) {
    unsigned char *q = realloc(stable[j], 3000);
    if (q == NULL) return 3;
    for (int b = 0; b < 1000; b++) if (q[b] != (unsigned char)(j + 1)) return 4;
    free(q);
  }
  /* The child runs after its handler returned, the interrupted library code finished: the session goes
   * on (EALREADY), or the child froze the profiler (ENOTRECOVERABLE) and dumps are refused alike. */
  bool frozen = false;
  if (!mi_prof_start(1)) {
    if (errno != EALREADY && errno != ENOTRECOVERABLE) return 5;
    frozen = errno == ENOTRECOVERABLE;
  }
  int null = open("/dev/null", O_WRONLY);
  bool dumped = mi_prof_dump_fd(null);
  int err = errno;
  close(null);
  if (dumped == frozen || (!dumped && err != ENOTRECOVERABLE)) return 6;
  mi_prof_stats_t st;
  if (!mi_prof_stats(&st, sizeof st)) return 2;
  return frozen ? 64 : 0;
}

static void forklock_handler(int sig, siginfo_t *si, void *uc)
{
  (void)sig, (void)si;
  wait_for_progress = 1;
  if (forks_left <= 0 || !interrupted_in_target(uc)) return;
  forks_left--;
  int saved = errno;
  pid_t pid = fork();
  if (pid == 0) {                  /* the child's work is done in the main loop, after this returns */
    in_child = 1;
    errno = saved;
    return;
  }
  int status;
  if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && (WEXITSTATUS(status) & ~64) == 0) {
    children_ok++;
    children_frozen += WEXITSTATUS(status) == 64;
  } else {
    children_bad++;
    if (getenv("FORK_PROBE_DEBUG") != NULL) fprintf(stderr, "child status %d\n", status);
  }
  errno = saved;
}

static int mode_forklock(int argc, char **argv)
{
  target_object = "libmimalloc-prof.so";
  forks_left = argc > 2 ? atoi(argv[2]) : 100;
  int want = forks_left;
  struct sigaction sa = {.sa_sigaction = forklock_handler, .sa_flags = SA_SIGINFO | SA_RESTART};
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGUSR1, &sa, NULL) != 0) die("sigaction failed");
  start_rate(1);
  for (int j = 0; j < STABLE; j++) {
    if ((stable[j] = malloc(1000)) == NULL) die("malloc failed");
    memset(stable[j], j + 1, 1000);
  }
  pthread_t self = pthread_self(), th;
  fork_done = 0;
  if (pthread_create(&th, NULL, signaller, &self) != 0) die("pthread_create failed");
  void *keep[64] = {0};
  for (unsigned long i = 0; forks_left > 0 && !in_child; i++) {
    size_t k = i % 64;
    free(keep[k]);
    keep[k] = malloc(64 + i % 2000);
    wait_for_progress = 0;
  }
  if (in_child) _exit(forklock_child());
  fork_done = 1;
  if (pthread_join(th, NULL) != 0) die("pthread_join failed");
  for (size_t k = 0; k < 64; k++) free(keep[k]);
  for (int j = 0; j < STABLE; j++) free(stable[j]);
  mi_prof_stats_t st = stats_now();
  mi_prof_stop();
  printf("forks %d\nchildren_ok %d\nchildren_bad %d\nchildren_frozen %d\nlive_samples %" PRIu64 "\n", want,
         (int)children_ok, (int)children_bad, (int)children_frozen, st.live_samples);
  return 0;
}

/* forkchld: the handler a forking server has, which reaps and logs.  A SIGCHLD pending when fork(2) is
 * entered makes the kernel run the handler and restart fork, on the thread whose prepare handlers hold
 * every profiler lock: its malloc must not sample into them (it hung), its free of a sampled block must
 * wait until the locks are released. */
static char *volatile chld_log;
static volatile sig_atomic_t chld_reaped;

static void chld_handler(int sig)
{
  (void)sig;
  int saved = errno, status;
  while (waitpid(-1, &status, WNOHANG) > 0) {
    char *line = malloc(256), *old = chld_log;
    if (line != NULL) snprintf(line, 256, "child exited with %d", status);
    chld_log = line;
    free(old);
    chld_reaped++;
  }
  errno = saved;
}

static int mode_forkchld(int argc, char **argv)
{
  int want = argc > 2 ? atoi(argv[2]) : 1000;
  struct sigaction sa = {.sa_handler = chld_handler, .sa_flags = SA_RESTART};
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGCHLD, &sa, NULL) != 0) die("sigaction failed");
  start_rate(1);
  for (int i = 0; i < want; i++) {
    pid_t pid = fork();
    if (pid < 0) die("fork failed");
    if (pid == 0) _exit(0);
  }
  sigset_t chld, old;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, &old);       /* the rest reaped here, the handler kept out */
  int status;
  while (waitpid(-1, &status, 0) > 0) chld_reaped++;
  free(chld_log);
  mi_prof_stats_t st = stats_now();
  mi_prof_stop();
  printf("forks %d\nreaped %d\nlive_samples %" PRIu64 "\n", want, (int)chld_reaped, st.live_samples);
  return 0;
}

int main(int argc, char **argv)
{
  if (argc < 2) die("usage: fork_probe MODE ...");
  /* FORK_PROBE_LIBGCC_S=1: libgcc_s loaded before the session starts, as in every C++ program (the
   * library then primes libgcc for fork children; a C program without it gets none: lib/unwind.c). */
  if (getenv("FORK_PROBE_LIBGCC_S") != NULL && dlopen("libgcc_s.so.1", RTLD_NOW) == NULL) die("dlopen libgcc_s");
  const char *mode = argv[1];
  if (strcmp(mode, "forksig") == 0) return mode_forksig();
  if (strcmp(mode, "forkinside") == 0) return mode_forkinside();
  if (strcmp(mode, "forkstorm") == 0) return mode_forkstorm(argc, argv);
  if (strcmp(mode, "forklock") == 0) return mode_forklock(argc, argv);
  if (strcmp(mode, "forkchld") == 0) return mode_forkchld(argc, argv);
  die("unknown mode");
  return 1;
}
