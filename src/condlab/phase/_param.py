"""Coordinates of the phase diagram (Luo, Xu, Ma, Zhang, JMLR 2021) and the named schemes on it.

A two-layer network ``f(x) = (1/alpha) sum_k a_k sigma(w_k . x~)`` with ``a_k ~ N(0, beta1^2)``
and ``w_k ~ N(0, beta2^2 I)`` (x~ = (x, 1): the bias is the last entry of w_k) sits at

    gamma  = lim -log(kappa)  / log m,   kappa  = beta1 * beta2 / alpha
    gamma' = lim -log(kappa') / log m,   kappa' = beta1 / beta2

Our choice of the scales for a grid point (one of many with the same limits):
``alpha = m^gamma``, ``beta1 = m^(-gamma'/2)``, ``beta2 = m^(gamma'/2)``, so that kappa = m^-gamma and
kappa' = m^-gamma' hold exactly at every width (no constants to wash out).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

BOUNDARY_MARGIN = 0.15  # distance in (gamma, gamma') within which a point is "near the boundary"


@dataclass(frozen=True)
class Scales:
    """The scales of one network: output divisor alpha, std beta1 of a, std beta2 of w."""

    alpha: float
    beta1: float
    beta2: float

    @property
    def kappa(self) -> float:
        return self.beta1 * self.beta2 / self.alpha

    @property
    def kappa_prime(self) -> float:
        return self.beta1 / self.beta2


@dataclass(frozen=True)
class Scheme:
    """A named initialization of the talk's table: its scales at width m, input dimension d."""

    name: str
    source: str
    alpha: str      # formulas as printed in the table (documentation)
    beta1: str
    beta2: str
    gamma: float
    gamma_prime: float
    regime: str     # the talk's regime for (gamma, gamma')

    def scales(self, m: int, d: int = 1) -> Scales:
        """(alpha, beta1, beta2) of this scheme at width m and input dimension d (bias not counted)."""
        a, b1, b2 = _SCHEME_SCALES[self.name](m, d)
        return Scales(a, b1, b2)


_SCHEME_SCALES = {
    "lecun": lambda m, d: (1.0, math.sqrt(1 / m), math.sqrt(1 / d)),
    "he": lambda m, d: (1.0, math.sqrt(2 / m), math.sqrt(2 / d)),
    "xavier": lambda m, d: (1.0, math.sqrt(2 / (m + 1)), math.sqrt(2 / (m + d))),
    "ntk": lambda m, d: (math.sqrt(m), 1.0, 1.0),
    "mean-field": lambda m, d: (float(m), 1.0, 1.0),
}

SCHEMES: dict[str, Scheme] = {s.name: s for s in [
    Scheme("lecun", "LeCun et al., 2012", "1", "sqrt(1/m)", "sqrt(1/d)", 0.5, 0.5, "linear"),
    Scheme("he", "He et al., 2015", "1", "sqrt(2/m)", "sqrt(2/d)", 0.5, 0.5, "linear"),
    Scheme("xavier", "Glorot and Bengio, 2010", "1", "sqrt(2/(m+1))", "sqrt(2/(m+d))", 1.0, 0.0,
           "critical"),
    Scheme("ntk", "Jacot et al., 2018", "sqrt(m)", "1", "1", 0.5, 0.0, "linear"),
    Scheme("mean-field", "Mei et al., 2018; Sirignano and Spiliopoulos, 2020", "m", "1", "1", 1.0, 0.0,
           "critical"),
]}


def scales(gamma: float, gamma_prime: float, m: int) -> Scales:
    """(alpha, beta1, beta2) = (m^gamma, m^(-gamma'/2), m^(gamma'/2)): kappa = m^-gamma, kappa' = m^-gamma'
    (our choice; see the module docstring)."""
    if m < 1:
        raise ValueError(f"width m={m} is not accepted: it must be >= 1")
    return Scales(float(m) ** gamma, float(m) ** (-gamma_prime / 2), float(m) ** (gamma_prime / 2))


def coordinates(s: Scales, m: int) -> tuple[float, float]:
    """The finite-width estimate (-log kappa / log m, -log kappa' / log m) of (gamma, gamma')."""
    if m < 2:
        raise ValueError(f"width m={m} is not accepted: coordinates need m >= 2")
    lm = math.log(m)
    return -math.log(s.kappa) / lm, -math.log(s.kappa_prime) / lm


def theory_regime(gamma: float, gamma_prime: float, tol: float = 1e-9) -> str:
    """The JMLR theorems: 'linear' if gamma < 1 or gamma' > gamma - 1; 'condensed' if gamma > 1 and
    gamma' < gamma - 1; 'critical' on the boundary (within tol)."""
    if gamma < 1 - tol or gamma_prime > gamma - 1 + tol:
        return "linear"
    if gamma > 1 + tol and gamma_prime < gamma - 1 - tol:
        return "condensed"
    return "critical"


def boundary_distance(gamma: float, gamma_prime: float) -> float:
    """Euclidean distance in (gamma, gamma') to the boundary {gamma = 1, gamma' <= 0} u {gamma' = gamma - 1,
    gamma >= 1} between the linear and the condensed regime."""
    # segment 1: the half-line gamma = 1, gamma' <= 0
    d1 = abs(gamma - 1) if gamma_prime <= 0 else math.hypot(gamma - 1, gamma_prime)
    # segment 2: the half-line gamma' = gamma - 1 from (1, 0) along (1, 1)/sqrt 2
    t = ((gamma - 1) + gamma_prime) / 2
    d2 = abs(gamma_prime - gamma + 1) / math.sqrt(2) if t >= 0 else math.hypot(gamma - 1, gamma_prime)
    return min(d1, d2)


def rescaled_time(t: float, s: Scales) -> float:
    """The normalized time of the JMLR paper, t_bar = t / (beta1 beta2), where t is gradient-flow time
    (for gradient descent, the sum of the step sizes) on R = (1/2n) sum (f - y)^2.

    In the normalized variables a_bar = a / beta1, w_bar = w / beta2 the flow reads
    da_bar/dt_bar = -(kappa/kappa') ..., dw_bar/dt_bar = -kappa kappa' ... (the talk's slide), so t_bar
    is the clock on which the normalized parameters move at rates set by kappa and kappa' only.
    """
    return t / (s.beta1 * s.beta2)


def kernel_time(t: float, s: Scales, m: int) -> float:
    """t_bar times the width's kernel scale, t_hat = t_bar m kappa^2 (kappa' + 1/kappa') (our addition).

    In the normalized flow df/dt_bar is a sum of m neuron terms of size kappa^2 / kappa' (output
    weights) and kappa^2 kappa' (input weights): t_hat is t_bar in units of that rate, the clock on
    which different widths at one (gamma, gamma') start to fit at the same pace (t_bar alone does not
    line them up: at the mean-field point beta1 beta2 = 1, so t_bar = t).
    """
    return rescaled_time(t, s) * m * s.kappa**2 * (s.kappa_prime + 1 / s.kappa_prime)
