/* check_prof.c - runs every suite; results go out as TAP (CK_TAP_LOG_FILE_NAME=- under make check).
 *
 * Skipped tests: Check has no skip, so a test that skips (MPROF_TEST_SKIP) records its name and reason
 * in a file shared by the forked test processes, returns (Check counts a pass), and its TAP line is
 * turned into "ok N - NAME # SKIP reason" on the way to stdout.
 *
 * The TAP goes out as each test ends (automake's driver shows each result at once, scripts/deb.sh counts
 * them): Check writes it into a pipe, one flushed line per test, and a reader process copies it to
 * stdout.  A process, not a thread: Check forks every test from this process, and a thread here would
 * make every test start in a child of a multi-threaded process, which the library treats differently at
 * fork.  The test's skip record is written before its process ends, so before Check writes its line. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "suites.h"

static int skip_fd = -1;   /* records "NAME<TAB>REASON<NL>", appended by the test processes */

/* The reader stops at this line, which the runner writes after Check closed its end: a test's leftover
 * process may hold the pipe open for longer. */
static const char tap_end[] = "# check_prof: end\n";

void mprof_test_skip(const char *fn, const char *reason)
{
  size_t len = strlen(fn);
  if (len > 3 && strcmp(fn + len - 3, "_fn") == 0) len -= 3;   /* START_TEST(x) defines x_fn */
  char line[512];
  int n = snprintf(line, sizeof line, "%.*s\t%s\n", (int)len, fn, reason);
  if (skip_fd >= 0 && n > 0 && (size_t)n < sizeof line && write(skip_fd, line, (size_t)n) != n)
    fprintf(stderr, "check_prof: cannot record the skip of %.*s\n", (int)len, fn);
  fprintf(stderr, "%.*s: skipped: %s\n", (int)len, fn, reason);
}

/* The reason recorded for the test named by a TAP line ("ok N - FILE:SUITE:NAME: Passed"), or NULL. */
static const char *skip_reason(const char *tap, const char *skips)
{
  const char *end = strstr(tap, ": Passed");
  if (strncmp(tap, "ok ", 3) != 0 || end == NULL) return NULL;
  const char *name = end;
  while (name > tap && name[-1] != ':') name--;
  size_t len = (size_t)(end - name);
  for (const char *r = skips; r != NULL && *r != '\0'; r = strchr(r, '\n') + 1) {
    if (strncmp(r, name, len) == 0 && r[len] == '\t') return r + len + 1;
    if (strchr(r, '\n') == NULL) break;
  }
  return NULL;
}

/* The reader: copies the TAP from `tap` to stdout line by line, skipped tests marked, until tap_end. */
static _Noreturn void copy_tap(FILE *tap)
{
  static char skips[1 << 16];
  char line[4096];
  while (fgets(line, sizeof line, tap) != NULL && strcmp(line, tap_end) != 0) {
    ssize_t n = pread(skip_fd, skips, sizeof skips - 1, 0);
    skips[n > 0 ? n : 0] = '\0';
    const char *reason = skip_reason(line, skips);
    if (reason == NULL) {
      fputs(line, stdout);
    } else {
      const char *end = strstr(line, ": Passed");
      printf("%.*s # SKIP %.*s\n", (int)(end - line), line, (int)strcspn(reason, "\n"), reason);
    }
    fflush(stdout);
  }
  _exit(0);
}

int main(void)
{
  /* Check's TAP goes through a pipe to the reader when it was asked for on stdout. */
  char skips_path[] = "/tmp/check_prof-skips.XXXXXX", tap_path[32];
  const char *tap_env = getenv("CK_TAP_LOG_FILE_NAME");
  int tap_pipe[2] = {-1, -1};
  pid_t reader = -1;
  if (tap_env != NULL && strcmp(tap_env, "-") == 0) {
    skip_fd = mkstemp(skips_path);
    if (skip_fd < 0 || pipe(tap_pipe) != 0) {
      perror("check_prof: mkstemp, pipe");
      return EXIT_FAILURE;
    }
    unlink(skips_path);
    (void)fcntl(skip_fd, F_SETFL, O_APPEND);
    (void)fcntl(tap_pipe[1], F_SETFD, FD_CLOEXEC);          /* not into the programs tests run */
    fflush(stdout);
    reader = fork();
    if (reader < 0) {
      perror("check_prof: fork");
      return EXIT_FAILURE;
    }
    if (reader == 0) {
      close(tap_pipe[1]);
      FILE *tap = fdopen(tap_pipe[0], "r");
      if (tap == NULL) _exit(1);
      copy_tap(tap);
    }
    close(tap_pipe[0]);
    snprintf(tap_path, sizeof tap_path, "/dev/fd/%d", tap_pipe[1]);
  }

  SRunner *sr = srunner_create(alloc_suite());
  srunner_add_suite(sr, interpose_suite());
  srunner_add_suite(sr, cxx_suite());
  srunner_add_suite(sr, threads_suite());
#if MPROF_PPROF
  srunner_add_suite(sr, sampler_suite());
  srunner_add_suite(sr, estimator_suite());
  srunner_add_suite(sr, sheap_suite());
  srunner_add_suite(sr, lazylib_suite());
  srunner_add_suite(sr, mathfn_suite());
  srunner_add_suite(sr, mi_api_suite());
  srunner_add_suite(sr, real_programs_suite());
  srunner_add_suite(sr, record_suite());
  srunner_add_suite(sr, observer_suite());
  srunner_add_suite(sr, options_suite());
  srunner_add_suite(sr, hazards_suite());
  srunner_add_suite(sr, stacks_suite());
  srunner_add_suite(sr, unwind_suite());
  srunner_add_suite(sr, pprof_suite());
  srunner_add_suite(sr, dump_suite());
  srunner_add_suite(sr, peak_suite());
  srunner_add_suite(sr, labels_suite());
  srunner_add_suite(sr, profiler_suite());
  srunner_add_suite(sr, control_suite());
  srunner_add_suite(sr, periodic_suite());
  srunner_add_suite(sr, security_suite());
  srunner_add_suite(sr, tool_cli_suite());
  srunner_add_suite(sr, tool_run_suite());
  srunner_add_suite(sr, tool_report_suite());
  srunner_add_suite(sr, tool_model_suite());
  srunner_add_suite(sr, tool_hostile_suite());
  srunner_add_suite(sr, symbolize_suite());
  srunner_add_suite(sr, tool_flame_suite());
  srunner_add_suite(sr, tool_memtime_suite());
  srunner_add_suite(sr, tool_memreal_suite());
  srunner_add_suite(sr, tool_service_suite());
  srunner_add_suite(sr, tool_access_suite());
#else
  srunner_add_suite(sr, disabled_suite());
#endif
  if (reader > 0) srunner_set_tap(sr, tap_path);
  srunner_run_all(sr, CK_ENV);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  if (reader > 0) {
    int status;
    if (write(tap_pipe[1], tap_end, sizeof tap_end - 1) != (ssize_t)sizeof tap_end - 1 ||
        waitpid(reader, &status, 0) != reader || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "check_prof: the TAP reader failed\n");
      return EXIT_FAILURE;
    }
  }
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
