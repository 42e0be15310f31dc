/* check_prof.c - runs every suite; results go out as TAP (CK_TAP_LOG_FILE_NAME=- under make check). */
#include <stdlib.h>

#include "suites.h"

int main(void)
{
  SRunner *sr = srunner_create(alloc_suite());
  srunner_add_suite(sr, interpose_suite());
  srunner_add_suite(sr, cxx_suite());
  srunner_add_suite(sr, threads_suite());
#if MPROF_PPROF
  srunner_add_suite(sr, sampler_suite());
  srunner_add_suite(sr, estimator_suite());
  srunner_add_suite(sr, sheap_suite());
  srunner_add_suite(sr, mi_api_suite());
  srunner_add_suite(sr, real_programs_suite());
  srunner_add_suite(sr, record_suite());
  srunner_add_suite(sr, observer_suite());
  srunner_add_suite(sr, options_suite());
  srunner_add_suite(sr, hazards_suite());
  srunner_add_suite(sr, stacks_suite());
  srunner_add_suite(sr, unwind_suite());
  srunner_add_suite(sr, pprof_suite());
  srunner_add_suite(sr, dump_suite());
  srunner_add_suite(sr, profiler_suite());
  srunner_add_suite(sr, tool_cli_suite());
  srunner_add_suite(sr, tool_run_suite());
  srunner_add_suite(sr, tool_report_suite());
  srunner_add_suite(sr, symbolize_suite());
  srunner_add_suite(sr, tool_flame_suite());
#else
  srunner_add_suite(sr, disabled_suite());
#endif
  srunner_run_all(sr, CK_ENV);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
