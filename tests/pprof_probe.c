/* pprof_probe.c - the pprof suite's subprocess: heap profiles written with MIMALLOC_PROF_* options, which
 * are read once at load, so each test runs this program with its own environment.  Built as a PIE with
 * -g, frame pointers and no inlining (every site keeps its own frame), and with -export-dynamic (the
 * leak report names functions with dladdr).  Linked with tests/libpprof_site.la (pprof_site_beta, an
 * allocation site inside a shared library).
 *
 * It prints "key value" lines on stdout; on a failure it cannot report otherwise it prints
 * "pprof_probe: ..." on stderr and exits 1 (stderr otherwise belongs to the library).
 *
 * Modes (argv[1]):
 *   shares ALPHA BETA SIZE [ENOSYS|EPERM]
 *                           ALPHA blocks of SIZE bytes from alpha_site (this program) and BETA from
 *                           pprof_site_beta (the shared library), all kept live until exit; with an
 *                           errno, process_vm_readv is refused first (a seccomp filter): "refused 1", or
 *                           "skipped 1" where no filter can be installed
 *   leak N SIZE             N blocks of SIZE bytes from leaky_function, never freed; a churn of freed
 *                           blocks from churn_site
 *   load THREADS [forever]  THREADS threads allocate and free until stdin reaches EOF (signal dumps), or
 *                           with "forever" until a signal ends the program; "ready" once all allocate
 *   phases STEP...          steps in order: grow:BYTES (4 KiB blocks kept live), churn:BYTES (4 KiB
 *                           blocks freed at once), free (every live block), barrier (see below),
 *                           distinct:N (N blocks through distinct stacks, freed at once), term
 *                           (raise(SIGTERM), then wait for it to end the program)
 *   budget N SIZE RUN STOP  mi_prof_start(1); N live blocks of SIZE bytes; mi_prof_dump(RUN) while running,
 *                           then mi_prof_stop() and mi_prof_dump(STOP)
 *   distinct N SIZE         N blocks of SIZE + (i % 1024) bytes through N distinct stacks (walkers below),
 *                           kept live until exit; the stats right before exit
 *   cancel                  a thread cancelled inside a dump blocked on a pipe; a later dump works
 *   idle [N]                N distinct live stacks (as distinct), "ready", then waits for stdin's end (the
 *                           test looks at /proc, or sends signals, meanwhile)
 *   own_term replace|chain  installs its own SIGTERM handler, which replaces the library's or calls it too;
 *                           "ready"; after the signal "handled 1"; with chain, waits for the final profile
 *   forkplugin N            N distinct live stacks; the FIFO MPROF_TEST_DUMP_FIFO (4 KiB buffer), which
 *                           tests/dump_shim makes the first signal dump write to; raise(SIGUSR2); dlopen of
 *                           MPROF_TEST_FORK_PLUGIN, whose constructor forks while the dump is written
 *                           (tests/fork_plugin.c); waits until the dump is renamed into place
 *   named_malloc            a thread named like the profiler's calls malloc (tests/nomalloc_shim.c's
 *                           control: it must abort)
 *
 * The barrier (phases): raise(SIGUSR2) (the test sets MIMALLOC_PROF_SIGNAL=USR2), then wait, with
 * inotify on the directory of MIMALLOC_PROF_PREFIX (watched from the first barrier on), until the
 * resulting "s" file is closed.  Dump
 * requests of every trigger go to the one profiler thread, which serves them in order; the
 * interval and peak requests of earlier steps were written before their malloc returned, and raise()
 * delivers the signal (whose handler posts the request) before it returns.  So when the "s" file is
 * closed, every file requested before the barrier is complete: no sleeping, no polling.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "mimalloc-prof.h"

#define PROBE_NAME "pprof_probe"   /* die()'s prefix (probe_util.h) */
#include "probe_util.h"

size_t pprof_site_beta(void **blocks, size_t count, size_t size);   /* tests/pprof_site.c */

#define MAX_BLOCKS (1u << 17)
#define PAGE_BLOCK 4096u

static void *blocks[MAX_BLOCKS];     /* static: the probe's own bookkeeping is never sampled */
static size_t n_blocks;

/* The executable's real path ("exe PATH"): tests/pprof_probe may be libtool's wrapper script, and
 * `go tool pprof` wants the binary. */
static void print_exe(void)
{
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) die("readlink /proc/self/exe");
  exe[n] = '\0';
  printf("exe %s\n", exe);
  fflush(stdout);
}

/* ---------------------------------------------------------------------------------------------------
   Allocation sites (global and not inlined: each is its own frame, named by dladdr and by pprof)
--------------------------------------------------------------------------------------------------- */

__attribute__((noinline)) size_t alpha_site(void **out, size_t count, size_t size)
{
  size_t ok = 0;
  for (size_t i = 0; i < count; i++) {
    out[i] = malloc(size);
    if (out[i] == NULL) continue;
    memset(out[i], 0xa1, size);
    ok++;
  }
  return ok;
}

__attribute__((noinline)) size_t leaky_function(size_t count, size_t size)
{
  size_t ok = 0;
  for (size_t i = 0; i < count; i++) {
    char *p = malloc(size);
    if (p == NULL) continue;
    memset(p, 0x1e, size);
    blocks[n_blocks++] = p;
    ok++;
  }
  return ok;
}

__attribute__((noinline)) void churn_site(size_t count, size_t size)
{
  for (size_t i = 0; i < count; i++) {
    unsigned char *p = malloc(size);
    if (p == NULL) die("malloc failed");
    p[0] = p[size - 1] = (unsigned char)i;
    if (p[0] != p[size - 1]) die("block contents changed");
    free(p);
  }
}

/* 4 KiB blocks up to `bytes`, kept live; each filled with its index and checked when freed. */
__attribute__((noinline)) void grow_site(size_t bytes)
{
  for (size_t b = 0; b < bytes; b += PAGE_BLOCK) {
    if (n_blocks == MAX_BLOCKS) die("too many live blocks");
    unsigned char *p = malloc(PAGE_BLOCK);
    if (p == NULL) die("malloc failed");
    memset(p, (int)(n_blocks & 0xff), PAGE_BLOCK);
    blocks[n_blocks++] = p;
  }
}

/* Walker k calls walker (path % 16) until n reaches 0, then allocates `size` bytes: the path's base-16
 * digits choose the functions on the stack, so distinct paths give distinct return addresses. */
typedef void *walker_fn(uint64_t path, unsigned n, size_t size);
extern walker_fn *const walkers[16];
volatile unsigned walk_salt;

#define WALKER(k)                                                                          \
  __attribute__((noinline, noclone)) void *walk##k(uint64_t path, unsigned n, size_t size)  \
  {                                                                                        \
    void *p = n == 0 ? malloc(size) : walkers[path % 16](path / 16, n - 1, size);          \
    walk_salt += k + 100;                                                                  \
    return p;                                                                              \
  }
WALKER(0) WALKER(1) WALKER(2) WALKER(3) WALKER(4) WALKER(5) WALKER(6) WALKER(7)
WALKER(8) WALKER(9) WALKER(10) WALKER(11) WALKER(12) WALKER(13) WALKER(14) WALKER(15)
#undef WALKER

walker_fn *const walkers[16] = {walk0, walk1, walk2, walk3, walk4, walk5, walk6, walk7,
                                walk8, walk9, walk10, walk11, walk12, walk13, walk14, walk15};

/* Block i through path i (4 levels: 16^4 = 65536 distinct stacks) of `size` + (i % 1024) bytes, filled. */
static unsigned char *distinct_block(size_t i, size_t size)
{
  size_t n = size + i % 1024;
  unsigned char *p = walkers[i % 16](i / 16, 3, n);
  if (p == NULL) die("malloc failed");
  memset(p, (int)(i & 0xff), n);
  return p;
}

static void free_all(void)
{
  for (size_t i = 0; i < n_blocks; i++) {
    unsigned char *p = blocks[i];
    if (p[0] != (unsigned char)(i & 0xff) || p[PAGE_BLOCK - 1] != (unsigned char)(i & 0xff))
      die("block contents changed");
    free(p);
  }
  n_blocks = 0;
}

/* ---------------------------------------------------------------------------------------------------
   Modes
--------------------------------------------------------------------------------------------------- */

static int mode_shares(int argc, char **argv)
{
  if (argc < 5) die("usage: shares ALPHA BETA SIZE");
  size_t alpha = arg_size(argv[2]), beta = arg_size(argv[3]), size = arg_size(argv[4]);
  if (alpha + beta > MAX_BLOCKS) die("too many blocks");
  if (argc > 5 && !probe_refuse_vm_readv_said(argv[5])) return 0;
  print_exe();                               /* stdout's buffer exists before the sites run */
  size_t ok = alpha_site(blocks, alpha, size) + pprof_site_beta(blocks + alpha, beta, size);
  printf("allocated %zu\n", ok);
  return 0;                                  /* live until exit: the final dump sees them all */
}

static int mode_leak(int argc, char **argv)
{
  if (argc < 4) die("usage: leak N SIZE");
  size_t n = arg_size(argv[2]), size = arg_size(argv[3]);
  if (n > MAX_BLOCKS) die("too many blocks");
  printf("leak\n");
  fflush(stdout);
  size_t ok = leaky_function(n, size);
  churn_site(4 * n, size);                   /* freed at once: never in the report */
  printf("leaked %zu\n", ok);
  fflush(stdout);
  return 0;
}

/* load: worker threads allocate and free until the main thread sees EOF on stdin.  "ready" once every
 * worker has done a round (each posts load_started then): a test that signals after "ready" finds them
 * allocating (before, a worker that the scheduler had not run yet by the end printed "rounds 0"). */
static atomic_bool load_stop;
static sem_t load_started;

static void *load_worker(void *arg)
{
  uint64_t x = 0x9e3779b97f4a7c15ull * ((uintptr_t)arg + 1);
  void *window[256] = {0};
  uint64_t rounds = 0;
  while (!atomic_load_explicit(&load_stop, memory_order_relaxed)) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    unsigned slot = (unsigned)(x >> 40) % 256;
    free(window[slot]);
    size_t size = 16 + (size_t)(x % 8192);
    unsigned char *p = malloc(size);
    if (p == NULL) die("malloc failed");
    p[0] = p[size - 1] = 0x5a;
    window[slot] = p;
    if (rounds++ == 0) sem_post(&load_started);
  }
  for (unsigned i = 0; i < 256; i++) free(window[i]);
  return (void *)(uintptr_t)rounds;
}

static int mode_load(int argc, char **argv)
{
  if (argc < 3) die("usage: load THREADS");
  size_t n = arg_size(argv[2]);
  pthread_t threads[16];
  if (n == 0 || n > 16) die("1..16 threads");
  if (sem_init(&load_started, 0, 0) != 0) die("sem_init");
  for (size_t i = 0; i < n; i++) {
    if (pthread_create(&threads[i], NULL, load_worker, (void *)(uintptr_t)i) != 0) die("pthread_create");
  }
  for (size_t i = 0; i < n;) {
    if (sem_wait(&load_started) == 0) i++;
    else if (errno != EINTR) die("sem_wait");
  }
  printf("ready\n");
  fflush(stdout);
  if (argc > 3 && strcmp(argv[3], "forever") == 0)
    for (;;) pause();
  char buf[64];
  for (;;) {
    ssize_t r = read(0, buf, sizeof buf);
    if (r == 0) break;
    if (r < 0 && errno != EINTR) die("read stdin");   /* EINTR: a signal arrived; wait on */
  }
  atomic_store(&load_stop, true);
  uint64_t rounds = 0;
  for (size_t i = 0; i < n; i++) {
    void *r;
    pthread_join(threads[i], &r);
    rounds += (uintptr_t)r;
  }
  printf("rounds %" PRIu64 "\n", rounds);
  return 0;
}

/* phases: the barrier's inotify watch, set up before the first step. */
static int watch_fd = -1;
static unsigned files_seen;                /* files seen by the watch so far (see wait_files) */

static void watch_init(void)
{
  const char *prefix = getenv("MIMALLOC_PROF_PREFIX");
  if (prefix == NULL) die("MIMALLOC_PROF_PREFIX not set");
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s", prefix);
  char *slash = strrchr(dir, '/');
  if (slash == NULL) snprintf(dir, sizeof dir, ".");
  else *slash = '\0';
  watch_fd = inotify_init1(IN_CLOEXEC);
  if (watch_fd < 0 || inotify_add_watch(watch_fd, dir, IN_MOVED_TO) < 0) die("inotify");
}

static bool ends_with(const char *s, const char *tail)
{
  size_t n = strlen(s), t = strlen(tail);
  return n >= t && strcmp(s + n - t, tail) == 0;
}

/* Waits until `want` files ending in `suffix` have appeared since the watch began (automatic dumps are
 * renamed into place when complete; blocking read: the test's timeout bounds a hang).  One suffix per
 * run of the probe. */
static void wait_files(const char *suffix, unsigned want)
{
  _Alignas(struct inotify_event) char buf[4096];
  while (files_seen < want) {
    ssize_t r = read(watch_fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) die("inotify read");
    for (char *p = buf; p < buf + r;) {
      struct inotify_event *ev = (struct inotify_event *)p;
      if (ev->len > 0 && ends_with(ev->name, suffix)) files_seen++;
      p += sizeof *ev + ev->len;
    }
  }
}

static int mode_phases(int argc, char **argv)
{
  printf("phases\n");
  fflush(stdout);
  unsigned barriers = 0;
  for (int i = 2; i < argc; i++) {
    const char *step = argv[i];
    if (strncmp(step, "grow:", 5) == 0) grow_site(arg_size(step + 5));
    else if (strncmp(step, "churn:", 6) == 0) churn_site(arg_size(step + 6) / PAGE_BLOCK, PAGE_BLOCK);
    else if (strcmp(step, "free") == 0) free_all();
    else if (strncmp(step, "distinct:", 9) == 0) {
      for (size_t k = 0, n = arg_size(step + 9); k < n; k++) free(distinct_block(k, 64));
    } else if (strcmp(step, "term") == 0) {
      fflush(stdout);
      if (raise(SIGTERM) != 0) die("raise");
      for (;;) pause();                      /* the library re-raises SIGTERM once the profile is written */
    }
    else if (strcmp(step, "barrier") == 0) {
      if (watch_fd < 0) watch_init();        /* before the first "s" request: none is missed */
      if (raise(SIGUSR2) != 0) die("raise");
      wait_files(".s.pb.gz", ++barriers);
      printf("barrier %u\n", barriers);
      fflush(stdout);
    } else {
      die("unknown step");
    }
  }
  free_all();
  printf("allocations ok\n");
  return 0;
}

static void say_dump(const char *key, const char *path)
{
  errno = 0;
  bool ok = mi_prof_dump(path);
  int err = ok ? 0 : errno;
  printf("%s %d\n%s_errno %d\n", key, ok ? 1 : 0, key, err);
}

static int mode_budget(int argc, char **argv)
{
  if (argc < 6) die("usage: budget N SIZE RUNNING_PATH STOPPED_PATH");
  size_t n = arg_size(argv[2]), size = arg_size(argv[3]);
  if (n > MAX_BLOCKS) die("too many blocks");
  printf("budget\n");
  fflush(stdout);
  if (!mi_prof_start_seeded(1, 24)) die("mi_prof_start_seeded");
  for (size_t i = 0; i < n; i++) {
    unsigned char *p = malloc(size);
    if (p == NULL) die("malloc failed");
    memset(p, (int)(i & 0xff), size);
    blocks[i] = p;
  }
  mi_prof_stats_t st = stats_now();
  say_dump("dump_running", argv[4]);
  if (!mi_prof_stop()) die("mi_prof_stop");
  say_dump("dump_stopped", argv[5]);
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char *p = blocks[i];
    bad += p[0] != (unsigned char)(i & 0xff) || p[size - 1] != (unsigned char)(i & 0xff);
    free(p);
  }
  printf("samples %" PRIu64 "\n", st.samples);
  printf("dropped_memory %" PRIu64 "\n", st.dropped[MI_PROF_DROP_MEMORY]);
  printf("profiler_bytes %" PRIu64 "\n", st.profiler_bytes);
  printf("bad_blocks %zu\n", bad);
  return 0;
}

static int mode_distinct(int argc, char **argv)
{
  if (argc < 4) die("usage: distinct N SIZE");
  size_t n = arg_size(argv[2]), size = arg_size(argv[3]);
  if (n > MAX_BLOCKS) die("too many blocks");
  printf("distinct\n");                      /* stdout's buffer exists before the stats are taken */
  fflush(stdout);
  for (size_t i = 0; i < n; i++) blocks[n_blocks++] = distinct_block(i, size);
  mi_prof_stats_t st = stats_now();          /* nothing is allocated from here to the final profile */
  printf("samples %" PRIu64 "\nlive %" PRIu64 "\ninuse_bytes %" PRIu64 "\nalloc_bytes %" PRIu64 "\n", st.samples,
         st.live_samples, st.inuse_bytes, st.alloc_bytes);
  printf("inuse_objects %" PRIu64 "\nalloc_objects %" PRIu64 "\ndropped_memory %" PRIu64 "\n", st.inuse_objects,
         st.alloc_objects, st.dropped[MI_PROF_DROP_MEMORY]);
  printf("profiler_bytes %" PRIu64 "\nprofiler_bytes_max %" PRIu64 "\n", st.profiler_bytes, st.profiler_bytes_max);
  fflush(stdout);
  return 0;
}

/* cancel: a thread dumps for ever into a pipe (one page) that nobody reads yet, with 3000 distinct live
 * stacks at rate 1 so that a profile does not fit; once it has written, it is cancelled, the pipe is
 * drained until the thread has ended, and a dump to /dev/null must still work. */
static void *dump_forever(void *arg)
{
  int fd = *(int *)arg;
  for (;;) {
    mi_prof_dump_fd(fd);
    pthread_testcancel();
  }
  return NULL;
}

static int mode_cancel(void)
{
  if (!mi_prof_start_seeded(1, 7)) die("mi_prof_start_seeded failed");
  for (size_t i = 0; i < 3000; i++) blocks[n_blocks++] = distinct_block(i, 64);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) die("pipe2");
  fcntl(fds[1], F_SETPIPE_SZ, 4096);
  pthread_t th;
  if (pthread_create(&th, NULL, dump_forever, &fds[1]) != 0) die("pthread_create");
  char buf[4096];
  if (read(fds[0], buf, 1) != 1) die("read");        /* the dump is writing */
  if (pthread_cancel(th) != 0) die("pthread_cancel");
  if (fcntl(fds[0], F_SETFL, O_NONBLOCK) != 0) die("fcntl");
  void *result = NULL;
  for (;;) {                                          /* drain until the thread has ended */
    if (read(fds[0], buf, sizeof buf) > 0) continue;
    if (pthread_tryjoin_np(th, &result) == 0) break;
    struct pollfd pf = {.fd = fds[0], .events = POLLIN};
    poll(&pf, 1, 10);
  }
  int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
  bool after = null >= 0 && mi_prof_dump_fd(null);
  for (size_t i = 0; i < n_blocks; i++) free(blocks[i]);
  n_blocks = 0;
  mi_prof_stop();
  printf("cancelled %d\ndump_after %d\n", result == PTHREAD_CANCELED, after);
  return 0;
}

static void wait_stdin_end(void)
{
  char buf[64];
  for (;;) {
    ssize_t r = read(0, buf, sizeof buf);
    if (r == 0) return;
    if (r < 0 && errno != EINTR) die("read stdin");
  }
}

static int mode_idle(int argc, char **argv)
{
  size_t n = argc > 2 ? arg_size(argv[2]) : 0;
  if (n > MAX_BLOCKS) die("too many blocks");
  for (size_t i = 0; i < n; i++) blocks[n_blocks++] = distinct_block(i, 64);
  printf("ready\n");
  fflush(stdout);
  wait_stdin_end();
  return 0;
}

/* own_term: the program's own SIGTERM handler, installed after the library's (which it replaces), and
 * in the chain variant calling the one it replaced, as handlers that chain do. */
static struct sigaction term_before;
static volatile sig_atomic_t term_handled;

static void own_term_handler(int sig, siginfo_t *info, void *context)
{
  term_handled = 1;
  if (term_before.sa_flags & SA_SIGINFO) term_before.sa_sigaction(sig, info, context);
  else if (term_before.sa_handler != SIG_DFL && term_before.sa_handler != SIG_IGN) term_before.sa_handler(sig);
}

static void replace_term_handler(int sig)
{
  (void)sig;
  term_handled = 1;
}

static int mode_own_term(int argc, char **argv)
{
  if (argc < 3) die("usage: own_term replace|chain");
  bool chain = strcmp(argv[2], "chain") == 0;
  if (chain) watch_init();                   /* before the signal: the final profile's rename is seen */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sigemptyset(&sa.sa_mask);
  if (chain) {
    sa.sa_flags = SA_SIGINFO;
    sa.sa_sigaction = own_term_handler;
  } else {
    sa.sa_handler = replace_term_handler;
  }
  sigset_t term, old;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  sigprocmask(SIG_BLOCK, &term, &old);       /* delivered only inside sigsuspend below */
  if (sigaction(SIGTERM, &sa, &term_before) != 0) die("sigaction");
  printf("ready\n");
  fflush(stdout);
  while (!term_handled) sigsuspend(&old);
  printf("handled %d\n", (int)term_handled);
  fflush(stdout);
  if (chain) wait_files(".f.pb.gz", 1);
  return 0;
}

/* forkplugin: see tests/fork_plugin.c for the constructor's side. */
static int mode_forkplugin(int argc, char **argv)
{
  if (argc < 3) die("usage: forkplugin N");
  size_t n = arg_size(argv[2]);
  if (n > MAX_BLOCKS) die("too many blocks");
  const char *prefix = getenv("MIMALLOC_PROF_PREFIX"), *plugin = getenv("MPROF_TEST_FORK_PLUGIN");
  const char *fifo = getenv("MPROF_TEST_DUMP_FIFO");
  if (prefix == NULL || plugin == NULL || fifo == NULL)
    die("MIMALLOC_PROF_PREFIX, MPROF_TEST_FORK_PLUGIN or MPROF_TEST_DUMP_FIFO not set");
  for (size_t i = 0; i < n; i++) blocks[n_blocks++] = distinct_block(i, 64);
  /* The first automatic dump (sequence 0, kind s) writes to the FIFO that tests/dump_shim gives it for its
   * temporary file: made here with a 4 KiB buffer and opened for reading, so the dump blocks in write(2)
   * until the plugin reads. */
  char final[PATH_MAX], fd_text[32];
  snprintf(final, sizeof final, "%s.%d.000000.s.pb.gz", prefix, (int)getpid());
  if (mkfifo(fifo, 0600) != 0) die("mkfifo");
  int fd = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0 || fcntl(fd, F_SETPIPE_SZ, 4096) < 0) die("FIFO");
  snprintf(fd_text, sizeof fd_text, "%d", fd);
  if (setenv("MPROF_TEST_FIFO_FD", fd_text, 1) != 0 || setenv("MPROF_TEST_FINAL_NAME", final, 1) != 0) die("setenv");
  watch_init();
  if (raise(SIGUSR2) != 0) die("raise");     /* the profiler thread starts the dump */
  if (dlopen(plugin, RTLD_NOW | RTLD_LOCAL) == NULL) die("dlopen");
  wait_files(".s.pb.gz", 1);                 /* renamed into place: the dump is complete */
  unlink(final);                             /* the empty file the FIFO stood for, under its final name */
  close(fd);
  printf("plugin loaded\n");
  return 0;                                  /* exit: the final profile (MIMALLOC_PROF_FINAL) */
}

static void *named_malloc_thread(void *arg)
{
  (void)arg;
  prctl(PR_SET_NAME, "mimalloc-prof", 0, 0, 0);
  return malloc(100);
}

static int mode_named_malloc(void)
{
  pthread_t t;
  void *p = NULL;
  if (pthread_create(&t, NULL, named_malloc_thread, NULL) != 0 || pthread_join(t, &p) != 0) die("thread");
  free(p);
  printf("not stopped\n");
  return 0;
}

int main(int argc, char **argv)
{
  if (argc < 2) die("usage: pprof_probe MODE ...");
  const char *mode = argv[1];
  if (strcmp(mode, "shares") == 0) return mode_shares(argc, argv);
  if (strcmp(mode, "leak") == 0) return mode_leak(argc, argv);
  if (strcmp(mode, "load") == 0) return mode_load(argc, argv);
  if (strcmp(mode, "phases") == 0) return mode_phases(argc, argv);
  if (strcmp(mode, "budget") == 0) return mode_budget(argc, argv);
  if (strcmp(mode, "distinct") == 0) return mode_distinct(argc, argv);
  if (strcmp(mode, "idle") == 0) return mode_idle(argc, argv);
  if (strcmp(mode, "own_term") == 0) return mode_own_term(argc, argv);
  if (strcmp(mode, "forkplugin") == 0) return mode_forkplugin(argc, argv);
  if (strcmp(mode, "named_malloc") == 0) return mode_named_malloc();
  if (strcmp(mode, "cancel") == 0) return mode_cancel();
  die("unknown mode");
  return 1;
}
