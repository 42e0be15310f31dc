/* test_sampler.c - (being written) */
#include "suites.h"

#if MPROF_PPROF == 1
Suite *sampler_suite(void)
{
  Suite *s = suite_create("sampler");
  return s;
}
#endif
