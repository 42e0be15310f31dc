"""harness_stats.py - the statistics of bench/harness.py: medians, paired ratios and differences with their
distribution-free (order-statistic) intervals, geometric means."""
import math
import statistics


def sign_interval(xs, conf=0.95):
    """Order-statistic interval for the median of xs: the narrowest [x(k), x(n+1-k)] whose coverage
    (from Binomial(n, 1/2)) is >= conf; [min, max] when even that is below conf.  Returns lo, hi, coverage."""
    xs = sorted(xs)
    n = len(xs)
    if n == 0:
        return None, None, 0.0
    best_k, best_cov = 1, 1 - 2 * 0.5 ** n if n > 1 else 0.0
    for k in range(1, n // 2 + 1):
        cov = 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2 ** n
        if cov >= conf:
            best_k, best_cov = k, cov
        else:
            break
    return xs[best_k - 1], xs[n - best_k], best_cov


def ratio_stats(num, den):
    pairs = [(x, y) for x, y in zip(num, den) if x is not None and y is not None and y > 0]
    if not pairs:
        return None
    rs = [x / y for x, y in pairs]
    lo, hi, cov = sign_interval(rs)
    return dict(median=statistics.median(rs), lo=lo, hi=hi, coverage=cov, n=len(rs),
                verdict="slower" if lo > 1 else "faster" if hi < 1 else "same")


def diff_stats(num, den):
    """Per-round differences num - den (paired rounds): median, its order-statistic interval, mean."""
    ds = [x - y for x, y in zip(num, den) if x is not None and y is not None]
    if not ds:
        return None
    lo, hi, cov = sign_interval(ds)
    return dict(median=statistics.median(ds), lo=lo, hi=hi, coverage=cov, n=len(ds), mean=statistics.mean(ds))


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def geomean(rs):
    return math.exp(statistics.mean(math.log(r) for r in rs)) if rs else None
