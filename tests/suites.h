/* suites.h - one Suite per concern; tests/check_prof.c runs them all. */
#ifndef MPROF_TEST_SUITES_H
#define MPROF_TEST_SUITES_H

#include <check.h>

Suite *alloc_suite(void);
Suite *interpose_suite(void);
Suite *cxx_suite(void);
Suite *threads_suite(void);

#include "cxx_helper.h"

#endif
