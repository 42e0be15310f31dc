/* stats_report.c - an LD_PRELOAD-able reporter for bench/harness.py: where a profiled run's memory is.
 *
 * Preload it after the library (LD_PRELOAD="libmimalloc-prof.so.0 stats_report.so").  Its constructor
 * installs an observer (mi_prof_set_observer, found with dlsym: no link-time dependency on the library)
 * that counts the live samples and their requested bytes and keeps the most of each; its destructor
 * appends one line of key=value pairs to $STATS_REPORT_OUT (stderr when unset):
 *
 *   found              1: the library's mi_prof_stats was found
 *   samples live_samples dropped slow_path_calls    mi_prof_stats at exit (dropped: all reasons)
 *   peak_live peak_live_bytes   the most live samples seen at once, and the most requested bytes they held
 *                      (observer counts; a realloc in place is a free and a sample)
 *   profiler_bytes arena_bytes arena_resident_bytes sampled_bytes   mi_prof_stats at exit, bytes: profiler
 *                      tables mapped; arena address space mapped; arena pages that may be resident
 *                      (an upper bound); usable bytes of the live sampled blocks
 *   hwm_kib rss_kib threads     /proc/self/status at exit: VmHWM (peak RSS), VmRSS, Threads
 *   single_threaded    glibc's __libc_single_threaded at exit: 1 only if the process never created a
 *                      thread (glibc 2.36 does not set it back once threads have come and gone)
 *   rss_arena_kib      resident KiB inside the window of the sampled blocks' slots (/proc/self/smaps, at exit)
 *   rss_mi_kib         resident anonymous KiB in mappings at or above 2 TiB and below 0x7f0000000000
 *                      (where mimalloc places its segments on x86-64; sampled blocks above two slices too)
 *   rss_anon_kib       other resident anonymous KiB: profiler tables, thread stacks, glibc, the program
 *   rss_unw_kib        resident KiB of libunwind and liblzma's mappings (file and relocated pages)
 *   rss_gcc_kib        of libgcc_s
 *   rss_lazy_kib       of libm, zlib and protobuf-c (the library loads them when first needed)
 *   rss_prof_kib       of libmimalloc-prof
 *   rss_file_kib       of every other file mapping
 *
 * The smaps figures are taken at exit, after the program has freed what it frees; bench/harness_run.py
 * reads the same classes from outside while the program runs, for the composition at its peak.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/single_threaded.h>
#include <unistd.h>

#include <mimalloc-prof.h>

static pid_t pid0;
static long live, peak;
static long long live_bytes, peak_bytes;

static void on_sample(void *p, size_t size, size_t weight, size_t rate, uint64_t tid, void *arg)
{
  (void)p, (void)weight, (void)rate, (void)tid, (void)arg;
  long n = __atomic_add_fetch(&live, 1, __ATOMIC_RELAXED);
  long long b = __atomic_add_fetch(&live_bytes, (long long)size, __ATOMIC_RELAXED);
  long cur = __atomic_load_n(&peak, __ATOMIC_RELAXED);
  while (n > cur && !__atomic_compare_exchange_n(&peak, &cur, n, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
  long long curb = __atomic_load_n(&peak_bytes, __ATOMIC_RELAXED);
  while (b > curb && !__atomic_compare_exchange_n(&peak_bytes, &curb, b, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
}

static void on_free(void *p, size_t size, void *arg)
{
  (void)p, (void)arg;
  __atomic_sub_fetch(&live, 1, __ATOMIC_RELAXED);
  __atomic_sub_fetch(&live_bytes, (long long)size, __ATOMIC_RELAXED);
}

__attribute__((constructor)) static void report_start(void)
{
  pid0 = getpid();
  typedef bool set_t(mi_prof_sample_fn *, mi_prof_free_fn *, void *);
  set_t *set = (set_t *)dlsym(RTLD_DEFAULT, "mi_prof_set_observer");
  if (set != NULL) set(on_sample, on_free, NULL);
}

/* VmHWM, VmRSS and Threads from /proc/self/status. */
static void status(long *hwm, long *rss, long *threads)
{
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  *hwm = *rss = *threads = -1;
  if (f == NULL) return;
  while (fgets(line, sizeof line, f) != NULL) {
    sscanf(line, "VmHWM: %ld", hwm);
    sscanf(line, "VmRSS: %ld", rss);
    sscanf(line, "Threads: %ld", threads);
  }
  fclose(f);
}

enum { R_ARENA, R_MI, R_ANON, R_UNW, R_GCC, R_LAZY, R_PROF, R_FILE, R_N };

/* Resident KiB per category, from /proc/self/smaps. */
static void smaps(long out[R_N])
{
  uintptr_t lo = (uintptr_t)4 << 30, hi = (uintptr_t)1 << 40;   /* the window arena.c places (64-bit) */
  memset(out, 0, R_N * sizeof out[0]);
  FILE *f = fopen("/proc/self/smaps", "r");
  if (f == NULL) return;
  char line[1024], path[512];
  int cat = R_ANON;
  while (fgets(line, sizeof line, f) != NULL) {
    uintptr_t a, b;
    long kib;
    path[0] = 0;
    if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %*s %*s %*s %*s %511s", &a, &b, path) >= 2 && strchr(line, '-') < strchr(line, ' ')) {
      if (a >= lo && b <= hi) cat = R_ARENA;
      else if (path[0] != '/') cat = a >= ((uintptr_t)2 << 40) && a < (uintptr_t)0x7f0000000000 ? R_MI : R_ANON;
      else if (strstr(path, "libunwind") != NULL || strstr(path, "liblzma") != NULL) cat = R_UNW;
      else if (strstr(path, "libgcc_s") != NULL) cat = R_GCC;
      else if (strstr(path, "/libm.so") != NULL || strstr(path, "/libz.so") != NULL ||
               strstr(path, "/libprotobuf-c.so") != NULL) cat = R_LAZY;
      else if (strstr(path, "libmimalloc-prof") != NULL) cat = R_PROF;
      else cat = R_FILE;
      continue;
    }
    if (sscanf(line, "Rss: %ld kB", &kib) == 1) out[cat] += kib;
  }
  fclose(f);
}

__attribute__((destructor)) static void report_end(void)
{
  if (getpid() != pid0) return;                      /* a forked child that exits reports nothing */
  typedef bool stats_t(mi_prof_stats_t *, size_t);
  stats_t *stats_fn = (stats_t *)dlsym(RTLD_DEFAULT, "mi_prof_stats");
  mi_prof_stats_t st;
  memset(&st, 0, sizeof st);
  if (stats_fn != NULL) stats_fn(&st, sizeof st);
  unsigned long long dropped = 0;
  for (int i = 0; i < MI_PROF_DROP_REASONS; i++) dropped += st.dropped[i];
  long hwm, rss, threads, r[R_N];
  status(&hwm, &rss, &threads);
  smaps(r);
  char line[1024];
  int len = snprintf(line, sizeof line,
                     "found=%d samples=%llu live_samples=%llu dropped=%llu slow_path_calls=%llu peak_live=%ld "
                     "peak_live_bytes=%lld profiler_bytes=%llu arena_bytes=%llu arena_resident_bytes=%llu "
                     "sampled_bytes=%llu hwm_kib=%ld rss_kib=%ld threads=%ld single_threaded=%d rss_arena_kib=%ld rss_mi_kib=%ld "
                     "rss_anon_kib=%ld rss_unw_kib=%ld rss_gcc_kib=%ld rss_lazy_kib=%ld rss_prof_kib=%ld rss_file_kib=%ld\n",
                     stats_fn != NULL, (unsigned long long)st.samples, (unsigned long long)st.live_samples, dropped,
                     (unsigned long long)st.slow_path_calls, peak, peak_bytes, (unsigned long long)st.profiler_bytes,
                     (unsigned long long)st.arena_bytes, (unsigned long long)st.arena_resident_bytes,
                     (unsigned long long)st.sampled_bytes, hwm, rss, threads, (int)__libc_single_threaded, r[R_ARENA], r[R_MI], r[R_ANON],
                     r[R_UNW], r[R_GCC], r[R_LAZY], r[R_PROF], r[R_FILE]);
  const char *path = getenv("STATS_REPORT_OUT");
  int fd = path != NULL ? open(path, O_WRONLY | O_CREAT | O_APPEND, 0644) : 2;
  if (fd >= 0 && len > 0) {
    ssize_t w = write(fd, line, (size_t)len);
    (void)w;
  }
  if (path != NULL && fd >= 0) close(fd);
}
