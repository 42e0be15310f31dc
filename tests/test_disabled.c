/* test_disabled.c - a --disable-pprof build: every mi_prof_* function exists and reports "not
 * available" (false with errno ENOTSUP), except mi_prof_version, and the malloc family still works. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mimalloc-prof.h"
#include "suites.h"

#if MPROF_PPROF == 0

/* Each call must fail with ENOTSUP, whatever errno held before. */
#define ASSERT_NOT_AVAILABLE(call)                                                                          \
  do {                                                                                                      \
    errno = 0;                                                                                              \
    bool ok_ = (call);                                                                                      \
    int err_ = errno;                                                                                       \
    ck_assert_msg(!ok_ && err_ == ENOTSUP, "%s: returned %d, errno %d", #call, ok_, err_);                  \
  } while (0)

static void on_sample(void *ptr, size_t size, size_t weight, size_t rate, uint64_t tid, void *arg)
{
  (void)ptr, (void)size, (void)weight, (void)rate, (void)tid, (void)arg;
}

static void on_free(void *ptr, size_t size, void *arg) { (void)ptr, (void)size, (void)arg; }

START_TEST(disabled_api_not_available)
{
  ck_assert_int_eq(mi_prof_version(), MI_PROF_VERSION);
  ASSERT_NOT_AVAILABLE(mi_prof_available());
  ASSERT_NOT_AVAILABLE(mi_prof_start(0));
  ASSERT_NOT_AVAILABLE(mi_prof_start(4096));
  ASSERT_NOT_AVAILABLE(mi_prof_start_seeded(4096, 42));
  ASSERT_NOT_AVAILABLE(mi_prof_is_enabled());
  ASSERT_NOT_AVAILABLE(mi_prof_stop());
  ASSERT_NOT_AVAILABLE(mi_prof_reset());
  mi_prof_stats_t st;
  memset(&st, 0xa5, sizeof st);
  ASSERT_NOT_AVAILABLE(mi_prof_stats(&st, sizeof st));
  ASSERT_NOT_AVAILABLE(mi_prof_stats(NULL, sizeof st));
  size_t live = 7, bytes = 9;
  ASSERT_NOT_AVAILABLE(mi_prof_debug_stats(&live, &bytes));
  ASSERT_NOT_AVAILABLE(mi_prof_debug_stats(NULL, NULL));
  ASSERT_NOT_AVAILABLE(mi_prof_set_observer(on_sample, on_free, NULL));
  ASSERT_NOT_AVAILABLE(mi_prof_set_observer(NULL, NULL, NULL));
  /* Still not running after a failed start. */
  ASSERT_NOT_AVAILABLE(mi_prof_is_enabled());
}
END_TEST

START_TEST(disabled_allocation_works)
{
  /* A failed start changes nothing: the malloc family behaves as usual. */
  ASSERT_NOT_AVAILABLE(mi_prof_start(1));
  enum { N = 2000 };
  static unsigned char *p[N];
  for (unsigned i = 0; i < N; i++) {
    size_t size = 1 + (size_t)i * 37 % 9000;
    p[i] = i % 3 == 0 ? calloc(1, size) : malloc(size);
    ck_assert_ptr_nonnull(p[i]);
    if (i % 3 == 0) ck_assert_uint_eq(p[i][size - 1], 0);
    memset(p[i], (int)(i & 0xff), size);
  }
  for (unsigned i = 0; i < N; i += 2) {
    size_t size = 1 + (size_t)i * 37 % 9000;
    p[i] = realloc(p[i], size * 2);
    ck_assert_ptr_nonnull(p[i]);
    ck_assert_uint_eq(p[i][size - 1], i & 0xff);
  }
  void *a = aligned_alloc(4096, 10000);
  ck_assert_ptr_nonnull(a);
  ck_assert_uint_eq((uintptr_t)a % 4096, 0);
  free(a);
  for (unsigned i = 0; i < N; i++) {
    ck_assert_uint_eq(p[i][0], i & 0xff);
    free(p[i]);
  }
}
END_TEST

Suite *disabled_suite(void)
{
  Suite *s = suite_create("disabled");
  TCase *tc = tcase_create("disabled");
  tcase_add_test(tc, disabled_api_not_available);
  tcase_add_test(tc, disabled_allocation_works);
  suite_add_tcase(s, tc);
  return s;
}

#endif
