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
 *   shares ALPHA BETA SIZE  ALPHA blocks of SIZE bytes from alpha_site (this program) and BETA from
 *                           pprof_site_beta (the shared library), all kept live until exit
 *   leak N SIZE             N blocks of SIZE bytes from leaky_function, never freed; a churn of freed
 *                           blocks from churn_site
 *   load THREADS            THREADS threads allocate and free until stdin reaches EOF (signal dumps)
 *   phases STEP...          steps in order: grow:BYTES (4 KiB blocks kept live), churn:BYTES (4 KiB
 *                           blocks freed at once), free (every live block), barrier (see below)
 *   budget N SIZE RUN STOP  mi_prof_start(1); N live blocks of SIZE bytes; mi_prof_dump(RUN) while running,
 *                           then mi_prof_stop() and mi_prof_dump(STOP)
 *
 * The barrier (phases): raise(SIGUSR2) (the test sets MIMALLOC_PROF_SIGNAL=USR2), then wait, with
 * inotify on the directory of MIMALLOC_PROF_PREFIX (watched from the first barrier on), until the
 * resulting "s" file is closed.  Dump
 * requests of every trigger go through one pipe to the profiler thread, which serves them in order; the
 * interval and peak requests of earlier steps were written before their malloc returned, and raise()
 * delivers the signal (whose handler writes the request) before it returns.  So when the "s" file is
 * closed, every file requested before the barrier is complete: no sleeping, no polling.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
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

/* load: worker threads allocate and free until the main thread sees EOF on stdin. */
static atomic_bool load_stop;

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
    rounds++;
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
  for (size_t i = 0; i < n; i++) {
    if (pthread_create(&threads[i], NULL, load_worker, (void *)(uintptr_t)i) != 0) die("pthread_create");
  }
  printf("ready\n");
  fflush(stdout);
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
static unsigned s_files_seen;

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

/* Waits until `want` "s" files have appeared (automatic dumps are renamed into place when complete;
 * blocking read: the test's timeout bounds a hang). */
static void wait_s_files(unsigned want)
{
  _Alignas(struct inotify_event) char buf[4096];
  while (s_files_seen < want) {
    ssize_t r = read(watch_fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) die("inotify read");
    for (char *p = buf; p < buf + r;) {
      struct inotify_event *ev = (struct inotify_event *)p;
      if (ev->len > 0 && ends_with(ev->name, ".s.pb.gz")) s_files_seen++;
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
    else if (strcmp(step, "barrier") == 0) {
      if (watch_fd < 0) watch_init();        /* before the first "s" request: none is missed */
      if (raise(SIGUSR2) != 0) die("raise");
      wait_s_files(++barriers);
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

int main(int argc, char **argv)
{
  if (argc < 2) die("usage: pprof_probe MODE ...");
  const char *mode = argv[1];
  if (strcmp(mode, "shares") == 0) return mode_shares(argc, argv);
  if (strcmp(mode, "leak") == 0) return mode_leak(argc, argv);
  if (strcmp(mode, "load") == 0) return mode_load(argc, argv);
  if (strcmp(mode, "phases") == 0) return mode_phases(argc, argv);
  if (strcmp(mode, "budget") == 0) return mode_budget(argc, argv);
  die("unknown mode");
  return 1;
}
