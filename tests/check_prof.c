/* check_prof.c - runs every suite; results go out as TAP (CK_TAP_LOG_FILE_NAME=- under make check).
 *
 * Skipped tests: Check has no skip, so a test that skips (MPROF_TEST_SKIP) records its name and reason
 * in a file shared by the forked test processes, returns (Check counts a pass), and the TAP that Check
 * wrote is copied to stdout with those lines turned into "ok N - NAME # SKIP reason". */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "suites.h"

static int skip_fd = -1;   /* records "NAME<TAB>REASON<NL>", appended by the test processes */

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

/* Copies the TAP file to stdout, skipped tests marked. */
static void copy_tap(FILE *tap, FILE *skips_file)
{
  static char skips[1 << 16];
  size_t n = fread(skips, 1, sizeof skips - 1, skips_file);
  skips[n] = '\0';
  char line[4096];
  while (fgets(line, sizeof line, tap) != NULL) {
    const char *reason = skip_reason(line, skips);
    if (reason == NULL) {
      fputs(line, stdout);
      continue;
    }
    const char *end = strstr(line, ": Passed");
    printf("%.*s # SKIP %.*s\n", (int)(end - line), line, (int)strcspn(reason, "\n"), reason);
  }
  fflush(stdout);
}

int main(void)
{
  /* Check's TAP goes through a file when it was asked for on stdout. */
  char tap_path[] = "/tmp/check_prof-tap.XXXXXX", skips_path[] = "/tmp/check_prof-skips.XXXXXX";
  const char *tap_env = getenv("CK_TAP_LOG_FILE_NAME");
  int tap_fd = -1;
  if (tap_env != NULL && strcmp(tap_env, "-") == 0) {
    tap_fd = mkstemp(tap_path);
    skip_fd = mkstemp(skips_path);
    if (tap_fd < 0 || skip_fd < 0) {
      perror("check_prof: mkstemp");
      return EXIT_FAILURE;
    }
    unlink(skips_path);
    (void)fcntl(skip_fd, F_SETFL, O_APPEND);
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
  srunner_add_suite(sr, profiler_suite());
  srunner_add_suite(sr, control_suite());
  srunner_add_suite(sr, periodic_suite());
  srunner_add_suite(sr, tool_cli_suite());
  srunner_add_suite(sr, tool_run_suite());
  srunner_add_suite(sr, tool_report_suite());
  srunner_add_suite(sr, symbolize_suite());
  srunner_add_suite(sr, tool_flame_suite());
  srunner_add_suite(sr, tool_service_suite());
#else
  srunner_add_suite(sr, disabled_suite());
#endif
  if (tap_fd >= 0) srunner_set_tap(sr, tap_path);
  srunner_run_all(sr, CK_ENV);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  if (tap_fd >= 0) {
    FILE *tap = fdopen(tap_fd, "r"), *skips = fdopen(skip_fd, "r");
    unlink(tap_path);
    if (tap == NULL || skips == NULL || fseek(skips, 0, SEEK_SET) != 0) {
      perror("check_prof: reading the results back");
      return EXIT_FAILURE;
    }
    copy_tap(tap, skips);
  }
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
