"""The null model's test (chance_p <= NULL_ALPHA of _structures.py) with margins, compiled (numba).

The regularized incomplete beta function (continued fraction, as scipy's betainc to ~1e-13)
for the cap share and the binomial tail, and a bound of both without continued fractions
(`_tail_bound`) that decides most condensed groups at once.
"""

from __future__ import annotations

import math

from condlab.analysis._cluster_jit import compile_in

try:
    import numba
except ImportError:
    numba = None


def _betacf(a, b, x):
    """Continued fraction of the incomplete beta function (modified Lentz; Numerical Recipes)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for i in range(1, 100000):
        m2 = 2 * i
        aa = i * (b - i) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + i) * (qab + i) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def _ibeta(a, b, x):
    """Regularized incomplete beta I_x(a, b) (scipy's betainc), to ~1e-13 relative."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x)
                     + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def _null(r, m, k, margin, r_min, alpha):
    """Whether chance_p (_structures.py) of a group is <= alpha: 1 / 0, or -1 when undecided.

    r (n,): the members' angles to the group's mean line, ascending. chance_p = min over j of
    m·Pr[Bin(m - 1, P(2 r_j)) >= j - 1] (capped at 1), P the cap share I_{sin²}((k - 1)/2, 1/2),
    the binomial tail I_P(j - 1, m - j + 1) (scipy's bdtrc(j - 2, m - 1, P)). Each term grows
    with r_j, so terms at r_j + margin bound chance_p from above (1 as soon as one is <= alpha)
    and terms at r_j - margin from below (0 when all stay above alpha); a relative margin of
    1e-6 covers the incomplete beta's rounding (~1e-13).
    """
    # The result is 1 as soon as any term's upper value clears alpha, whatever the others, so
    # the upper values are tried first, last terms first (a tight group's smallest is there),
    # and the lower values only for a group that none of them decides.
    half = (k - 1) / 2
    log_beta = math.lgamma(half) + math.lgamma(0.5) - math.lgamma(half + 0.5)
    for j in range(len(r), 1, -1):
        x = _sin2(r[j - 1] + margin, r_min)
        if m * _tail_bound(j - 1, m - 1, x, half, log_beta) * (1 + 2e-6) <= alpha:
            return 1  # even a bound above the term clears alpha
        if m * _tail_low(j - 1, m - 1, x, half, log_beta) * (1 - 2e-6) > alpha:
            continue  # even a bound below it does not
        share = _ibeta(half, 0.5, x)
        if math.floor((m - 1) * share * (1 - 1e-6)) >= j - 1:
            # j - 1 <= floor of the mean, at or below the median: the tail is >= 1/2, so the
            # term is >= m / 2 > alpha (alpha < 1/2), at r_j + margin and r_j - margin alike
            continue
        if m * _ibeta(j - 1.0, m - j + 1.0, share) * (1 + 1e-6) <= alpha:
            return 1
    for j in range(len(r), 1, -1):
        x = _sin2(r[j - 1] - margin, r_min)
        if min(1.0, m * _tail_low(j - 1, m - 1, x, half, log_beta) * (1 - 2e-6)) * (1 - 1e-6) > alpha:
            continue
        share = _ibeta(half, 0.5, x)
        if math.floor((m - 1) * share * (1 - 1e-6)) >= j - 1:
            continue
        if min(1.0, m * _ibeta(j - 1.0, m - j + 1.0, share)) * (1 - 1e-6) <= alpha:
            return -1
    return 0


def _tail_bound(t, N, x, a, log_beta):
    """An upper bound (or 1) of Pr[Bin(N, P) >= t], P = I_x(a, 1/2) the cap share, without a
    continued fraction: P <= x^a / (a B(a, 1/2) sqrt(1 - x)) (the integrand's (1 - s)^(-1/2)
    at its largest), the tail <= exp(-N D(t/N || P)) (Chernoff; P^N at t = N) above the mean.
    Both are bounds of the exact values, whose rounding is far below the callers' 1e-6."""
    if x >= 1.0 or x <= 0.0:
        return 1.0
    p = math.exp(a * math.log(x) - math.log(a) - log_beta) / math.sqrt(1.0 - x)
    q = t / N
    if p >= q or p >= 1.0:
        return 1.0
    if t == N:
        return math.exp(N * math.log(p))
    d = q * math.log(q / p) + (1.0 - q) * math.log((1.0 - q) / (1.0 - p))
    return math.exp(-N * d)


def _tail_low(t, N, x, a, log_beta):
    """A lower bound of Pr[Bin(N, P) >= t] (t >= 1), P = I_x(a, 1/2) the cap share: the
    probability of exactly t at P' = (x^a / a + x^(a+1) / (2 (a + 1))) / B(a, 1/2) <= P (the
    integrand's (1 - s)^(-1/2) >= 1 + s / 2); the tail grows with P."""
    if x >= 1.0:
        return 1.0
    if x <= 0.0:
        return 0.0
    p = (math.exp(a * math.log(x) - math.log(a) - log_beta)
         + math.exp((a + 1) * math.log(x) - math.log(2 * (a + 1)) - log_beta))
    if p >= 1.0:
        return 0.0
    return math.exp(math.lgamma(N + 1.0) - math.lgamma(t + 1.0) - math.lgamma(N - t + 1.0)
                    + t * math.log(p) + (N - t) * math.log1p(-p))


def _sin2(r, r_min):
    """sin² of twice the angle r (degrees), floored at r_min and capped at 90: cap_share's x."""
    return math.sin(math.radians(min(90.0, 2 * max(r, r_min)))) ** 2


if numba is not None:
    compile_in(globals(), ("_betacf", "_ibeta", "_null", "_tail_bound", "_tail_low", "_sin2"))
