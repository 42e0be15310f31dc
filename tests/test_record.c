/* test_record.c - (being written) */
#include "suites.h"

#if MPROF_PPROF == 1
Suite *record_suite(void)
{
  Suite *s = suite_create("record");
  return s;
}
#endif
