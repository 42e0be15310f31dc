/* test_cxx.c - C++ new/delete go through the library (see cxx_helper.cc), and a failed new keeps C++'s
 * rules even in a C++ library dlopen'ed by a C program (cxx_plugin.cc, dlopen_probe.c). */
#include <stdio.h>

#include "subprocess.h"
#include "suites.h"

START_TEST(cxx_new_delete)
{
  char why[256] = "";
  ck_assert_msg(mprof_cxx_check(why, sizeof why), "%s", why);
}
END_TEST

START_TEST(cxx_new_failure_in_dlopened_library)
{
  char preload[4096];
  snprintf(preload, sizeof preload, "LD_PRELOAD=%s", probe_getenv("MPROF_TEST_LIB"));
  probe_opts_t opts = {.env = (const char *const[]){preload, NULL}};
  probe_run_t run = probe_run(probe_getenv("MPROF_TEST_DLOPEN_PROBE"),
                              (const char *const[]){probe_getenv("MPROF_TEST_CXX_PLUGIN"), NULL}, &opts);
  probe_assert_exit0(&run, "dlopen_probe");
  ck_assert_str_eq(run.out, "plugin 2\n");      /* bad_alloc caught, new_handler called once */
  probe_run_free(&run);
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
