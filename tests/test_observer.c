/* test_observer.c - (being written) */
#include "suites.h"

#if MPROF_PPROF == 1
Suite *observer_suite(void)
{
  Suite *s = suite_create("observer");
  return s;
}
#endif
