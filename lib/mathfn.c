/* mathfn.c - the two functions of libm the sampler needs, log and expm1, computed here.
 *
 * The library does not link libm: in a program that does not use it otherwise, loading it cost 290 KiB of
 * resident memory (its pages mapped by the kernel around the few the loader and these two functions
 * touch), more than the profiler's tables of a typical run.  The sampler needs -log(u) for u in
 * (0, 1] (the exponential distance to the next sample) and -expm1(-s/R) for s, R > 0 (the probability
 * of a sample, whose inverse is its weight).  Both are computed to within a few units in the last place
 * (tests/test_sampler.c compares them with libm's over 10^6 arguments), far below what could move an
 * estimate: a relative error of 1e-15 in a weight is a bias of 1e-15.
 *
 * Both reduce the argument to a small range by the exponent of 2 and sum a short series there; the bits
 * of a double are read and written with memcpy.  Finite arguments only (the sampler's are).
 */
#include <stdint.h>
#include <string.h>

double mprof_math_log(double x);      /* internal.h declares them for the library; tests compile this */
double mprof_math_expm1(double x);    /* file in, without the library's headers */

#define LN2_HI 6.93147180369123816490e-01   /* the 33 leading bits of log(2): k * LN2_HI is exact */
#define LN2_LO 1.90821492927058770002e-10   /* log(2) - LN2_HI */
#define SQRT2  1.41421356237309504880

static inline uint64_t bits_of(double x)
{
  uint64_t b;
  memcpy(&b, &x, sizeof b);
  return b;
}

static inline double of_bits(uint64_t b)
{
  double x;
  memcpy(&x, &b, sizeof x);
  return x;
}

/* log(x) for a normal x > 0.  x = 2^e * m with m in [sqrt(2)/2, sqrt(2)); log(m) = 2 atanh(s) with
 * s = (m - 1) / (m + 1), |s| <= 0.1716, = 2s (1 + s^2/3 + s^4/5 + ...): 11 terms leave less than 1e-17. */
double mprof_math_log(double x)
{
  uint64_t b = bits_of(x);
  int e = (int)((b >> 52) & 0x7ff) - 1023;
  double m = of_bits((b & 0x000fffffffffffffull) | 0x3ff0000000000000ull);   /* [1, 2) */
  if (m > SQRT2) {
    m *= 0.5;
    e++;
  }
  double f = m - 1, s = f / (2 + f), z = s * s;
  double p = 1.0 / 21;
  for (int k = 9; k >= 1; k--) p = 1.0 / (2 * k + 1) + z * p;
  double log_m = 2 * s + 2 * s * z * p;
  return (double)e * LN2_HI + ((double)e * LN2_LO + log_m);
}

/* exp(r) for |r| <= log(2)/2: its series to r^17/17! (less than 1e-19 left). */
static double exp_small(double r)
{
  double p = 1;
  for (int k = 17; k >= 1; k--) p = 1 + r / k * p;
  return p;
}

/* expm1(x) = exp(x) - 1 for x <= 0.  Near 0 (x > -1/2) its series, which keeps the relative accuracy of
 * small results; below, exp(x) by x = k log(2) + r, and then the subtraction, where exp(x) < 0.61 loses
 * nothing; below -40, -1 (exp(-40) is below half an ulp of 1). */
double mprof_math_expm1(double x)
{
  if (x > -0.5) {
    double p = 1;
    for (int k = 18; k >= 2; k--) p = 1 + x / k * p;
    return x * p;
  }
  if (x < -40) return -1;
  double k = (double)(long)(x / (LN2_HI + LN2_LO) - 0.5);   /* nearest integer (x < 0) */
  double r = (x - k * LN2_HI) - k * LN2_LO;
  double scale = of_bits((uint64_t)(1023 + (long)k) << 52);   /* 2^k, k in [-58, 0] */
  return exp_small(r) * scale - 1;
}
