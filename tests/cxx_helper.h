/* cxx_helper.h - the C++ side of the cxx suite (tests/cxx_helper.cc). */
#ifndef MPROF_TEST_CXX_HELPER_H
#define MPROF_TEST_CXX_HELPER_H

#ifdef __cplusplus
extern "C" {
#endif

/* Returns 1 when C++ allocation behaves; else 0 with the reason in why. */
int mprof_cxx_check(char *why, unsigned long why_len);

#ifdef __cplusplus
}
#endif

#endif
