/* mathfn.c - the two functions of libm the sampler needs, log and expm1, computed here.
 *
 * The library does not link libm: in a program that does not use it otherwise, loading it cost 290 KiB of
 * resident memory (its pages mapped by the kernel around the few the loader and these two functions
 * touch), more than the profiler's tables of a typical run.  The sampler needs -log(u) for u in
 * (0, 1] (the exponential distance to the next sample) and -expm1(-s/R) for s, R > 0 (the probability
 * of a sample, whose inverse is its weight).  Both are computed to within a few units in the last place
 * (tests/test_mathfn.c compares them with libm's over 10^6 arguments: log within 2 ulp, expm1 within 1),
 * far below what could move an estimate: a relative error of 1e-15 in a weight is a bias of 1e-15.
 *
 * Both reduce the argument to a small range by the exponent of 2 and sum a short series there; the bits
 * of a double are read and written with memcpy.  Finite arguments only (the sampler's are).
 */
#include "mathfn.h"

#include <stdint.h>
#include <string.h>

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
 * s = (m - 1) / (m + 1), |s| <= 0.1716, = 2s (1 + s^2/3 + s^4/5 + ...): 11 terms leave less than 1e-17.
 * The polynomials are written out with constant coefficients (Horner), no division or loop in them: about
 * 45 instructions, as many as libm's. */
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
  p = 1.0 / 19 + z * p;
  p = 1.0 / 17 + z * p;
  p = 1.0 / 15 + z * p;
  p = 1.0 / 13 + z * p;
  p = 1.0 / 11 + z * p;
  p = 1.0 / 9 + z * p;
  p = 1.0 / 7 + z * p;
  p = 1.0 / 5 + z * p;
  p = 1.0 / 3 + z * p;
  double log_m = 2 * s + 2 * s * z * p;
  return (double)e * LN2_HI + ((double)e * LN2_LO + log_m);
}

/* 1/k! for k = 0..18. */
#define F2  (1.0 / 2)
#define F3  (F2 / 3)
#define F4  (F3 / 4)
#define F5  (F4 / 5)
#define F6  (F5 / 6)
#define F7  (F6 / 7)
#define F8  (F7 / 8)
#define F9  (F8 / 9)
#define F10 (F9 / 10)
#define F11 (F10 / 11)
#define F12 (F11 / 12)
#define F13 (F12 / 13)
#define F14 (F13 / 14)
#define F15 (F14 / 15)
#define F16 (F15 / 16)
#define F17 (F16 / 17)
#define F18 (F17 / 18)

/* (exp(x) - 1) / x - 1 - x/2 = x^2/3! + x^3/4! + ..., to x^7/8! (x^8/9! < 4e-23 for |x| < 2^-7) or to
 * x^16/17! (x^17/18! < 2e-21 for |x| < 1/2). */
static inline double expm1_tail(double x, int long_series)
{
  double p = 0;
  if (long_series) {
    p = F18;
    p = F17 + x * p;
    p = F16 + x * p;
    p = F15 + x * p;
    p = F14 + x * p;
    p = F13 + x * p;
    p = F12 + x * p;
    p = F11 + x * p;
    p = F10 + x * p;
    p = F9 + x * p;
  }
  p = F8 + x * p;
  p = F7 + x * p;
  p = F6 + x * p;
  p = F5 + x * p;
  p = F4 + x * p;
  p = F3 + x * p;
  return x * x * p;
}

/* expm1(x) = exp(x) - 1 for x <= 0.  Near 0 (x > -1/2) its series, which keeps the relative accuracy of
 * small results (the sampler's usual argument, -s/R, is tiny: 8 terms down to -2^-7); below, by
 * x = k log(2) + r (|r| <= log(2)/2), 2^k expm1(r) + (2^k - 1), where the series' error is scaled down
 * by 2^k; below -40, -1 (exp(-40) is below half an ulp of 1). */
double mprof_math_expm1(double x)
{
  if (x > -0.5) return x + (x * x * F2 + x * expm1_tail(x, x < -0x1p-7));
  if (x < -40) return -1;
  double k = (double)(long)(x / (LN2_HI + LN2_LO) - 0.5);   /* nearest integer (x < 0) */
  double r = (x - k * LN2_HI) - k * LN2_LO;
  double scale = of_bits((uint64_t)(1023 + (long)k) << 52);   /* 2^k, k in [-58, -1] */
  return scale * (r + (r * r * F2 + r * expm1_tail(r, 1))) + (scale - 1);
}
