/* test_hazards.c - (being written) */
#include "suites.h"

#if MPROF_PPROF == 1
Suite *hazards_suite(void)
{
  Suite *s = suite_create("hazards");
  return s;
}
#endif
