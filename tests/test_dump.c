/* test_dump.c - heap profile dumps (lib/dump.c, lib/profiler.c's triggers): catalogue D32 (triggers) and
 * D33 (leak report), dump errors, and dumps at a full profiler memory budget (C24's dump part).
 *
 * The triggers, the leak report and the budget depend on MIMALLOC_PROF_* options, read once at load, so
 * those tests run tests/pprof_probe in a subprocess with MIMALLOC_PROF_PREFIX in a temporary directory;
 * decoding and the rules of profile.proto are tests/pprof_util.c's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mimalloc-prof.h"
#include "pprof_util.h"

#if MPROF_PPROF

#define SEED 0x9a0f11eull

/* ---------------------------------------------------------------------------------------------------
   D32 triggers
--------------------------------------------------------------------------------------------------- */

/* MIMALLOC_PROF_FINAL=1: one file at exit, prof.<pid>.000000.f.pb.gz, holding what was live.  256 x 4 KiB
 * from alpha_site at rate 4096: p = 1 - e^-1 = 0.632, K binomial(256, p), E = 161.8, sigma = 7.7 = 4.8%;
 * alpha_site's estimate lies within 4 sigma = 19.1% of 1 MiB. */
START_TEST(dump_triggers_final)
{
  const char *dir = tmp_dir_make();
  char prefix[PATH_MAX];
  prefix_var(prefix, sizeof prefix, dir);
  const char *vars[] = {"MIMALLOC_PROF=1", "MIMALLOC_PROF_SAMPLE_RATE=4096", "MIMALLOC_PROF_SEED=32",
                        "MIMALLOC_PROF_FINAL=1", prefix, NULL};
  probe_run_t r = run_probe(vars, (const char *const[]){"shares", "256", "0", "4096", NULL});
  probe_assert_exit0(&r, NULL);
  ck_assert_str_eq(r.err, "");
  dump_file_t files[MAX_DUMPS];
  ck_assert_uint_eq(dumps_list(dir, r.pid, files), 1);
  ck_assert_int_eq(files[0].kind, 'f');
  profile_t *p = profile_load(files[0].path);
  ck_assert_int_eq(p->period, 4096);
  double alpha = (double)leaf_total(p, "alpha_site", V_INUSE_SPACE), want = 256.0 * 4096;
  ck_assert_double_le(fabs(alpha - want) / want, 0.191);
  test_profile_free(p);
  probe_run_free(&r);
}
END_TEST

/* The weight (estimated bytes) of one sampled s-byte block at rate R, rounded up: s / (1 - e^(-s/R)). */
static int64_t weight_bytes(double s, double rate) { return (int64_t)ceil(s / -expm1(-s / rate)) + 1; }

/* MIMALLOC_PROF_INTERVAL=8 MiB while 64 MiB of 4 KiB blocks are allocated and freed at rate 64 KiB, then
 * the probe's barrier (a signal dump, served after every request before it).  The files must be
 * i, ..., i, s with sequence numbers 0..n.
 * Count: a request goes out when the estimated allocated bytes A reach the threshold, which then moves
 * to A + N: the c-th request needs A >= c N, and each request overshoots its threshold by less than one
 * sample's weight w = 4096 / (1 - e^(-1/16)) = 67.6 KB, so c lies in [floor(A / (N + w)), floor(A / N)].
 * A is K w with K binomial(16384, 0.0606): E = 992.7, sigma = 30.5, 4 sigma: K in [870, 1115], A in
 * [58.8 MB, 75.4 MB], so c in [6, 8]; the probe's own start-up samples (a few, each under 70 KB) can add
 * one more: 6 <= c <= 9.  Requests that come while a profile is written are served by one profile
 * (lib/profiler.c), so there are 1 to c interval files; the k-th serves the k-th request or a later one,
 * so its alloc_space is at least k N (MIMALLOC_PROF_ACCUM=1: freed stacks are kept), and the last one
 * serves the c-th: at least 6 N. */
START_TEST(dump_triggers_interval)
{
  const char *dir = tmp_dir_make();
  char prefix[PATH_MAX];
  prefix_var(prefix, sizeof prefix, dir);
  const int64_t interval = 8 << 20;
  const char *vars[] = {"MIMALLOC_PROF=1", "MIMALLOC_PROF_SAMPLE_RATE=65536", "MIMALLOC_PROF_SEED=33",
                        "MIMALLOC_PROF_INTERVAL=8m", "MIMALLOC_PROF_SIGNAL=USR2", "MIMALLOC_PROF_ACCUM=1",
                        prefix, NULL};
  probe_run_t r = run_probe(vars, (const char *const[]){"phases", "churn:67108864", "barrier", NULL});
  probe_assert_exit0(&r, NULL);
  ck_assert_str_eq(r.err, "");
  ck_assert_ptr_nonnull(strstr(r.out, "allocations ok\n"));

  dump_file_t files[MAX_DUMPS];
  size_t n = dumps_list(dir, r.pid, files);
  char kinds[MAX_DUMPS + 1];
  dumps_kinds(files, n, kinds);
  ck_assert_uint_ge(n, 2);
  ck_assert_uint_le(n, 10);
  ck_assert_uint_eq(strspn(kinds, "i"), n - 1);
  ck_assert_int_eq(kinds[n - 1], 's');
  profile_t *last_i = profile_load(files[n - 2].path);   /* it served the c-th request, c >= 6 */
  int64_t last_sum[N_VALUES];
  profile_sums(last_i, last_sum);
  ck_assert_int_ge(last_sum[V_ALLOC_SPACE], 6 * interval);
  test_profile_free(last_i);
  int64_t last = 0;
  for (size_t i = 0; i < n; i++) {
    profile_t *p = profile_load(files[i].path);
    int64_t sum[N_VALUES];
    profile_sums(p, sum);
    if (files[i].kind == 'i') ck_assert_int_ge(sum[V_ALLOC_SPACE], (int64_t)(i + 1) * interval);
    ck_assert_int_ge(sum[V_ALLOC_SPACE], last);
    last = sum[V_ALLOC_SPACE];
    test_profile_free(p);
  }
  probe_run_free(&r);
}
END_TEST

/* The next threshold after a peak dump at in-use x (lib/dump.c, documented: a new peak must grow by at
 * least a tenth and by ten sample periods). */
static int64_t gdump_step(int64_t x, int64_t rate) { return x / 10 > 10 * rate ? x / 10 : 10 * rate; }

/* MIMALLOC_PROF_GDUMP=1 at rate 64 KiB: grow to 64 MiB of live 4 KiB blocks, barrier, free them all, grow
 * to 32 MiB (below the peak), barrier.  The files must be u, ..., u, s, s: no new peak in the second
 * growth.  Bounds without chance, from F = the in-use estimate at the first barrier (its s file):
 * the j-th peak dump fires at an estimate now_j > L_j, with L_1 = 10 R and L_(j+1) = L_j + step(L_j);
 * it fires as soon as the estimate passes the threshold, which each sample moves by at most w (the
 * weight of one 4 KiB sample), so now_j <= U_j with U_1 = 10 R + w, U_(j+1) = U_j + step(U_j) + w, and
 * request j must go out once F > U_j - w.  Requests that come while a profile is written are served by
 * one profile (lib/profiler.c): the k-th u file serves the k-th request or a later one and is written
 * while the heap only grows, so its inuse_space lies in (L_k, F]; the last serves the last request, at
 * least the c_min-th. */
START_TEST(dump_triggers_gdump)
{
  const char *dir = tmp_dir_make();
  char prefix[PATH_MAX];
  prefix_var(prefix, sizeof prefix, dir);
  const int64_t rate = 65536, w = weight_bytes(4096, (double)rate);
  const char *vars[] = {"MIMALLOC_PROF=1", "MIMALLOC_PROF_SAMPLE_RATE=65536", "MIMALLOC_PROF_SEED=34",
                        "MIMALLOC_PROF_GDUMP=1", "MIMALLOC_PROF_SIGNAL=USR2", "MIMALLOC_PROF_ACCUM=1", prefix,
                        NULL};
  probe_run_t r = run_probe(vars, (const char *const[]){"phases", "grow:67108864", "barrier", "free",
                                                         "grow:33554432", "barrier", NULL});
  probe_assert_exit0(&r, NULL);
  ck_assert_str_eq(r.err, "");

  dump_file_t files[MAX_DUMPS];
  size_t n = dumps_list(dir, r.pid, files);
  char kinds[MAX_DUMPS + 1];
  dumps_kinds(files, n, kinds);
  ck_assert_uint_ge(n, 3);
  size_t peaks = n - 2;
  ck_assert_uint_eq(strspn(kinds, "u"), peaks);
  ck_assert_str_eq(kinds + peaks, "ss");

  profile_t *p = profile_load(files[peaks].path);
  int64_t sum[N_VALUES];
  profile_sums(p, sum);
  const int64_t final_inuse = sum[V_INUSE_SPACE];
  test_profile_free(p);
  size_t c_min = 0, c_max = 0;
  int64_t last_sure = 0;                         /* L_j of the last request that surely went out */
  for (int64_t lo = 10 * rate, hi = 10 * rate + w; lo < final_inuse; lo += gdump_step(lo, rate)) {
    c_max++;
    if (final_inuse > hi - w) c_min++, last_sure = lo;
    hi += gdump_step(hi, rate) + w;
  }
  ck_assert_uint_ge(c_min, 20);                  /* F is near 64 MiB: the bound is not vacuous */
  ck_assert_uint_le(peaks, c_max);
  p = profile_load(files[peaks - 1].path);
  profile_sums(p, sum);
  ck_assert_int_gt(sum[V_INUSE_SPACE], last_sure);
  test_profile_free(p);

  int64_t lower = 10 * rate;
  for (size_t j = 0; j < peaks; j++) {
    p = profile_load(files[j].path);
    profile_sums(p, sum);
    ck_assert_int_gt(sum[V_INUSE_SPACE], lower);
    ck_assert_int_le(sum[V_INUSE_SPACE], final_inuse);
    lower += gdump_step(lower, rate);
    test_profile_free(p);
  }
  p = profile_load(files[peaks + 1].path);
  test_profile_free(p);
  probe_run_free(&r);
}
END_TEST

/* MIMALLOC_PROF_SIGNAL=USR2 while two threads allocate and free without pause: five signals, each sent
 * once the previous one's file is closed (inotify, watched before the probe starts), since a signal sent
 * while another is still pending would merge with it.  Every signal yields its own file, s with
 * sequence numbers 0..4; then stdin's end stops the threads and the final dump is number 5.  No sleeps:
 * each wait ends on an event the probe causes. */
START_TEST(dump_triggers_signal)
{
  const char *dir = tmp_dir_make();
  char prefix[PATH_MAX];
  prefix_var(prefix, sizeof prefix, dir);
  int watch = inotify_init1(IN_CLOEXEC);
  ck_assert_int_ge(watch, 0);
  ck_assert_int_ge(inotify_add_watch(watch, dir, IN_MOVED_TO), 0);
  const char *vars[] = {"MIMALLOC_PROF=1", "MIMALLOC_PROF_SAMPLE_RATE=65536", "MIMALLOC_PROF_SIGNAL=USR2",
                        "MIMALLOC_PROF_FINAL=1", prefix, NULL};
  probe_child_t c = start_probe(vars, (const char *const[]){"load", "2", NULL}, true);
  wait_ready(&c);
  enum { SIGNALS = 5 };
  for (int k = 0; k < SIGNALS; k++) {
    char name[128];
    snprintf(name, sizeof name, "prof.%d.%06d.s.pb.gz", (int)c.pid, k);
    ck_assert_int_eq(kill(c.pid, SIGUSR2), 0);
    wait_closed(watch, &c, name);
  }
  probe_run_t r = probe_finish(&c);
  close(watch);
  probe_assert_exit0(&r, NULL);
  ck_assert_str_eq(r.err, "");
  ck_assert_uint_gt(probe_value(&r, "rounds"), 0);

  dump_file_t files[MAX_DUMPS];
  ck_assert_uint_eq(dumps_list(dir, r.pid, files), SIGNALS + 1);
  char kinds[MAX_DUMPS + 1];
  dumps_kinds(files, SIGNALS + 1, kinds);
  ck_assert_str_eq(kinds, "sssssf");
  for (size_t i = 0; i < SIGNALS + 1; i++) {
    profile_t *p = profile_load(files[i].path);
    ck_assert_int_eq(p->period, 65536);
    test_profile_free(p);
  }
  probe_run_free(&r);
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   D33 leak_report
--------------------------------------------------------------------------------------------------- */

/* MIMALLOC_PROF_LEAK=1: at exit, stderr gets the report header and the top in-use sites, each frame
 * named by dladdr (the probe is linked with -export-dynamic).  The probe leaks 1000 x 1000 B from
 * leaky_function and frees 4000 more at once from churn_site.  At rate 4096 (seed fixed): p = 1 -
 * e^(-1000/4096) = 0.2166, K binomial(1000, p), E = 216.6, sigma = 13.0 = 6.0%: the top site's bytes
 * lie within 4 sigma = 24.1% of 1000000; its object count likewise of 1000. */
START_TEST(dump_leak_report)
{
  const char *vars[] = {"MIMALLOC_PROF=1", "MIMALLOC_PROF_SAMPLE_RATE=4096", "MIMALLOC_PROF_SEED=35",
                        "MIMALLOC_PROF_LEAK=1", NULL};
  probe_run_t r = run_probe(vars, (const char *const[]){"leak", "1000", "1000", NULL});
  probe_assert_exit0(&r, NULL);
  ck_assert_uint_eq(probe_value(&r, "leaked"), 1000);
  static const char head[] = "mimalloc-prof: leak report: about ";
  ck_assert_msg(strncmp(r.err, head, sizeof head - 1) == 0, "stderr:\n%s", r.err);
  ck_assert_ptr_null(strstr(r.err + 1, head));                       /* one report */
  unsigned long long total = strtoull(r.err + sizeof head - 1, NULL, 10);

  const char *site = strchr(r.err, '\n');
  ck_assert_ptr_nonnull(site);
  unsigned long long bytes = 0, objects = 0;
  int used = 0;
  ck_assert_msg(sscanf(site + 1, "  %llu bytes in %llu objects allocated at:%n", &bytes, &objects, &used) == 2 &&
                used > 0, "stderr:\n%s", r.err);
  const char *frame0 = strchr(site + 1, '\n');
  ck_assert_ptr_nonnull(frame0);
  ck_assert_msg(strncmp(frame0 + 1, "    #0 0x", 9) == 0, "stderr:\n%s", r.err);
  const char *frame0_end = strchr(frame0 + 1, '\n');
  ck_assert_ptr_nonnull(frame0_end);
  ck_assert_msg(memmem(frame0 + 1, (size_t)(frame0_end - frame0 - 1), "(leaky_function+0x", 18) != NULL,
                "the top site's first frame is not leaky_function; stderr:\n%s", r.err);
  ck_assert_ptr_null(strstr(r.err, "churn_site"));
  ck_assert_double_le(fabs((double)bytes - 1e6) / 1e6, 0.241);
  ck_assert_double_le(fabs((double)objects - 1e3) / 1e3, 0.241);
  ck_assert_uint_ge(total, bytes);
  probe_run_free(&r);
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   Dump errors
--------------------------------------------------------------------------------------------------- */

static void *err_blocks[100];

static bool blocks_intact(void)
{
  for (size_t i = 0; i < 100; i++) {
    const unsigned char *b = err_blocks[i];
    if (b == NULL || b[0] != 0x3c || b[999] != 0x3c) return false;
  }
  return true;
}

/* A dump that cannot be written fails with the errno of open(2)/write(2), leaves no file and changes
 * nothing else: the stats, the program's blocks and further allocations are as before.  EACCES needs a
 * directory we may not write: a 0500 one, entered as nobody when running as root (the test process is
 * Check's own fork, so changing its effective uid touches nothing else). */
START_TEST(dump_errors)
{
  const char *dir = tmp_dir_make();
  char missing[PATH_MAX], locked_dir[PATH_MAX], locked[PATH_MAX];
  snprintf(missing, sizeof missing, "%s/missing/x.pb.gz", dir);
  snprintf(locked_dir, sizeof locked_dir, "%s/locked", dir);
  snprintf(locked, sizeof locked, "%s/x.pb.gz", locked_dir);
  ck_assert_int_eq(mkdir(locked_dir, 0500), 0);
  int ro = open("/dev/null", O_RDONLY | O_CLOEXEC), full = open("/dev/full", O_WRONLY | O_CLOEXEC);
  int pipe_fds[2];
  ck_assert_int_eq(pipe2(pipe_fds, O_CLOEXEC), 0);
  close(pipe_fds[0]);
  signal(SIGPIPE, SIG_DFL);            /* EPIPE, not death: the dump blocks SIGPIPE and takes back its own */
  bool root = geteuid() == 0;

  bool started = mi_prof_start_seeded(4096, SEED);
  alloc_into(err_blocks, 100, 1000);
  mi_prof_stats_t before, after;
  mi_prof_stats(&before, sizeof before);
  struct { bool ok; int err; } res[6];
  errno = 0, res[0].ok = mi_prof_dump(missing), res[0].err = errno;
  bool locked_out = !root || seteuid(65534) == 0;     /* false: root that cannot drop privileges */
  if (locked_out) errno = 0, res[1].ok = mi_prof_dump(locked), res[1].err = errno;
  bool back = !root || !locked_out || seteuid(0) == 0;
  errno = 0, res[2].ok = mi_prof_dump_fd(-1), res[2].err = errno;
  errno = 0, res[3].ok = mi_prof_dump_fd(ro), res[3].err = errno;
  errno = 0, res[4].ok = mi_prof_dump_fd(full), res[4].err = errno;
  errno = 0, res[5].ok = mi_prof_dump_fd(pipe_fds[1]), res[5].err = errno;
  mi_prof_stats(&after, sizeof after);
  bool intact = blocks_intact();

  ck_assert(started);
  ck_assert(back);
  static const int want[6] = {ENOENT, EACCES, EBADF, EBADF, ENOSPC, EPIPE};
  for (size_t i = 0; i < 6; i++) {
    if ((i == 1 && !locked_out) || (i == 4 && full < 0)) continue;   /* no way to be refused; no /dev/full */
    ck_assert_msg(!res[i].ok && res[i].err == want[i], "case %zu: ok %d errno %d, want %d", i, res[i].ok,
                  res[i].err, want[i]);
  }
  sigset_t pending;
  ck_assert_int_eq(sigpending(&pending), 0);
  ck_assert_int_eq(sigismember(&pending, SIGPIPE), 0);
  ck_assert_int_eq(access(missing, F_OK), -1);
  ck_assert_int_eq(access(locked, F_OK), -1);
  ck_assert_uint_eq(after.samples, before.samples);
  ck_assert_uint_eq(after.live_samples, before.live_samples);
  ck_assert_uint_eq(after.inuse_bytes, before.inuse_bytes);
  ck_assert(intact);
  void *more[100];
  alloc_into(more, 100, 1000);
  for (size_t i = 0; i < 100; i++) ck_assert_ptr_nonnull(more[i]);
  free_all(more, 100);
  free_all(err_blocks, 100);
  ck_assert(mi_prof_stop());
  close(ro);
  close(full);
  close(pipe_fds[1]);
}
END_TEST

/* A thread cancelled while its dump is blocked in write(2) on a pipe (pprof_probe cancel): cancellation
 * is off inside a dump (open, write and close are cancellation points; cancelled there, the thread left
 * dump_lock held and every later dump hung), so the dump finishes once the pipe is drained, the thread
 * ends at its next cancellation point, and a later dump works. */
START_TEST(dump_cancelled_thread)
{
  probe_run_t r = run_probe((const char *const[]){NULL}, (const char *const[]){"cancel", NULL});
  probe_assert_exit0(&r, NULL);
  ck_assert_str_eq(r.err, "");
  ck_assert_uint_eq(probe_value(&r, "cancelled"), 1);
  ck_assert_uint_eq(probe_value(&r, "dump_after"), 1);
  probe_run_free(&r);
}
END_TEST

/* A failed dump removes only a file it made: /dev/full existed before, so after the write fails (ENOSPC)
 * it must still be the device.  (Removing the path after a failure would, for root, delete /dev/full
 * itself, or /dev/stdout, when named directly.)  A symbolic link to it is not followed at all (ELOOP)
 * and stays. */
START_TEST(dump_error_keeps_existing_path)
{
  if (access("/dev/full", W_OK) != 0) return;          /* no /dev/full: nothing to check */
  char link[PATH_MAX];
  snprintf(link, sizeof link, "%s/full", tmp_dir_make());
  ck_assert_int_eq(symlink("/dev/full", link), 0);
  errno = 0;
  bool ok = mi_prof_dump("/dev/full");
  int err = errno;
  errno = 0;
  bool ok_link = mi_prof_dump(link);
  int err_link = errno;
  struct stat st, lst;
  bool kept = stat("/dev/full", &st) == 0 && S_ISCHR(st.st_mode);
  bool kept_link = lstat(link, &lst) == 0 && S_ISLNK(lst.st_mode);
  ck_assert(!ok);
  ck_assert_int_eq(err, ENOSPC);
  ck_assert_msg(kept, "mi_prof_dump removed /dev/full, which it did not create");
  ck_assert(!ok_link);
  ck_assert_int_eq(err_link, ELOOP);
  ck_assert_msg(kept_link, "mi_prof_dump removed %s, a symbolic link to /dev/full it did not create", link);
}
END_TEST

/* Automatic dumps to a prefix in a missing directory: every interval dump (16 MiB allocated, interval
 * 1 MiB) and the final one fail; the library says so in exactly one warning line and the program runs
 * to its end and exits 0. */
START_TEST(dump_errors_automatic)
{
  const char *dir = tmp_dir_make();
  char prefix[PATH_MAX], want[PATH_MAX + 64];
  set_var(prefix, sizeof prefix, "MIMALLOC_PROF_PREFIX", dir);
  strcat(prefix, "/missing/prof");
  const char *vars[] = {"MIMALLOC_PROF=1", "MIMALLOC_PROF_SAMPLE_RATE=65536", "MIMALLOC_PROF_INTERVAL=1m",
                        "MIMALLOC_PROF_FINAL=1", prefix, NULL};
  probe_run_t r = run_probe(vars, (const char *const[]){"phases", "churn:16777216", NULL});
  probe_assert_exit0(&r, NULL);
  ck_assert_ptr_nonnull(strstr(r.out, "allocations ok\n"));
  snprintf(want, sizeof want, "mimalloc-prof: warning: cannot write heap profile %s/missing/prof.%d.", dir,
           (int)r.pid);
  ck_assert_msg(probe_count_lines(r.err) == 1 && strncmp(r.err, want, strlen(want)) == 0 &&
                strstr(r.err, "ENOENT"), "stderr:\n%s", r.err);
  dump_file_t files[MAX_DUMPS];
  ck_assert_uint_eq(dumps_list(dir, r.pid, files), 0);
  probe_run_free(&r);
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   Budget
--------------------------------------------------------------------------------------------------- */

/* MIMALLOC_PROF_MAX_BYTES=8m, rate 1, 100000 live 64-byte blocks: their records want about 16 MiB, so
 * samples are dropped.  On 32-bit platforms 2m: there the arena's 1 GiB holds about 31,000 small sampled
 * blocks (a 32 KiB slice each), whose records take well under 8 MiB, and the budget must fill first.  A
 * dump while running needs memory from the same budget, which the tables keep free for it (lib/pmem.c):
 * it succeeds, its comment reports the drops and it holds every recorded sample.  After mi_prof_stop the
 * records are kept: the dump succeeds too, with the same sums (nothing is allocated in between), and its
 * comment still reports the session's drops. */
START_TEST(dump_budget_dropped)
{
  const char *dir = tmp_dir_make();
  char running[PATH_MAX], stopped[PATH_MAX];
  snprintf(running, sizeof running, "%s/running.pb.gz", dir);
  snprintf(stopped, sizeof stopped, "%s/stopped.pb.gz", dir);
  const uint64_t budget = sizeof(void *) == 8 ? 8u << 20 : 2u << 20;
  probe_run_t r = run_probe((const char *const[]){sizeof(void *) == 8 ? "MIMALLOC_PROF_MAX_BYTES=8m"
                                                                      : "MIMALLOC_PROF_MAX_BYTES=2m", NULL},
                            (const char *const[]){"budget", "100000", "64", running, stopped, NULL});
  probe_assert_exit0(&r, NULL);
  uint64_t dropped = probe_value(&r, "dropped_memory"), samples = probe_value(&r, "samples");
  ck_assert_uint_eq(probe_value(&r, "bad_blocks"), 0);
  ck_assert_uint_gt(dropped, 0);
  ck_assert_uint_eq(samples, 100000);                        /* dropped ones included, weight kept */
  ck_assert_uint_le(dropped, samples);
  ck_assert_uint_le(probe_value(&r, "profiler_bytes"), budget);
  ck_assert_msg(probe_count_lines(r.err) == 1 && strstr(r.err, "dropping samples") != NULL, "stderr:\n%s", r.err);

  ck_assert_msg(probe_value(&r, "dump_running") == 1, "dump while running: errno %" PRIu64,
                probe_value(&r, "dump_running_errno"));
  profile_t *p = profile_load(running);
  ck_assert_uint_eq(comment_number(p, "dropped samples:", "memory"), dropped);
  ck_assert_uint_ge(comment_number(p, "dropped samples:", "total"), dropped);
  int64_t sum[N_VALUES];
  profile_sums(p, sum);
  /* At rate 1 a 64-byte block stands for exactly one object: every sample is in alloc_objects (those
   * without a record under "[mimalloc-prof: dropped (memory)]"), the recorded ones in inuse_objects. */
  ck_assert_int_eq(sum[V_ALLOC_OBJECTS], (int64_t)samples);
  ck_assert_int_le(sum[V_INUSE_OBJECTS], (int64_t)samples);
  test_profile_free(p);
  ck_assert_uint_eq(probe_value(&r, "dump_stopped"), 1);
  p = profile_load(stopped);
  int64_t kept[N_VALUES];
  profile_sums(p, kept);
  for (int v = 0; v < N_VALUES; v++) ck_assert_int_eq(kept[v], sum[v]);
  ck_assert_uint_eq(comment_number(p, "dropped samples:", "memory"), dropped);
  test_profile_free(p);
  probe_run_free(&r);
}
END_TEST

/* Full budget: MIMALLOC_PROF_MAX_BYTES=1m, rate 1 (every block of 64..1087 bytes is sampled: P(an interval
 * exceeds 64 bytes) = e^-64, and each sample stands for exactly its own size and one object), 50000
 * blocks through 50000 distinct stacks kept live, MIMALLOC_PROF_FINAL=1 and MIMALLOC_PROF_LEAK=1.  The
 * tables fill the budget (samples dropped for memory), yet the final profile comes out complete: its sums
 * are the stats the probe printed right before exit (nothing is allocated in between), every recorded
 * stack is a sample, the dropped samples are counted under "[mimalloc-prof: dropped (memory)]", its
 * comment counts the drops; then the leak report, with the same in-use total.  The only warning line is
 * the first drop's. */
START_TEST(dump_budget_full_final)
{
  const char *dir = tmp_dir_make();
  char prefix[PATH_MAX];
  prefix_var(prefix, sizeof prefix, dir);
  const char *vars[] = {"MIMALLOC_PROF=1", "MIMALLOC_PROF_SAMPLE_RATE=1", "MIMALLOC_PROF_MAX_BYTES=1m",
                        "MIMALLOC_PROF_FINAL=1", "MIMALLOC_PROF_LEAK=1", prefix, NULL};
  probe_run_t r = run_probe(vars, (const char *const[]){"distinct", "50000", "64", NULL});
  probe_assert_exit0(&r, NULL);
  uint64_t dropped = probe_value(&r, "dropped_memory"), live = probe_value(&r, "live");
  ck_assert_uint_gt(dropped, 0);
  ck_assert_uint_gt(live, 0);
  ck_assert_uint_eq(probe_value(&r, "profiler_bytes_max"), 1u << 20);
  ck_assert_uint_le(probe_value(&r, "profiler_bytes"), 1u << 20);

  dump_file_t files[MAX_DUMPS];
  ck_assert_uint_eq(dumps_list(dir, r.pid, files), 1);
  ck_assert_int_eq(files[0].kind, 'f');
  profile_t *p = profile_load(files[0].path);
  int64_t sum[N_VALUES];
  profile_sums(p, sum);
  ck_assert_uint_eq((uint64_t)sum[V_INUSE_SPACE], probe_value(&r, "inuse_bytes"));
  ck_assert_uint_eq((uint64_t)sum[V_ALLOC_SPACE], probe_value(&r, "alloc_bytes"));
  ck_assert_uint_eq((uint64_t)sum[V_INUSE_OBJECTS], probe_value(&r, "inuse_objects"));
  /* The live records with a stack of their own are samples (the probe's own start-up blocks share stacks;
   * the walks' do not); the others are one sample, the dropped location's. */
  size_t at_dropped = 0;
  for (size_t i = 0; i < p->n_sample; i++)
    at_dropped += strcmp(location_name(p, sample_leaf(p, p->sample[i])), DROPPED_PREFIX "memory)]") == 0;
  uint64_t own_live = live - (uint64_t)leaf_total(p, DROPPED_PREFIX "memory)]", V_INUSE_OBJECTS);
  ck_assert_uint_ge(p->n_sample - at_dropped, own_live / 2);
  ck_assert_uint_ge(own_live, 100);
  ck_assert_uint_eq(comment_number(p, "dropped samples:", "memory"), dropped);
  ck_assert_uint_eq(comment_number(p, "samples=", "live"), live);
  /* The samples dropped for memory keep their weight, under their own location (one object each). */
  ck_assert_uint_eq((uint64_t)leaf_total(p, DROPPED_PREFIX "memory)]", V_ALLOC_OBJECTS), dropped);
  test_profile_free(p);

  char head[160];
  snprintf(head, sizeof head, "mimalloc-prof: leak report: about %" PRIu64 " bytes in ",
           probe_value(&r, "inuse_bytes"));
  const char *report = strstr(r.err, head);
  ck_assert_msg(report != NULL, "no leak report with the in-use total; stderr:\n%s", r.err);
  char live_text[64];
  snprintf(live_text, sizeof live_text, "(estimated from %" PRIu64 " live samples)", live);
  ck_assert_ptr_nonnull(strstr(report, live_text));
  ck_assert_msg(strncmp(r.err, "mimalloc-prof: warning: dropping samples: profiler memory budget "
                               "(MIMALLOC_PROF_MAX_BYTES)", 89) == 0 && report == strchr(r.err, '\n') + 1,
                "stderr:\n%s", r.err);
  probe_run_free(&r);
}
END_TEST

Suite *dump_suite(void)
{
  Suite *s = suite_create("dump");
  TCase *tc = tcase_create("dump");
  tcase_set_timeout(tc, 120);
  tcase_add_unchecked_fixture(tc, run_dir_setup, run_dir_teardown);
  tcase_add_test(tc, dump_triggers_final);
  tcase_add_test(tc, dump_triggers_interval);
  tcase_add_test(tc, dump_triggers_gdump);
  tcase_add_test(tc, dump_triggers_signal);
  tcase_add_test(tc, dump_leak_report);
  tcase_add_test(tc, dump_errors);
  tcase_add_test(tc, dump_cancelled_thread);
  tcase_add_test(tc, dump_error_keeps_existing_path);
  tcase_add_test(tc, dump_errors_automatic);
  tcase_add_test(tc, dump_budget_dropped);
  tcase_add_test(tc, dump_budget_full_final);
  suite_add_tcase(s, tc);
  return s;
}

#endif
