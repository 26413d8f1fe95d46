"""Coordinates of the phase diagrams and the named schemes on them, for two and three layers.

Two layers (Luo, Xu, Ma, Zhang, JMLR 2021): ``f(x) = (1/alpha) sum_k a_k sigma(w_k . x~)`` with
``a_k ~ N(0, beta1^2)`` and ``w_k ~ N(0, beta2^2 I)`` (x~ = (x, 1): the bias is the last entry of w_k)
sits at

    gamma  = lim -log(kappa)  / log m,   kappa  = beta1 * beta2 / alpha
    gamma' = lim -log(kappa') / log m,   kappa' = beta1 / beta2

Our choice of the scales for a grid point (one of many with the same limits):
``alpha = m^gamma``, ``beta1 = m^(-gamma'/2)``, ``beta2 = m^(gamma'/2)``, so that kappa = m^-gamma and
kappa' = m^-gamma' hold exactly at every width (no constants to wash out).

Three layers (after Zhou, Zhou, Jin, Luo, Zhang, Xu, NeurIPS 2022; our choice, see
docs/phase_diagram.md "Three layers"):

    f(x) = (1/alpha) sum_k a_k sigma( sum_j W2_kj sigma(W1_j . x~) ),   x~ = (x, 1)

with W1 ~ N(0, beta1^2) (m x 2: weight and bias of the first hidden layer), W2 ~ N(0, beta2^2) (m x m,
no bias), a ~ N(0, beta3^2); both hidden layers have width m. The paper's own coordinates (named
gamma2, gamma3 there) could not be sourced here. Ours: gradient flow of this ReLU network depends on
the four scales only through kappa0 = beta1 beta2 beta3 / alpha and two ratios of the betas (scaling
every beta by s and alpha by s^3 only rescales time), so three coordinates, all scale-free:

    kappa  = beta1 beta2 beta3 sqrt(m) / alpha     gamma  = lim -log kappa  / log m
    kappa' = beta3 / beta1                         gamma' = lim -log kappa' / log m
    kappa2 = beta2 sqrt(m) / beta1                 gamma2 = lim -log kappa2 / log m

kappa and kappa' generalize the two-layer ones (output scale; output-layer std over first-layer std),
and the two-layer table's schemes keep their (gamma, gamma') here; gamma2 compares the middle layer's
std, in units of its fan-in scale 1/sqrt(m), with the first layer's (0 for LeCun, He, NTK and
mean-field; -1/2 for Xavier). A grid point (one choice of the free overall scale):
``beta1 = m^(gamma'/2)``, ``beta3 = m^(-gamma'/2)``, ``beta2 = m^(gamma'/2 - gamma2 - 1/2)``,
``alpha = m^(gamma + gamma'/2 - gamma2)``: kappa = m^-gamma, kappa' = m^-gamma', kappa2 = m^-gamma2.
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


# Three layers: the same (gamma, gamma') plus gamma2, the middle layer's scale (module docstring).


@dataclass(frozen=True)
class Scales3:
    """The scales of one three-layer network: output divisor alpha, stds beta1 (W1), beta2 (W2),
    beta3 (a), at width m."""

    alpha: float
    beta1: float
    beta2: float
    beta3: float
    m: int

    @property
    def kappa(self) -> float:
        return self.beta1 * self.beta2 * self.beta3 * math.sqrt(self.m) / self.alpha

    @property
    def kappa_prime(self) -> float:
        return self.beta3 / self.beta1

    @property
    def kappa2(self) -> float:
        return self.beta2 * math.sqrt(self.m) / self.beta1


def scales3(gamma: float, gamma_prime: float, m: int, gamma2: float = 0.0) -> Scales3:
    """(alpha, beta1, beta2, beta3) of a grid point at width m: kappa = m^-gamma, kappa' = m^-gamma',
    kappa2 = m^-gamma2 exactly (our choice; see the module docstring)."""
    if m < 1:
        raise ValueError(f"width m={m} is not accepted: it must be >= 1")
    fm, h = float(m), gamma_prime / 2
    return Scales3(fm ** (gamma + h - gamma2), fm**h, fm ** (h - gamma2 - 0.5), fm**-h, m)


def coordinates3(s: Scales3) -> tuple[float, float, float]:
    """The finite-width estimate (gamma, gamma', gamma2) = -log(kappa, kappa', kappa2) / log m."""
    if s.m < 2:
        raise ValueError(f"width m={s.m} is not accepted: coordinates need m >= 2")
    lm = math.log(s.m)
    return -math.log(s.kappa) / lm, -math.log(s.kappa_prime) / lm, -math.log(s.kappa2) / lm


@dataclass(frozen=True)
class Scheme3:
    """A named initialization written for three layers (d = 1): the two-layer table's scheme with the
    same rule for the added middle layer; `regime` is the two-layer talk's (a conjecture here).
    Xavier sits at gamma2 = -1/2, off the gamma2 = 0 slice (drawn there at its (gamma, gamma'))."""

    name: str
    gamma: float
    gamma_prime: float
    gamma2: float
    regime: str

    def scales(self, m: int, d: int = 1) -> Scales3:
        """(alpha, beta1, beta2, beta3) of this scheme at width m (fan-in of W1: d, bias not counted)."""
        alpha, b1, b2, b3 = _SCHEME3_SCALES[self.name](m, d)
        return Scales3(alpha, b1, b2, b3, m)


# W1 has fan-in d, W2 and a fan-in m; NTK and mean-field put the inner 1/sqrt(m) into beta2 (standard
# parameterization, one step size for every weight), mean-field divides the output by m.
_SCHEME3_SCALES = {
    "lecun": lambda m, d: (1.0, math.sqrt(1 / d), math.sqrt(1 / m), math.sqrt(1 / m)),
    "he": lambda m, d: (1.0, math.sqrt(2 / d), math.sqrt(2 / m), math.sqrt(2 / m)),
    "xavier": lambda m, d: (1.0, math.sqrt(2 / (m + d)), math.sqrt(1 / m), math.sqrt(2 / (m + 1))),
    "ntk": lambda m, d: (math.sqrt(m), 1.0, math.sqrt(1 / m), 1.0),
    "mean-field": lambda m, d: (float(m), 1.0, math.sqrt(1 / m), 1.0),
}

SCHEMES3: dict[str, Scheme3] = {s.name: s for s in [
    Scheme3("lecun", 0.5, 0.5, 0.0, "linear"),
    Scheme3("he", 0.5, 0.5, 0.0, "linear"),
    Scheme3("xavier", 1.0, 0.0, -0.5, "critical"),
    Scheme3("ntk", 0.5, 0.0, 0.0, "linear"),
    Scheme3("mean-field", 1.0, 0.0, 0.0, "critical"),
]}


def lazy_exponents(gamma: float, gamma_prime: float, gamma2: float = 0.0) -> dict[str, float]:
    """Exponents e_l of RD(theta_l) ~ m^e_l from our scaling heuristic (not from any paper).

    Linearize: f moves O(1) in time 1/K, K = sum over weights of (df/dtheta)^2 (the tangent kernel), so
    a weight moves (df/dtheta) / K. In log_m units with sizes s1, s2, s3 of W1, W2, a and alpha = m^al:
    h1 ~ s1, h2 ~ s1 s2 sqrt(m) (random sums), df/da ~ s1 s2 sqrt(m)/alpha, df/dW2 ~ s3 s1/alpha,
    df/dW1 ~ s3 s2 sqrt(m)/alpha; K = max(m (df/da)^2, m^2 (df/dW2)^2, m (df/dW1)^2). If the output
    layer outgrows its start (while the hidden layers stay, a random-feature fit: f is linear in a),
    the estimate is repeated once with a at its changed size; for two layers this step gives the
    JMLR boundary gamma' = gamma - 1.
    Where a hidden layer outgrows its start, the linearization has failed and e_l is only a hint.
    """
    h = gamma_prime / 2
    b = {"w1": h, "w2": h - gamma2 - 0.5, "a": -h}     # log_m of the scales3() point's betas
    al = gamma + h - gamma2

    def changes(size: dict[str, float]) -> dict[str, float]:
        d = {"a": size["w1"] + size["w2"] + 0.5 - al, "w2": size["a"] + size["w1"] - al,
             "w1": size["a"] + size["w2"] + 0.5 - al}
        k = max(1 + 2 * d["a"], 2 + 2 * d["w2"], 1 + 2 * d["w1"])
        return {layer: d[layer] - k for layer in b}

    first = changes(b)
    e = {layer: first[layer] - b[layer] for layer in b}
    if e["a"] > 0:  # (whenever a outgrows its start: keeps e_l continuous in the coordinates)
        second = changes({**b, "a": first["a"]})
        e.update({layer: second[layer] - b[layer] for layer in ("w1", "w2")})
    return e
