/* mathfn.h - log and expm1, computed here (no libm): finite arguments; x > 0 and x <= 0.  It includes
 * nothing: the tests compile mathfn.c in without the library's other headers. */
#ifndef MPROF_MATHFN_H
#define MPROF_MATHFN_H


double mprof_math_log(double x);
double mprof_math_expm1(double x);

#endif /* MPROF_MATHFN_H */
