/* test_mathfn.c - the sampler's log and expm1 (lib/mathfn.c, compiled into this program) against libm's,
 * in units in the last place of libm's result.  Where they run: log on (0, 1] (the sampler's -log(u), u
 * a 53-bit uniform) and on 2^-1000 .. 2^1000; expm1 on -50 .. 0, spread over its magnitudes (the
 * sampler's -s/R: tiny for small blocks, below -40 for a block 40 times the rate).  Both are within 4 ulp
 * by their construction (a reduction exact to within an ulp, series truncated below 1e-17, a few roundings);
 * libm's are within 1.  Seeded, 10^6 arguments each. */
#include <math.h>
#include <stdint.h>

#include "mathfn.h"
#include "suites.h"

#if MPROF_PPROF

#define N 1000000
#define ULP_MAX 4.0

static uint64_t next(uint64_t *x)
{
  *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
  return *x;
}

static double unit(uint64_t *x) { return (double)((next(x) >> 11) + 1) * 0x1.0p-53; }   /* (0, 1] */

static double ulps(double got, double want)
{
  if (got == want) return 0;
  double ulp = nextafter(fabs(want), INFINITY) - fabs(want);
  return fabs(got - want) / ulp;
}

START_TEST(mathfn_log_within_4_ulp)
{
  uint64_t x = 0x6c6f67u;
  double worst = 0, at = 0;
  for (int i = 0; i < N; i++) {
    double u = i % 2 ? unit(&x) : ldexp(0.5 + unit(&x) / 2, (int)(next(&x) % 2001) - 1000);
    double e = ulps(mprof_math_log(u), log(u));
    if (e > worst) worst = e, at = u;
  }
  ck_assert_msg(worst <= ULP_MAX, "log(%a): %.2f ulp", at, worst);
}
END_TEST

START_TEST(mathfn_expm1_within_4_ulp)
{
  uint64_t x = 0x65786dull;
  double worst = 0, at = 0;
  for (int i = 0; i < N; i++) {
    double v = -exp(log(1e-15) + unit(&x) * (log(50.0) - log(1e-15)));   /* -1e-15 .. -50 */
    double e = ulps(mprof_math_expm1(v), expm1(v));
    if (e > worst) worst = e, at = v;
  }
  ck_assert_msg(worst <= ULP_MAX, "expm1(%a): %.2f ulp", at, worst);
  ck_assert(mprof_math_expm1(-0.0) == 0);
  ck_assert(mprof_math_expm1(-1000) == -1);
}
END_TEST

Suite *mathfn_suite(void)
{
  Suite *s = suite_create("mathfn");
  TCase *tc = tcase_create("mathfn");
  tcase_add_test(tc, mathfn_log_within_4_ulp);
  tcase_add_test(tc, mathfn_expm1_within_4_ulp);
  suite_add_tcase(s, tc);
  return s;
}

#endif
