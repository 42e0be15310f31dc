/* test_disabled.c - (being written) */
#include "suites.h"

#if MPROF_PPROF == 0
Suite *disabled_suite(void)
{
  Suite *s = suite_create("disabled");
  return s;
}
#endif
