/* test_profiler.c - the profiler thread (lib/profiler.c) and what it must never do: exist without a
 * trigger, allocate, deadlock with the dynamic loader; and MIMALLOC_PROF_FINAL_SIGNALS.
 *
 * Every test runs tests/pprof_probe in a subprocess (the options are read at load) and waits only for
 * events the probe causes: a line on its stdout, a file renamed into place (inotify), data in a FIFO,
 * its exit.  A hang would end at the probe's watchdog (alarm) and fail the test.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mimalloc-prof.h"
#include "pprof_util.h"

#if MPROF_PPROF

#define WATCHDOG_S 60                        /* a probe still running after this long has hung */

static probe_child_t start_watched(const char *const *vars, const char *const *args)
{
  probe_opts_t opts = {.env = vars, .with_stdin = true, .watchdog_s = WATCHDOG_S};
  return probe_start(probe_getenv("MPROF_TEST_PPROF_PROBE"), args, &opts);
}

static probe_run_t run_watched(const char *const *vars, const char *const *args)
{
  probe_opts_t opts = {.env = vars, .watchdog_s = WATCHDOG_S};
  return probe_run(probe_getenv("MPROF_TEST_PPROF_PROBE"), args, &opts);
}

/* Asserts that the probe was killed by `sig`. */
static void assert_killed_by(const probe_run_t *r, int sig)
{
  ck_assert_msg(WIFSIGNALED(r->status) && WTERMSIG(r->status) == sig,
                "want the probe killed by signal %d; status %#x\nstdout:\n%s\nstderr:\n%s", sig, r->status, r->out,
                r->err);
}

/* ---------------------------------------------------------------------------------------------------
   The thread
--------------------------------------------------------------------------------------------------- */

typedef struct threads_s {
  unsigned total, profiler;                  /* all threads; named mimalloc-prof */
  uint64_t profiler_blocked;                 /* the profiler thread's SigBlk */
} threads_t;

/* The "Name:" (comm) and one hexadecimal "Key:" mask of a /proc status file. */
static void proc_status(const char *path, char *comm, size_t len, const char *key, uint64_t *mask)
{
  char line[256];
  FILE *f = fopen(path, "re");
  ck_assert_ptr_nonnull(f);
  comm[0] = '\0';
  *mask = 0;
  while (fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, "Name:\t", 6) == 0) snprintf(comm, len, "%.*s", (int)strcspn(line + 6, "\n"), line + 6);
    if (strncmp(line, key, strlen(key)) == 0) *mask = strtoull(line + strlen(key), NULL, 16);
  }
  fclose(f);
}

static threads_t threads_of(pid_t pid)
{
  threads_t t = {0};
  char dir[64];
  snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
  DIR *d = opendir(dir);
  ck_assert_ptr_nonnull(d);
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.') continue;
    char comm[32], path[128];
    uint64_t blocked;
    snprintf(path, sizeof path, "/proc/%d/task/%s/status", (int)pid, e->d_name);
    proc_status(path, comm, sizeof comm, "SigBlk:", &blocked);
    t.total++;
    if (strcmp(comm, "mimalloc-prof") == 0) t.profiler++, t.profiler_blocked = blocked;
  }
  closedir(d);
  return t;
}

static uint64_t bit(int sig) { return (uint64_t)1 << (sig - 1); }

/* The reason to skip a test that reads a probe's threads or signal dispositions in /proc. */
#define EMULATED_PROC "the probe runs under an emulator (qemu-user): /proc/PID shows the emulator's threads " \
                      "and signal dispositions, not the program's"

/* A program with a session, a final profile and a leak report but no trigger that needs the thread stays
 * single-threaded.  With
 * MIMALLOC_PROF_SIGNAL alone (no session) there is exactly one more thread, the profiler's, named
 * mimalloc-prof, with the program's signals blocked (glibc keeps its two internal ones). */
START_TEST(profiler_thread_only_when_needed)
{
  const char *quiet[] = {"MIMALLOC_PROF=1", "MIMALLOC_PROF_FINAL=1", "MIMALLOC_PROF_LEAK=1",
                         "MIMALLOC_PROF_PREFIX=/nonexistent/prof", NULL};
  probe_child_t c = start_watched(quiet, (const char *const[]){"idle", NULL});
  wait_ready(&c);
  if (probe_emulated(c.pid)) {
    probe_run_t r = probe_finish(&c);
    probe_run_free(&r);
    MPROF_TEST_SKIP(EMULATED_PROC);
  }
  threads_t t = threads_of(c.pid);
  probe_run_t r = probe_finish(&c);
  probe_assert_exit0(&r, NULL);
  ck_assert_uint_eq(t.profiler, 0);
  ck_assert_uint_eq(t.total, 1);
  probe_run_free(&r);

  const char *signal_only[] = {"MIMALLOC_PROF_SIGNAL=USR2", NULL};
  c = start_watched(signal_only, (const char *const[]){"idle", NULL});
  wait_ready(&c);
  t = threads_of(c.pid);
  r = probe_finish(&c);
  probe_assert_exit0(&r, NULL);
  ck_assert_uint_eq(t.profiler, 1);
  ck_assert_uint_eq(t.total, 2);
  uint64_t want = bit(SIGUSR2) | bit(SIGTERM) | bit(SIGINT) | bit(SIGHUP) | bit(SIGCHLD) | bit(SIGPIPE);
  ck_assert_msg((t.profiler_blocked & want) == want, "SigBlk %#" PRIx64, t.profiler_blocked);
  probe_run_free(&r);
}
END_TEST

/* The profiler thread never calls malloc: tests/nomalloc_shim.so, preloaded in front of the
 * library, aborts the process when the thread named mimalloc-prof calls any allocation function.  First
 * its control: a thread of the probe named so that mallocs is stopped (SIGABRT, the shim's line).  Then a
 * run where that thread writes every kind of profile it writes: interval and peak profiles of 5000
 * distinct stacks and a churn, a signal profile, and the final profile and leak report on SIGTERM
 * (MIMALLOC_PROF_FINAL_SIGNALS), after which SIGTERM ends the probe.  (At rate 16 KiB about 24 MiB
 * allocated give 6 interval and under 30 peak profiles: under the 64 files dumps_list takes.) */
START_TEST(profiler_never_mallocs)
{
  char preload[PATH_MAX];
  set_var(preload, sizeof preload, "LD_PRELOAD", probe_getenv("MPROF_TEST_NOMALLOC_SHIM"));
  probe_run_t control =
    run_watched((const char *const[]){preload, NULL}, (const char *const[]){"named_malloc", NULL});
  assert_killed_by(&control, SIGABRT);
  ck_assert_msg(strstr(control.err, "nomalloc_shim: malloc called on the profiler thread") != NULL, "stderr:\n%s",
                control.err);
  probe_run_free(&control);

  const char *dir = tmp_dir_make();
  char prefix[PATH_MAX];
  prefix_var(prefix, sizeof prefix, dir);
  const char *vars[] = {preload, "MIMALLOC_PROF=1", "MIMALLOC_PROF_SAMPLE_RATE=16384", "MIMALLOC_PROF_INTERVAL=4m",
                        "MIMALLOC_PROF_GDUMP=1", "MIMALLOC_PROF_SIGNAL=USR2", "MIMALLOC_PROF_FINAL_SIGNALS=TERM",
                        "MIMALLOC_PROF_LEAK=1", prefix, NULL};
  probe_run_t r = run_watched(vars, (const char *const[]){"phases", "distinct:5000", "churn:16777216",
                                                          "grow:8388608", "barrier", "term", NULL});
  assert_killed_by(&r, SIGTERM);
  ck_assert_msg(strstr(r.err, "nomalloc_shim: ") == NULL, "stderr:\n%s", r.err);
  ck_assert_ptr_nonnull(strstr(r.err, "mimalloc-prof: leak report: "));
  dump_file_t files[MAX_DUMPS];
  size_t n = dumps_list(dir, r.pid, files);
  char kinds[MAX_DUMPS + 1];
  dumps_kinds(files, n, kinds);
  ck_assert_msg(strchr(kinds, 'i') && strchr(kinds, 'u') && strchr(kinds, 's') && kinds[n - 1] == 'f',
                "kinds %s", kinds);
  for (size_t i = 0; i < n; i++) test_profile_free(profile_load(files[i].path));
  probe_run_free(&r);
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   MIMALLOC_PROF_FINAL_SIGNALS
--------------------------------------------------------------------------------------------------- */

/* Each of TERM, INT and HUP, sent to a program that allocates on two threads and has no handler of its
 * own (and never ends by itself): the final profile is written (complete, renamed into place), the leak
 * report printed, and the signal's default action then ends the program, killed by that signal. */
START_TEST(profiler_final_signals)
{
  static const int sigs[] = {SIGTERM, SIGINT, SIGHUP};
  for (size_t k = 0; k < sizeof sigs / sizeof sigs[0]; k++) {
    const char *dir = tmp_dir_make();
    char prefix[PATH_MAX];
    prefix_var(prefix, sizeof prefix, dir);
    const char *vars[] = {"MIMALLOC_PROF=1", "MIMALLOC_PROF_SAMPLE_RATE=65536",
                          "MIMALLOC_PROF_FINAL_SIGNALS=TERM,INT,HUP", "MIMALLOC_PROF_LEAK=1", prefix, NULL};
    probe_child_t c = start_watched(vars, (const char *const[]){"load", "2", "forever", NULL});
    wait_ready(&c);
    ck_assert_int_eq(kill(c.pid, sigs[k]), 0);
    probe_run_t r = probe_finish(&c);
    assert_killed_by(&r, sigs[k]);
    ck_assert_msg(strncmp(r.err, "mimalloc-prof: leak report: ", 28) == 0, "stderr:\n%s", r.err);
    dump_file_t files[MAX_DUMPS];
    ck_assert_uint_eq(dumps_list(dir, r.pid, files), 1);
    ck_assert_int_eq(files[0].kind, 'f');
    profile_t *p = profile_load(files[0].path);
    ck_assert_int_eq(p->period, 65536);
    test_profile_free(p);
    probe_run_free(&r);
  }
}
END_TEST

/* SIGTERM while interval profiles are due faster than they are written (rate 4 KiB, an interval of 16
 * samples' worth, two threads allocating without pause): the final profile comes after one round at most.
 * Requests were served one by one, interval first, and the program ignored SIGTERM for as long as it
 * allocated (it was killed by this test's watchdog).  The test waits until the third interval profile is
 * in place, so the profiles are being written back to back when the signal comes; KEEP=4 bounds the
 * files.  Ends killed by SIGTERM, with a final profile. */
START_TEST(profiler_final_signal_amid_intervals)
{
  const char *dir = tmp_dir_make();
  char prefix[PATH_MAX], name[128];
  prefix_var(prefix, sizeof prefix, dir);
  int watch = inotify_init1(IN_CLOEXEC);
  ck_assert_int_ge(watch, 0);
  ck_assert_int_ge(inotify_add_watch(watch, dir, IN_MOVED_TO), 0);
  const char *vars[] = {"MIMALLOC_PROF=1", "MIMALLOC_PROF_SAMPLE_RATE=4096", "MIMALLOC_PROF_INTERVAL=64k",
                        "MIMALLOC_PROF_KEEP=4", "MIMALLOC_PROF_FINAL_SIGNALS=TERM", prefix, NULL};
  probe_child_t c = start_watched(vars, (const char *const[]){"load", "2", "forever", NULL});
  wait_ready(&c);
  snprintf(name, sizeof name, "prof.%d.000002.i.pb.gz", (int)c.pid);
  wait_closed(watch, &c, name);
  close(watch);
  ck_assert_int_eq(kill(c.pid, SIGTERM), 0);
  probe_run_t r = probe_finish(&c);
  assert_killed_by(&r, SIGTERM);
  /* KEEP removed the earlier interval profiles: the sequence numbers have gaps, so no dumps_list. */
  char final[PATH_MAX] = "";
  size_t files = 0;
  DIR *d = opendir(dir);
  ck_assert_ptr_nonnull(d);
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.') continue;
    files++;
    if (ends_with(e->d_name, ".f.pb.gz")) snprintf(final, sizeof final, "%s/%s", dir, e->d_name);
  }
  closedir(d);
  ck_assert_msg(final[0] != '\0', "no final profile among %zu files", files);
  ck_assert_uint_le(files, 4 + 1);
  test_profile_free(profile_load(final));
  probe_run_free(&r);
}
END_TEST

/* A program that installs its own SIGTERM handler keeps it.  Replacing the library's: the program's
 * handler runs, the program ends as it decides (exit 0), no profile.  Calling the library's from its own
 * (chaining): the final profile is written, and the program still decides (exit 0, its handler ran). */
START_TEST(profiler_final_signal_own_handler)
{
  static const char *const how[] = {"replace", "chain"};
  for (size_t k = 0; k < 2; k++) {
    const char *dir = tmp_dir_make();
    char prefix[PATH_MAX];
    prefix_var(prefix, sizeof prefix, dir);
    const char *vars[] = {"MIMALLOC_PROF=1", "MIMALLOC_PROF_FINAL_SIGNALS=TERM", prefix, NULL};
    probe_child_t c = start_watched(vars, (const char *const[]){"own_term", how[k], NULL});
    wait_ready(&c);
    ck_assert_int_eq(kill(c.pid, SIGTERM), 0);
    probe_run_t r = probe_finish(&c);
    probe_assert_exit0(&r, how[k]);
    ck_assert_uint_eq(probe_value(&r, "handled"), 1);
    ck_assert_str_eq(r.err, "");
    dump_file_t files[MAX_DUMPS];
    ck_assert_uint_eq(dumps_list(dir, r.pid, files), k);
    if (k == 1) test_profile_free(profile_load(files[0].path));
    probe_run_free(&r);
  }
}
END_TEST

/* A signal ignored when the program starts (as a shell does for the jobs it puts in the background) stays
 * ignored: with FINAL_SIGNALS=INT,TERM and SIGINT ignored, /proc shows INT still ignored and TERM caught. */
START_TEST(profiler_final_signal_keeps_ignored)
{
  const char *vars[] = {"MIMALLOC_PROF=1", "MIMALLOC_PROF_FINAL_SIGNALS=INT,TERM", NULL};
  const char *args[] = {"-c", "trap '' INT; exec \"$0\" idle", probe_getenv("MPROF_TEST_PPROF_PROBE"), NULL};
  probe_opts_t opts = {.env = vars, .with_stdin = true, .watchdog_s = WATCHDOG_S};
  probe_child_t c = probe_start("/bin/sh", args, &opts);
  wait_ready(&c);
  if (probe_emulated(c.pid)) {
    probe_run_t r = probe_finish(&c);
    probe_run_free(&r);
    MPROF_TEST_SKIP(EMULATED_PROC);
  }
  char comm[32], path[64];
  uint64_t ignored, caught;
  snprintf(path, sizeof path, "/proc/%d/status", (int)c.pid);
  proc_status(path, comm, sizeof comm, "SigIgn:", &ignored);
  proc_status(path, comm, sizeof comm, "SigCgt:", &caught);
  probe_run_t r = probe_finish(&c);
  probe_assert_exit0(&r, NULL);
  ck_assert_msg(ignored & bit(SIGINT), "SigIgn %#" PRIx64, ignored);
  ck_assert_msg(caught & bit(SIGTERM), "SigCgt %#" PRIx64, caught);
  ck_assert_msg(!(caught & bit(SIGINT)), "SigCgt %#" PRIx64, caught);
  probe_run_free(&r);
}
END_TEST

/* Waits for data in `fd` while the probe lives (its stdout's end means it died first). */
static void wait_data(int fd, const probe_child_t *c)
{
  for (;;) {
    struct pollfd pf[2] = {{.fd = fd, .events = POLLIN}, {.fd = c->out, .events = POLLIN}};
    int rc = poll(pf, 2, -1);
    if (rc < 0 && errno == EINTR) continue;
    ck_assert_int_gt(rc, 0);
    ck_assert_msg(pf[1].revents == 0, "the probe ended (or wrote) before the dump began");
    if (pf[0].revents & POLLIN) return;
  }
}

/* The same signal twice while the final profile is being written (sent to the process group and
 * forwarded by a wrapper, say): the second is held until the profile is written; a third takes effect at
 * once.  The final profile goes to a FIFO with a 4 KiB buffer (tests/dump_shim gives the library the FIFO
 * for its temporary file), so the dump of 4096 distinct stacks (far more than 4 KiB compressed) stays
 * blocked in write(2) until the test reads it. */
/* Waits until a signal sent to pid is no longer pending there (its handler has taken it): standard
 * signals do not queue, so a signal sent while the same one is still pending would merge with it. */
static void wait_delivered(pid_t pid, int sig)
{
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  for (;;) {
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char line[256];
    unsigned long long pending = 0, mask;
    while (fgets(line, sizeof line, f) != NULL) {
      if (sscanf(line, "SigPnd: %llx", &mask) == 1 || sscanf(line, "ShdPnd: %llx", &mask) == 1) pending |= mask;
    }
    fclose(f);
    if (!(pending & (1ull << (sig - 1)))) return;
    sched_yield();
  }
}

static void final_signals_while_dumping(int signals, bool drain)
{
  const char *dir = tmp_dir_make();
  char prefix[PATH_MAX], fifo[PATH_MAX], final[PATH_MAX], fifo_var[PATH_MAX + 32], shim[PATH_MAX + 32];
  prefix_var(prefix, sizeof prefix, dir);
  snprintf(fifo, sizeof fifo, "%s/dump.fifo", dir);
  set_var(fifo_var, sizeof fifo_var, "MPROF_TEST_DUMP_FIFO", fifo);
  set_var(shim, sizeof shim, "LD_PRELOAD", probe_getenv("MPROF_TEST_DUMP_SHIM"));
  ck_assert_int_eq(mkfifo(fifo, 0600), 0);
  int fd = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_ge(fcntl(fd, F_SETPIPE_SZ, 4096), 0);
  const char *vars[] = {"MIMALLOC_PROF=1", "MIMALLOC_PROF_SAMPLE_RATE=1", "MIMALLOC_PROF_FINAL_SIGNALS=TERM", prefix,
                        shim, fifo_var, "MPROF_TEST_DUMP_FIFO_KIND=f", NULL};
  probe_child_t c = start_watched(vars, (const char *const[]){"idle", "4096", NULL});
  wait_ready(&c);
  snprintf(final, sizeof final, "%s/prof.%d.000000.f.pb.gz", dir, (int)c.pid);
  ck_assert_int_eq(kill(c.pid, SIGTERM), 0);
  wait_data(fd, &c);                         /* the handler ran; the profiler thread writes */
  for (int i = 1; i < signals; i++) {
    ck_assert_int_eq(kill(c.pid, SIGTERM), 0);
    wait_delivered(c.pid, SIGTERM);
  }
  if (drain) {                               /* read the dump to its end: the profile completes */
    char buf[4096];
    for (;;) {
      struct pollfd pf = {.fd = fd, .events = POLLIN};
      if (poll(&pf, 1, -1) < 0 && errno == EINTR) continue;
      ssize_t n = read(fd, buf, sizeof buf);
      if (n == 0) break;                     /* the writer closed: the dump is complete */
      if (n < 0 && errno != EAGAIN && errno != EINTR) break;
    }
  }
  probe_run_t r = probe_finish(&c);
  assert_killed_by(&r, SIGTERM);
  /* Held: the dump finished and was renamed; insisted: killed inside the dump, no final name. */
  ck_assert_int_eq(access(final, F_OK), drain ? 0 : -1);
  close(fd);
  probe_run_free(&r);
}

START_TEST(profiler_final_signal_twice_held)
{
  final_signals_while_dumping(2, true);
}
END_TEST

START_TEST(profiler_final_signal_thrice_at_once)
{
  final_signals_while_dumping(3, false);
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   fork inside dlopen while a dump is written
--------------------------------------------------------------------------------------------------- */

/* The plugin's constructor (tests/fork_plugin.c) runs under dlopen's loader lock, waits until the profiler
 * thread's signal dump has begun (its first bytes arrive in the FIFO that tests/dump_shim gives the library
 * for the dump's temporary file),
 * forks while the dump, larger than the FIFO's 4 KiB, waits in write(2) holding dump_lock, lets the child
 * write a profile of its own, and only then reads the dump.  It must finish, with every unwinder, every
 * time: the dump was still unfinished at the fork (its final name absent afterwards), the child's
 * profile and the dump are valid, the program's final profile at exit is written, and no temporary
 * file is left.  50 runs per unwinder. */
#define FORK_RUNS 50

static void fork_in_constructor_once(const char *unwinder)
{
  const char *dir = tmp_dir_make();
  char side[PATH_MAX], prefix[PATH_MAX], unwind[64], child[PATH_MAX + 32], drain[PATH_MAX + 32],
       fifo[PATH_MAX + 32], shim[PATH_MAX + 32];
  snprintf(side, sizeof side, "%s/side", dir);
  ck_assert_int_eq(mkdir(side, 0700), 0);
  prefix_var(prefix, sizeof prefix, dir);
  snprintf(unwind, sizeof unwind, "MIMALLOC_PROF_UNWIND=%s", unwinder);
  snprintf(child, sizeof child, "MPROF_TEST_CHILD_DUMP=%s/child.pb.gz", side);
  snprintf(drain, sizeof drain, "MPROF_TEST_DRAIN=%s/drained.pb.gz", side);
  snprintf(fifo, sizeof fifo, "MPROF_TEST_DUMP_FIFO=%s/dump.fifo", side);
  set_var(shim, sizeof shim, "LD_PRELOAD", probe_getenv("MPROF_TEST_DUMP_SHIM"));
  const char *vars[] = {"MIMALLOC_PROF=1", "MIMALLOC_PROF_SAMPLE_RATE=1", "MIMALLOC_PROF_SIGNAL=USR2",
                        "MIMALLOC_PROF_FINAL=1", unwind, prefix, child, drain, shim, fifo,
                        "MPROF_TEST_DUMP_FIFO_KIND=s", NULL};
  probe_run_t r = run_watched(vars, (const char *const[]){"forkplugin", "4096", NULL});
  probe_assert_exit0(&r, unwinder);
  ck_assert_ptr_nonnull(strstr(r.out, "plugin loaded\n"));
  ck_assert_uint_eq(probe_value(&r, "fork_child_status"), 0);
  ck_assert_uint_gt(probe_value(&r, "drained_bytes"), 4096);
  ck_assert_uint_eq(probe_value(&r, "in_progress_at_fork"), 1);
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/child.pb.gz", side);
  test_profile_free(profile_load(path));
  snprintf(path, sizeof path, "%s/drained.pb.gz", side);
  test_profile_free(profile_load(path));
  /* The directory holds the final profile (sequence 1; 0 was the signal's, which the probe removed). */
  char want[64];
  snprintf(want, sizeof want, "prof.%d.000001.f.pb.gz", (int)r.pid);
  DIR *d = opendir(dir);
  ck_assert_ptr_nonnull(d);
  unsigned files = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 || strcmp(e->d_name, "side") == 0) continue;
    ck_assert_msg(strcmp(e->d_name, want) == 0, "unexpected file %s", e->d_name);
    files++;
  }
  closedir(d);
  ck_assert_uint_eq(files, 1);
  snprintf(path, sizeof path, "%s/%s", dir, want);
  test_profile_free(profile_load(path));
  probe_run_free(&r);
}

START_TEST(profiler_fork_in_constructor)
{
  static const char *const unwinders[] = {"fp", "libgcc",
#if HAVE_LIBUNWIND
                                          "libunwind",
#endif
  };
  for (size_t u = 0; u < sizeof unwinders / sizeof unwinders[0]; u++)
    for (int i = 0; i < FORK_RUNS; i++) fork_in_constructor_once(unwinders[u]);
}
END_TEST

Suite *profiler_suite(void)
{
  Suite *s = suite_create("profiler");
  TCase *tc = tcase_create("profiler");
  tcase_set_timeout(tc, 600);
  tcase_add_unchecked_fixture(tc, run_dir_setup, run_dir_teardown);
  tcase_add_test(tc, profiler_thread_only_when_needed);
  tcase_add_test(tc, profiler_never_mallocs);
  tcase_add_test(tc, profiler_final_signals);
  tcase_add_test(tc, profiler_final_signal_amid_intervals);
  tcase_add_test(tc, profiler_final_signal_own_handler);
  tcase_add_test(tc, profiler_final_signal_keeps_ignored);
  tcase_add_test(tc, profiler_final_signal_twice_held);
  tcase_add_test(tc, profiler_final_signal_thrice_at_once);
  tcase_add_test(tc, profiler_fork_in_constructor);
  suite_add_tcase(s, tc);
  return s;
}

#endif
