/* test_interpose.c - a program linked with -lmimalloc-prof, and one run with LD_PRELOAD, both get the
 * malloc family from this library (asserted with dladdr), and the blocks come from mimalloc. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mimalloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "from_mimalloc.h"
#include "mimalloc-prof.h"
#include "subprocess.h"
#include "suites.h"

static const char *provider(const char *name)
{
  Dl_info info;
  void *sym = dlsym(RTLD_DEFAULT, name);
  if (sym == NULL || dladdr(sym, &info) == 0 || info.dli_fname == NULL) return "?";
  return info.dli_fname;
}

START_TEST(interpose_linked)
{
  static const char *const names[] = {"malloc", "free", "calloc", "realloc", "posix_memalign",
                                      "aligned_alloc", "memalign", "valloc", "pvalloc",
                                      "reallocarray", "malloc_usable_size"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    const char *f = provider(names[i]);
    ck_assert_msg(strstr(f, "libmimalloc-prof.so") != NULL, "%s comes from %s", names[i], f);
  }
  void *p = malloc(64);
  ck_assert(mprof_test_from_mimalloc(p));
  free(p);
  ck_assert_int_eq(mi_prof_version(), MI_PROF_VERSION);
}
END_TEST

/* Runs the probe with the given LD_PRELOAD (NULL: none) and returns what it printed on stdout (caller
 * frees it). */
static char *run_probe(const char *preload)
{
  char var[4096] = "LD_PRELOAD";             /* a bare name: removed from the probe's environment */
  if (preload != NULL) snprintf(var, sizeof var, "LD_PRELOAD=%s", preload);
  probe_opts_t opts = {.env = (const char *const[]){var, NULL}};
  probe_run_t run = probe_run(probe_getenv("MPROF_TEST_PROBE"), NULL, &opts);
  probe_assert_exit0(&run, "preload_probe");
  free(run.err);
  return run.out;
}

START_TEST(interpose_preload)
{
  char *out = run_probe(probe_getenv("MPROF_TEST_LIB"));
  int lines = 0;
  for (char *line = strtok(out, "\n"); line != NULL; line = strtok(NULL, "\n")) {
    if (strncmp(line, "mi_usable_size ", 15) == 0) {
      ck_assert_str_eq(line, "mi_usable_size yes");
      continue;
    }
    ck_assert_msg(strstr(line, "libmimalloc-prof.so.0") != NULL, "under LD_PRELOAD: %s", line);
    lines++;
  }
  ck_assert_int_eq(lines, 7);
  free(out);
}
END_TEST

START_TEST(interpose_control_without_preload)
{
  /* The control: without the library the same probe gets glibc's malloc, so the test can tell. */
  char *out = run_probe(NULL);
  ck_assert_msg(strstr(out, "malloc ") != NULL && strstr(out, "libmimalloc-prof") == NULL, "%s", out);
  ck_assert_ptr_nonnull(strstr(out, "libc.so.6"));
  free(out);
}
END_TEST

Suite *interpose_suite(void)
{
  Suite *s = suite_create("interpose");
  TCase *tc = tcase_create("interpose");
  tcase_add_test(tc, interpose_linked);
  tcase_add_test(tc, interpose_preload);
  tcase_add_test(tc, interpose_control_without_preload);
  suite_add_tcase(s, tc);
  return s;
}
