/* test_lazylib.c - the libraries the library loads when it first needs them (lib/lazylib.c): a process
 * that never dumps maps neither zlib nor protobuf-c, and none maps libm (lib/mathfn.c); a dump maps the
 * two; where dlopen fails, a dump fails with ELIBACC and says so, and the process goes on sampling. */
#define _GNU_SOURCE
#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "subprocess.h"
#include "suites.h"

#if MPROF_PPROF

static probe_run_t run_probe(const char *preload, const char *path)
{
  char env[4096];
  snprintf(env, sizeof env, "LD_PRELOAD=%s", preload);
  probe_opts_t opts = {.env = (const char *const[]){env, "MIMALLOC_PROF_UNWIND=fp", NULL}};
  return probe_run(probe_getenv("MPROF_TEST_LAZYLIB_PROBE"), (const char *const[]){path, NULL}, &opts);
}

/* A program that links none of the three: stopped or sampling it maps none; after a dump zlib and
 * protobuf-c, still not libm. */
START_TEST(lazylib_loaded_when_needed)
{
  char path[4096];
  snprintf(path, sizeof path, "%s/lazylib-%d.pb.gz", probe_getenv("MPROF_TEST_OUTDIR"), (int)getpid());
  probe_run_t run = run_probe(probe_getenv("MPROF_TEST_LIB"), path);
  probe_assert_exit0(&run, NULL);
  ck_assert_uint_eq(probe_value(&run, "stopped_libz"), 0);
  ck_assert_uint_eq(probe_value(&run, "stopped_libprotobuf-c"), 0);
  ck_assert_uint_eq(probe_value(&run, "stopped_libm"), 0);
  ck_assert_uint_eq(probe_value(&run, "start"), 1);
  ck_assert_uint_eq(probe_value(&run, "started_libz"), 0);
  ck_assert_uint_eq(probe_value(&run, "started_libprotobuf-c"), 0);
  ck_assert_uint_eq(probe_value(&run, "started_libm"), 0);
  ck_assert_uint_eq(probe_value(&run, "dump"), 1);
  ck_assert_uint_eq(probe_value(&run, "dumped_libz"), 1);
  ck_assert_uint_eq(probe_value(&run, "dumped_libprotobuf-c"), 1);
  ck_assert_uint_eq(probe_value(&run, "dumped_libm"), 0);
  probe_run_free(&run);
  ck_assert_int_eq(unlink(path), 0);
}
END_TEST

/* A process that sets no MIMALLOC_PROF variable and never starts reads no page of the library's .rodata
 * or .eh_frame (lib/options.c looks up no option name; doc/design.md, "Pages a stopped process maps"):
 * the whole mapping, 40-odd KiB, would be resident after one read.  Exactly 0 KiB: nothing else reads it. */
START_TEST(lazylib_stopped_reads_no_rodata)
{
  char env[4096], path[4096];
  snprintf(env, sizeof env, "LD_PRELOAD=%s", probe_getenv("MPROF_TEST_LIB"));
  snprintf(path, sizeof path, "%s/lazylib-ro-%d.pb.gz", probe_getenv("MPROF_TEST_OUTDIR"), (int)getpid());
  probe_opts_t opts = {.env = (const char *const[]){env, NULL}};
  probe_run_t run =
      probe_run(probe_getenv("MPROF_TEST_LAZYLIB_PROBE"), (const char *const[]){path, NULL}, &opts);
  probe_assert_exit0(&run, NULL);
  int kib = (int)probe_value(&run, "stopped_rodata_kib");
  probe_run_free(&run);
  unlink(path);
  if (kib < 0) MPROF_TEST_SKIP("the library's mappings are not in /proc/self/smaps (qemu-user shows its own)");
  ck_assert_int_eq(kib, 0);
}
END_TEST

/* The library's executable segments (lib/stopped.ld): a fault in one maps its whole large folio, 64 KiB and
 * more, so a process that never starts runs no code of the second (writing a profile) or the third
 * (sampling), and one that samples at rate 1 but never dumps runs none of the second.  Exactly 0 KiB: one
 * page run is 4 or more.  Skipped where the library was linked without the script (one segment). */
static bool run_segments(const char *test, const char *env_rate, probe_run_t *run)
{
  char env[4096], path[4096];
  snprintf(env, sizeof env, "LD_PRELOAD=%s", probe_getenv("MPROF_TEST_LIB"));
  snprintf(path, sizeof path, "%s/%s-%d.pb.gz", probe_getenv("MPROF_TEST_OUTDIR"), test, (int)getpid());
  probe_opts_t opts = {.env = (const char *const[]){env, env_rate, NULL}};
  *run = probe_run(probe_getenv("MPROF_TEST_LAZYLIB_PROBE"), (const char *const[]){path, NULL}, &opts);
  probe_assert_exit0(run, NULL);
  unlink(path);
  int segments = (int)probe_value(run, "stopped_code_segments");
  const char *skip = NULL;
  if (segments == 0) skip = "the library's mappings are not in /proc/self/smaps (qemu-user shows its own)";
  /* x86's GNU ld separates code from read-only data (-z separate-code), so the script's read-only pages
   * end segments; aarch64's puts both in one segment, and the script changes only the order there. */
#if !MPROF_STOPPED_LD || !(defined __x86_64__ || defined __i386__)
  if (segments == 1) skip = "one executable segment: not x86's GNU ld with lib/stopped.ld";
#endif
  if (skip != NULL) {
    probe_run_free(run);
    mprof_test_skip(test, skip);
    return false;
  }
  ck_assert_int_eq(segments, 3);
  return true;
}

/* No option set: nothing but the first segment runs. */
START_TEST(lazylib_stopped_runs_no_profiling_code)
{
  probe_run_t run;
  if (!run_segments(__func__, NULL, &run)) return;
  ck_assert_int_eq((int)probe_value(&run, "stopped_write_code_kib"), 0);
  ck_assert_int_eq((int)probe_value(&run, "stopped_sampling_code_kib"), 0);
  probe_run_free(&run);
}
END_TEST

/* Started at rate 1: its malloc is sampled, and still nothing of the second segment runs. */
START_TEST(lazylib_sampling_runs_no_writing_code)
{
  probe_run_t run;
  if (!run_segments(__func__, "MIMALLOC_PROF_SAMPLE_RATE=1", &run)) return;
  ck_assert_uint_eq(probe_value(&run, "start"), 1);
  ck_assert_int_eq((int)probe_value(&run, "started_write_code_kib"), 0);
  ck_assert_int_gt((int)probe_value(&run, "started_sampling_code_kib"), 0);
  probe_run_free(&run);
}
END_TEST

/* Where dlopen fails: sampling starts (fp loads nothing), mi_prof_dump fails with ELIBACC, said once on
 * stderr with the libraries it could not load, and the program runs to its end. */
START_TEST(lazylib_no_dlopen_fails_loudly)
{
  char preload[8192], path[4096];
  snprintf(preload, sizeof preload, "%s %s", probe_getenv("MPROF_TEST_NODLOPEN_SHIM"), probe_getenv("MPROF_TEST_LIB"));
  snprintf(path, sizeof path, "%s/lazylib-nodl-%d.pb.gz", probe_getenv("MPROF_TEST_OUTDIR"), (int)getpid());
  probe_run_t run = run_probe(preload, path);
  probe_assert_exit0(&run, NULL);
  ck_assert_uint_eq(probe_value(&run, "start"), 1);
  ck_assert_uint_eq(probe_value(&run, "dump"), 0);
  ck_assert_uint_eq(probe_value(&run, "dump_errno"), ELIBACC);
  ck_assert_msg(strstr(run.err, "cannot load libz.so.1") != NULL, "stderr: %s", run.err);
  ck_assert_int_ne(access(path, F_OK), 0);
  probe_run_free(&run);
}
END_TEST

/* Where dlopen fails, the dumps of the profiler thread (MIMALLOC_PROF_INTERVAL at rate 1: an interval
 * profile is due at the probe's first allocations) and the final one at exit fail as the API's does:
 * the thread's start, the API's dump and the final dump each find the libraries missing, the line is
 * said once in all, nothing is written, and the program's exit status is its own. */
START_TEST(lazylib_no_dlopen_every_dump_path)
{
  char preload[8192], path[4096], prefix[4096], env_prefix[4200], pattern[4200];
  snprintf(preload, sizeof preload, "LD_PRELOAD=%s %s", probe_getenv("MPROF_TEST_NODLOPEN_SHIM"),
           probe_getenv("MPROF_TEST_LIB"));
  snprintf(prefix, sizeof prefix, "%s/lazylib-paths-%d", probe_getenv("MPROF_TEST_OUTDIR"),
           (int)getpid());
  snprintf(path, sizeof path, "%s.api.pb.gz", prefix);
  snprintf(env_prefix, sizeof env_prefix, "MIMALLOC_PROF_PREFIX=%s", prefix);
  const char *const env[] = {preload, env_prefix, "MIMALLOC_PROF_UNWIND=fp", "MIMALLOC_PROF=1",
                             "MIMALLOC_PROF_SAMPLE_RATE=1", "MIMALLOC_PROF_INTERVAL=1",
                             "MIMALLOC_PROF_FINAL=1", NULL};
  probe_opts_t opts = {.env = env};
  probe_run_t run = probe_run(probe_getenv("MPROF_TEST_LAZYLIB_PROBE"), (const char *const[]){path, NULL},
                              &opts);
  probe_assert_exit0(&run, NULL);
  ck_assert_uint_eq(probe_value(&run, "dump"), 0);
  ck_assert_uint_eq(probe_value(&run, "dump_errno"), ELIBACC);
  const char *said = strstr(run.err, "cannot load libz.so.1");
  ck_assert_msg(said != NULL, "stderr: %s", run.err);
  ck_assert_msg(strstr(said + 1, "cannot load libz.so.1") == NULL, "said twice: %s", run.err);
  snprintf(pattern, sizeof pattern, "%s*", prefix);
  glob_t g;
  ck_assert_int_eq(glob(pattern, 0, NULL, &g), GLOB_NOMATCH);
  probe_run_free(&run);
}
END_TEST

Suite *lazylib_suite(void)
{
  Suite *s = suite_create("lazylib");
  TCase *tc = tcase_create("lazylib");
  tcase_add_test(tc, lazylib_loaded_when_needed);
  tcase_add_test(tc, lazylib_stopped_reads_no_rodata);
  tcase_add_test(tc, lazylib_stopped_runs_no_profiling_code);
  tcase_add_test(tc, lazylib_sampling_runs_no_writing_code);
  tcase_add_test(tc, lazylib_no_dlopen_fails_loudly);
  tcase_add_test(tc, lazylib_no_dlopen_every_dump_path);
  suite_add_tcase(s, tc);
  return s;
}

#endif
