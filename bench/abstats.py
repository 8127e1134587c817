# abstats.py - the statistics of pcpmalloc-ab (standard library only).
#
# Summaries as mmtests' compare reports print them (Min, Median, Hmean, Stddev), Welch's
# two-sample t-test with an exact two-sided p-value from Student's t distribution (computed
# here through the regularised incomplete beta function), and geometric means of ratios.
import math

ALPHA = 0.05   # significance level of welch(): 95 %


def mean(xs):
    return sum(xs) / len(xs)


def median(xs):
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def hmean(xs):
    """Harmonic mean; 0 when any sample is 0 (as the limit), NaN for negative samples."""
    if any(x < 0 for x in xs):
        return math.nan
    if any(x == 0 for x in xs):
        return 0.0
    return len(xs) / sum(1.0 / x for x in xs)


def stddev(xs):
    """Sample standard deviation (n - 1); 0 for a single sample."""
    n = len(xs)
    if n < 2:
        return 0.0
    m = mean(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1))


def gmean(xs):
    xs = [x for x in xs if x > 0]
    if not xs:
        return math.nan
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def summary(xs):
    return {'n': len(xs), 'min': min(xs), 'median': median(xs), 'hmean': hmean(xs),
            'mean': mean(xs), 'stddev': stddev(xs), 'max': max(xs)}


# --- Student's t distribution ----------------------------------------------------------------

def _betacf(a, b, x):
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = 1.0
    d = 1.0 - qab * x / qap
    d = tiny if abs(d) < tiny else d
    d = 1.0 / d
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = tiny if abs(d) < tiny else d
        c = 1.0 + aa / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = tiny if abs(d) < tiny else d
        c = 1.0 + aa / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def betainc(a, b, x):
    """Regularised incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbeta = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    front = math.exp(lbeta + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_sf2(t, df):
    """Two-sided p-value P(|T| >= |t|) for Student's t with df degrees of freedom."""
    if math.isinf(t):
        return 0.0
    return betainc(df / 2.0, 0.5, df / (df + t * t))


def welch(a, b, alpha=ALPHA):
    """Welch's unequal-variance t-test of samples a and b.

    Returns (t, df, p, significant).  Fewer than two samples on a side give p = NaN and
    significant = False (nothing can be said).  Two constant samples that differ are
    significant (p = 0); equal constant samples are not (p = 1)."""
    na, nb = len(a), len(b)
    if na < 2 or nb < 2:
        return (math.nan, math.nan, math.nan, False)
    ma, mb = mean(a), mean(b)
    va, vb = stddev(a) ** 2 / na, stddev(b) ** 2 / nb
    se2 = va + vb
    if se2 == 0.0:
        if ma == mb:
            return (0.0, math.nan, 1.0, False)
        return (math.copysign(math.inf, ma - mb), math.nan, 0.0, True)
    t = (ma - mb) / math.sqrt(se2)
    df = se2 * se2 / ((va * va / (na - 1) if va else 0.0) + (vb * vb / (nb - 1) if vb else 0.0))
    p = t_sf2(t, df)
    return (t, df, p, p < alpha)


def pct_gain(base, value, higher_is_better=False):
    """mmtests' convention: the % change, positive when value is better than base."""
    if base == 0 or math.isnan(base) or math.isnan(value):
        return math.nan
    d = (value - base) / abs(base) * 100.0
    return d if higher_is_better else -d
