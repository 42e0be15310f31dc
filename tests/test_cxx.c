/* test_cxx.c - C++ new/delete go through the library (see cxx_helper.cc). */
#include "suites.h"

START_TEST(cxx_new_delete)
{
  char why[256] = "";
  ck_assert_msg(mprof_cxx_check(why, sizeof why), "%s", why);
}
END_TEST

Suite *cxx_suite(void)
{
  Suite *s = suite_create("cxx");
  TCase *tc = tcase_create("cxx");
  tcase_add_test(tc, cxx_new_delete);
  suite_add_tcase(s, tc);
  return s;
}
