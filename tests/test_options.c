/* test_options.c - (being written) */
#include "suites.h"

#if MPROF_PPROF == 1
Suite *options_suite(void)
{
  Suite *s = suite_create("options");
  return s;
}
#endif
