/* test_alloc.c - the malloc family keeps C/POSIX semantics (values and errno asserted). */
#include <errno.h>
#include <malloc.h>
#include <mimalloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "from_mimalloc.h"
#include "suites.h"

/* Not in glibc's headers. */
void cfree(void *p);
void *reallocf(void *p, size_t size);
int reallocarr(void *p, size_t count, size_t size);

/* Sizes no allocator can serve, hidden from the compiler's -Walloc-size-larger-than. */
static volatile size_t huge = SIZE_MAX - 4096;
static volatile size_t half = SIZE_MAX / 2 + 2;

/* Hides p's provenance from the compiler: gcc knows the alignment memalign & co. promise and would
 * otherwise fold these checks to true. */
static int aligned_to(const void *p, size_t a)
{
  uintptr_t u;
  __asm__("" : "=r"(u) : "0"((uintptr_t)p));
  return (u & (a - 1)) == 0;
}

START_TEST(alloc_malloc_zero_unique)
{
  void *a = malloc(0), *b = malloc(0);
  ck_assert_ptr_nonnull(a);
  ck_assert_ptr_nonnull(b);
  ck_assert_ptr_ne(a, b);
  free(a);
  free(b);
}
END_TEST

START_TEST(alloc_malloc_huge_enomem)
{
  errno = 0;
  ck_assert_ptr_null(malloc(huge));
  ck_assert_int_eq(errno, ENOMEM);
}
END_TEST

START_TEST(alloc_malloc_served_by_mimalloc)
{
  for (size_t s = 1; s <= ((size_t)1 << 22); s *= 4) {
    char *p = malloc(s);
    ck_assert_ptr_nonnull(p);
    ck_assert(mprof_test_from_mimalloc(p));
    ck_assert_uint_ge(malloc_usable_size(p), s);
    memset(p, 0x5a, s);
    free(p);
  }
  ck_assert_uint_eq(malloc_usable_size(NULL), 0);
  free(NULL);   /* a no-op */
}
END_TEST

START_TEST(alloc_calloc_zeroes)
{
  /* Dirty a block, free it, and ask calloc for the same size class: it must come back zeroed. */
  for (int round = 0; round < 64; round++) {
    unsigned char *d = malloc(1000);
    memset(d, 0xab, 1000);
    free(d);
    unsigned char *p = calloc(10, 100);
    ck_assert_ptr_nonnull(p);
    for (int i = 0; i < 1000; i++) ck_assert_uint_eq(p[i], 0);
    free(p);
  }
}
END_TEST

START_TEST(alloc_calloc_overflow_enomem)
{
  errno = 0;
  ck_assert_ptr_null(calloc(half, 2));
  ck_assert_int_eq(errno, ENOMEM);
  errno = 0;
  ck_assert_ptr_null(calloc(2, half));
  ck_assert_int_eq(errno, ENOMEM);
  void *z = calloc(0, 16);      /* zero elements: a unique pointer, not a failure */
  ck_assert_ptr_nonnull(z);
  free(z);
}
END_TEST

START_TEST(alloc_realloc_null_is_malloc)
{
  char *p = realloc(NULL, 100);
  ck_assert_ptr_nonnull(p);
  ck_assert_uint_ge(malloc_usable_size(p), 100);
  free(p);
}
END_TEST

START_TEST(alloc_realloc_keeps_contents)
{
  unsigned char *p = malloc(64);
  for (int i = 0; i < 64; i++) p[i] = (unsigned char)i;
  p = realloc(p, 1 << 20);                       /* grow: moves */
  ck_assert_ptr_nonnull(p);
  for (int i = 0; i < 64; i++) ck_assert_uint_eq(p[i], (unsigned)i);
  p = realloc(p, 16);                            /* shrink */
  ck_assert_ptr_nonnull(p);
  for (int i = 0; i < 16; i++) ck_assert_uint_eq(p[i], (unsigned)i);
  free(p);
}
END_TEST

START_TEST(alloc_realloc_failure_keeps_block)
{
  char *p = malloc(32);
  strcpy(p, "still here");
  errno = 0;
  ck_assert_ptr_null(realloc(p, huge));
  ck_assert_int_eq(errno, ENOMEM);
  ck_assert_str_eq(p, "still here");
  free(p);
}
END_TEST

START_TEST(alloc_reallocarray_rules)
{
  char *p = reallocarray(NULL, 10, 10);
  ck_assert_ptr_nonnull(p);
  strcpy(p, "kept");
  errno = 0;
  ck_assert_ptr_null(reallocarray(p, half, 2));  /* overflow: NULL + ENOMEM, block untouched */
  ck_assert_int_eq(errno, ENOMEM);
  ck_assert_str_eq(p, "kept");
  p = reallocarray(p, 100, 100);
  ck_assert_ptr_nonnull(p);
  ck_assert_str_eq(p, "kept");
  ck_assert_uint_ge(malloc_usable_size(p), 10000);
  free(p);
}
END_TEST

START_TEST(alloc_reallocarr_reallocf_cfree)
{
  char *p = NULL;
  ck_assert_int_eq(reallocarr(&p, 4, 8), 0);
  ck_assert_ptr_nonnull(p);
  ck_assert_int_eq(reallocarr(&p, 0, 8), 0);     /* NetBSD: a zero size frees and clears */
  ck_assert_ptr_null(p);
  ck_assert_int_eq(reallocarr(&p, 4, 8), 0);
  char *old = p;
  ck_assert_int_eq(reallocarr(&p, half, 2), EOVERFLOW);
  ck_assert_ptr_eq(p, old);                      /* unchanged on failure */
  errno = 0;
  ck_assert_ptr_null(reallocf(p, huge));         /* reallocf frees the block it could not grow */
  ck_assert_int_eq(errno, ENOMEM);
  void *q = malloc(8);
  cfree(q);
}
END_TEST

START_TEST(alloc_posix_memalign_einval)
{
  /* Not a power of two, or a power of two below sizeof(void *) (4 on 64-bit platforms, 2 on 32-bit). */
  static const size_t bad[] = {0, 3, sizeof(void *) / 2, 12, 24, 48};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    void *p = (void *)0x1;
    ck_assert_int_eq(posix_memalign(&p, bad[i], 16), EINVAL);
    ck_assert_ptr_eq(p, (void *)0x1);                  /* *out untouched */
  }
}
END_TEST

START_TEST(alloc_posix_memalign_aligned)
{
  for (size_t a = sizeof(void *); a <= ((size_t)1 << 21); a *= 2) {
    void *p = NULL;
    ck_assert_int_eq(posix_memalign(&p, a, 100), 0);
    ck_assert_ptr_nonnull(p);
    ck_assert(aligned_to(p, a));
    memset(p, 1, 100);
    free(p);
  }
  void *p = (void *)0x1;
  errno = 0;
  ck_assert_int_eq(posix_memalign(&p, 64, huge), ENOMEM);
  ck_assert_ptr_eq(p, (void *)0x1);
  ck_assert_int_eq(errno, 0);                    /* failure is the return value; errno untouched */
}
END_TEST

START_TEST(alloc_aligned_alloc_rules)
{
  errno = 0;
  ck_assert_ptr_null(aligned_alloc(24, 48));
  ck_assert_int_eq(errno, EINVAL);
  errno = 0;
  ck_assert_ptr_null(aligned_alloc(0, 48));
  ck_assert_int_eq(errno, EINVAL);
  void *p = aligned_alloc(256, 100);             /* size need not be a multiple (C17) */
  ck_assert_ptr_nonnull(p);
  ck_assert(aligned_to(p, 256));
  free(p);
  p = aligned_alloc(4096, 8192);
  ck_assert(aligned_to(p, 4096));
  free(p);
  errno = 0;
  ck_assert_ptr_null(aligned_alloc(64, huge));
  ck_assert_int_eq(errno, ENOMEM);
}
END_TEST

START_TEST(alloc_memalign_valloc_pvalloc)
{
  size_t ps = (size_t)sysconf(_SC_PAGESIZE);
  void *p = memalign(24, 10);                    /* rounded up to 32, like glibc */
  ck_assert_ptr_nonnull(p);
  ck_assert(aligned_to(p, 32));
  free(p);
  p = memalign(1, 10);                           /* small alignment: plain malloc */
  ck_assert_ptr_nonnull(p);
  free(p);
  for (size_t a = 9; a <= 16; a++) {             /* rounded up to 16, even for tiny blocks */
    for (size_t n = 1; n <= 8; n++) {
      p = memalign(a, n);
      ck_assert(aligned_to(p, 16));
      free(p);
    }
  }
  p = memalign(1 << 16, 10);
  ck_assert(aligned_to(p, 1 << 16));
  free(p);
  p = valloc(10);
  ck_assert(aligned_to(p, ps));
  free(p);
  p = pvalloc(10);                               /* whole pages */
  ck_assert(aligned_to(p, ps));
  ck_assert_uint_ge(malloc_usable_size(p), ps);
  free(p);
  p = pvalloc(0);                                /* at least one page */
  ck_assert_ptr_nonnull(p);
  ck_assert_uint_ge(malloc_usable_size(p), ps);
  free(p);
  errno = 0;
  ck_assert_ptr_null(pvalloc(huge + 4000));      /* rounding overflows */
  ck_assert_int_eq(errno, ENOMEM);
}
END_TEST

/* Debian's mimalloc 2.0.9 gets these wrong by itself (mimalloc issue #700): power-of-two sizes of
 * 256..1024 bytes at an alignment of 32..size came back only 128-byte aligned.  Sizes of 8 bytes or
 * less come from mimalloc's 8-byte class, only 8-aligned: memalign(16, 8) must not take plain malloc. */
START_TEST(alloc_aligned_small_pow2)
{
  unsigned bad = 0;
  for (size_t a = 16; a <= 4096; a *= 2) {
    for (size_t s = 1; s <= 4096; s += (s < 64 ? 1 : 16)) {
      void *p = aligned_alloc(a, s), *q = NULL;
      ck_assert_int_eq(posix_memalign(&q, a, s), 0);
      void *r = memalign(a, s);
      bad += !aligned_to(p, a) + !aligned_to(q, a) + !aligned_to(r, a);
      free(p), free(q), free(r);
    }
  }
  ck_assert_uint_eq(bad, 0);
}
END_TEST

Suite *alloc_suite(void)
{
  Suite *s = suite_create("alloc");
  TCase *tc = tcase_create("alloc");
  tcase_add_test(tc, alloc_malloc_zero_unique);
  tcase_add_test(tc, alloc_malloc_huge_enomem);
  tcase_add_test(tc, alloc_malloc_served_by_mimalloc);
  tcase_add_test(tc, alloc_calloc_zeroes);
  tcase_add_test(tc, alloc_calloc_overflow_enomem);
  tcase_add_test(tc, alloc_realloc_null_is_malloc);
  tcase_add_test(tc, alloc_realloc_keeps_contents);
  tcase_add_test(tc, alloc_realloc_failure_keeps_block);
  tcase_add_test(tc, alloc_reallocarray_rules);
  tcase_add_test(tc, alloc_reallocarr_reallocf_cfree);
  tcase_add_test(tc, alloc_posix_memalign_einval);
  tcase_add_test(tc, alloc_posix_memalign_aligned);
  tcase_add_test(tc, alloc_aligned_alloc_rules);
  tcase_add_test(tc, alloc_memalign_valloc_pvalloc);
  tcase_add_test(tc, alloc_aligned_small_pow2);
  suite_add_tcase(s, tc);
  return s;
}
