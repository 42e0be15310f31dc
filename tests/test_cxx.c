/* test_cxx.c - C++ new/delete go through the library (see cxx_helper.cc), and a failed new keeps C++'s
 * rules even in a C++ library dlopen'ed by a C program (cxx_plugin.cc, dlopen_probe.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "suites.h"

START_TEST(cxx_new_delete)
{
  char why[256] = "";
  ck_assert_msg(mprof_cxx_check(why, sizeof why), "%s", why);
}
END_TEST

START_TEST(cxx_new_failure_in_dlopened_library)
{
  const char *lib = getenv("MPROF_TEST_LIB"), *probe = getenv("MPROF_TEST_DLOPEN_PROBE"),
             *plugin = getenv("MPROF_TEST_CXX_PLUGIN");
  ck_assert_msg(lib && probe && plugin, "run through make check");
  int fd[2];
  ck_assert_int_eq(pipe(fd), 0);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fd[1], 1);
    close(fd[0]);
    setenv("LD_PRELOAD", lib, 1);
    execl(probe, probe, plugin, (char *)NULL);
    _exit(127);
  }
  close(fd[1]);
  char out[256] = "";
  ssize_t n = read(fd[0], out, sizeof out - 1);
  out[n > 0 ? n : 0] = '\0';
  close(fd[0]);
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "probe died (status %d): %s", status, out);
  ck_assert_str_eq(out, "plugin 2\n");          /* bad_alloc caught, new_handler called once */
}
END_TEST

Suite *cxx_suite(void)
{
  Suite *s = suite_create("cxx");
  TCase *tc = tcase_create("cxx");
  tcase_add_test(tc, cxx_new_delete);
  tcase_add_test(tc, cxx_new_failure_in_dlopened_library);
  suite_add_tcase(s, tc);
  return s;
}
