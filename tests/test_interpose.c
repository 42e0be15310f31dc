/* test_interpose.c - a program linked with -lmimalloc-prof, and one run with LD_PRELOAD, both get the
 * malloc family from this library (asserted with dladdr), and the blocks come from mimalloc. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mimalloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mimalloc-prof.h"
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
  ck_assert(mi_is_in_heap_region(p));
  free(p);
  ck_assert_int_eq(mi_prof_version(), MI_PROF_VERSION);
}
END_TEST

/* Runs the probe with the given LD_PRELOAD (NULL: none) and returns its output. */
static void run_probe(const char *preload, char *out, size_t out_len)
{
  const char *probe = getenv("MPROF_TEST_PROBE");
  ck_assert_msg(probe != NULL, "MPROF_TEST_PROBE not set (run through make check)");
  int fd[2];
  ck_assert_int_eq(pipe(fd), 0);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    dup2(fd[1], 1);
    close(fd[0]);
    if (preload != NULL) setenv("LD_PRELOAD", preload, 1);
    else unsetenv("LD_PRELOAD");
    execl(probe, probe, (char *)NULL);
    _exit(127);
  }
  close(fd[1]);
  size_t n = 0;
  ssize_t r;
  while (n + 1 < out_len && (r = read(fd[0], out + n, out_len - 1 - n)) > 0) n += (size_t)r;
  out[n] = '\0';
  close(fd[0]);
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

START_TEST(interpose_preload)
{
  const char *lib = getenv("MPROF_TEST_LIB");
  ck_assert_msg(lib != NULL, "MPROF_TEST_LIB not set (run through make check)");
  char out[4096];
  run_probe(lib, out, sizeof out);
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
}
END_TEST

START_TEST(interpose_control_without_preload)
{
  /* The control: without the library the same probe gets glibc's malloc, so the test can tell. */
  char out[4096];
  run_probe(NULL, out, sizeof out);
  ck_assert_msg(strstr(out, "malloc ") != NULL && strstr(out, "libmimalloc-prof") == NULL, "%s", out);
  ck_assert_ptr_nonnull(strstr(out, "libc.so.6"));
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
