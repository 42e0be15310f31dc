/* loader_probe.c - the process's first mi_prof_start() against a module constructor, for the unwind suite
 * (tests/test_unwind.c), one unwinder per run (MIMALLOC_PROF_UNWIND).
 *
 *   loader_probe MODULE stats|start
 *
 * Thread A dlopens MODULE (tests/ctor_plugin.c), whose constructor runs with the loader's lock held and
 * waits on a pipe.  Meanwhile thread B makes the process's first mi_prof_start(), which loads the
 * unwinder (libunwind by dlopen, libgcc through glibc's backtrace()) and so waits for the loader's lock;
 * the probe waits until B is seen blocked on a lock inside the loader (/proc/self/task/TID/syscall: a
 * futex wait on an address in ld.so's _rtld_global), or done (fp loads nothing), before it lets the
 * constructor call the API (stats or start).  The library must not hold its API lock while it loads the
 * unwinder: both threads would then wait for each other forever.  No sleeps: pipes and the kernel's view
 * of B.
 *
 * Prints "key value" lines: b_blocked (B was seen waiting inside the loader), b_started, ctor_ok, and
 * the samples and drops after the main thread allocates a little at rate 1 once both are done.  Or only
 * "skipped 1" where /proc/self/task/TID/syscall does not show this program's own system calls: under
 * qemu-user it shows the emulator's (the host's numbers and addresses), so B could never be seen
 * blocked, and the constructor would wait forever.
 */
#define _GNU_SOURCE 1

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <link.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mimalloc-prof.h"

#define PROBE_NAME "loader_probe"
#include "probe_util.h"

static const char *module;
static int ctor_ok = -1;
static int b_tid[2], b_done[2];   /* pipes: B's thread id, then one byte when its start returned */
static int b_started;

static void *thread_a(void *arg)
{
  (void)arg;
  void *h = dlopen(module, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    fprintf(stderr, "loader_probe: dlopen: %s\n", dlerror());
    exit(1);
  }
  int *ok = dlsym(h, "ctor_plugin_ok");
  if (ok == NULL) die("dlsym(ctor_plugin_ok) failed");
  ctor_ok = *ok;
  return NULL;
}

static void *thread_b(void *arg)
{
  (void)arg;
  pid_t tid = gettid();
  if (write(b_tid[1], &tid, sizeof tid) != sizeof tid) die("write failed");
  b_started = mi_prof_start_seeded(1, 0x10ad) || errno == EALREADY;
  char c = 'd';
  if (write(b_done[1], &c, 1) != 1) die("write failed");
  return NULL;
}

/* Rate 1: all of these are sampled, with stacks by now. */
static void *late_thread(void *arg)
{
  (void)arg;
  for (int i = 0; i < 8; i++) free(malloc(100));
  return NULL;
}

/* The loader's data (its locks among it): ld.so's _rtld_global. */
static uintptr_t rtld_lo, rtld_hi;

static void rtld_range(void)
{
  void *p = dlsym(RTLD_DEFAULT, "_rtld_global");
  Dl_info info;
  const ElfW(Sym) *sym = NULL;
  if (p == NULL || dladdr1(p, &info, (void **)&sym, RTLD_DL_SYMENT) == 0 || sym == NULL)
    die("cannot find the loader's _rtld_global");
  rtld_lo = (uintptr_t)p;
  rtld_hi = rtld_lo + sym->st_size;
}

/* Whether thread `tid` is waiting on a futex inside the loader's data. */
static bool blocked_in_loader(pid_t tid)
{
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/self/task/%d/syscall", (int)tid);
  FILE *f = fopen(path, "r");
  if (f == NULL) return false;
  bool in = false;
  long nr;
  uintptr_t addr;
  if (fgets(line, sizeof line, f) != NULL && sscanf(line, "%ld %" SCNxPTR, &nr, &addr) == 2) {
    bool futex = nr == SYS_futex;
#ifdef SYS_futex_time64
    futex = futex || nr == SYS_futex_time64;
#endif
    in = futex && addr - rtld_lo < rtld_hi - rtld_lo;
  }
  fclose(f);
  return in;
}

/* Whether /proc/self/task/TID/syscall shows this thread's own system call: read by read(2), it must
 * say read, on that descriptor. */
static bool proc_syscall_works(void)
{
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/self/task/%d/syscall", (int)gettid());
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = read(fd, line, sizeof line - 1);
  close(fd);
  long nr;
  unsigned long arg0;
  if (n <= 0) return false;
  line[n] = '\0';
  return sscanf(line, "%ld %lx", &nr, &arg0) == 2 && nr == SYS_read && arg0 == (unsigned long)fd;
}

int main(int argc, char **argv)
{
  if (argc < 3) die("usage: loader_probe MODULE stats|start");
  module = argv[1];
  if (!proc_syscall_works()) {
    printf("skipped 1\n");
    return 0;
  }
  rtld_range();
  int entered[2], go[2];
  if (pipe(entered) != 0 || pipe(go) != 0 || pipe(b_tid) != 0 || pipe(b_done) != 0) die("pipe failed");
  char spec[64];
  snprintf(spec, sizeof spec, "%d %d %s", entered[1], go[0], argv[2]);
  if (setenv("CTOR_PLUGIN", spec, 1) != 0) die("setenv failed");

  pthread_t a, b;
  char c;
  if (pthread_create(&a, NULL, thread_a, NULL) != 0) die("pthread_create failed");
  if (read(entered[0], &c, 1) != 1) die("the constructor did not start");
  if (pthread_create(&b, NULL, thread_b, NULL) != 0) die("pthread_create failed");
  pid_t tid;
  if (read(b_tid[0], &tid, sizeof tid) != sizeof tid) die("no thread id from B");
  int b_blocked = 0;
  for (;;) {                       /* B waits for the loader, or is done; the watchdog ends a hang */
    struct pollfd p = {.fd = b_done[0], .events = POLLIN};
    if (poll(&p, 1, 0) == 1) break;
    if (blocked_in_loader(tid)) {
      b_blocked = 1;
      break;
    }
    sched_yield();
  }
  if (write(go[1], &c, 1) != 1) die("write failed");
  if (pthread_join(a, NULL) != 0 || pthread_join(b, NULL) != 0) die("pthread_join failed");

  mi_prof_stats_t before = stats_now();
  pthread_t late;                  /* a new thread samples from its first allocation */
  if (pthread_create(&late, NULL, late_thread, NULL) != 0 || pthread_join(late, NULL) != 0)
    die("cannot run the late thread");
  mi_prof_stats_t after = stats_now();
  mi_prof_stop();
  printf("b_blocked %d\nb_started %d\nctor_ok %d\n", b_blocked, b_started, ctor_ok);
  printf("late_samples %" PRIu64 "\nlate_dropped_unwind %" PRIu64 "\n", after.samples - before.samples,
         after.dropped[MI_PROF_DROP_UNWIND] - before.dropped[MI_PROF_DROP_UNWIND]);
  return 0;
}
