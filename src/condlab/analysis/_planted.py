"""Planted layers with a known number of lines: the counting benchmark's classes (issue 18).

Used by benchmarks/counting_accuracy.py (all layers) and tests/test_counting_planted.py (a fixed
subset); neither imports the other. The classes, their sizes, seeds and targets were registered
before the counter they judge was first run on them (docs/analysis.md, "Counting orientations").

Conventions (every class):

* A *line* has a unit axis µ drawn uniformly on the sphere S^{k-1}; the axes of one layer are drawn
  together and redrawn until every pair is at least the class's separation apart (as lines, i.e.
  arccos |µ_a·µ_b|).
* A member of a line with angular spread σ is exp_µ(t), t = σ·z with z ~ N(0, I) in the tangent
  space of µ (k-1 dimensions): σ is the std of the angle per tangent dimension. Each member gets
  a random sign (lines are axial) and an amplitude uniform in [1, 2] unless the class says otherwise.
* Lines of one layer share its members equally (the first lines take the remainder); the rows are
  shuffled, so the row order says nothing.
* Layer i of class c uses ``np.random.default_rng([c, i])`` (c = the class's index in CLASSES);
  development and tuning use seeds ``[c, 10_000 + i]`` (``dev=True``), never the registered ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CLASSES = ("tight", "broad", "elongated", "heavy-amplitudes", "giant", "background", "arc",
           "random", "close-pairs", "wide", "diffuse")
LAYERS = {"tight": 60, "broad": 40, "elongated": 40, "heavy-amplitudes": 30, "giant": 20,
          "background": 40, "arc": 40, "random": 200, "close-pairs": 40, "wide": 5, "diffuse": 36}
DEV_OFFSET = 10_000  # development seeds: [class, DEV_OFFSET + i]


@dataclass(frozen=True)
class Planted:
    """One labelled layer: W (m, k) and what was planted in it."""

    W: np.ndarray
    n_lines: int  # planted lines (the arc of the arc class is not a line)
    n_arcs: int
    info: dict


def _unit(X: np.ndarray) -> np.ndarray:
    return X / np.linalg.norm(X, axis=-1, keepdims=True)


def _axes(rng: np.random.Generator, n: int, k: int, sep_deg: float) -> np.ndarray:
    """(n, k) uniform random unit axes, redrawn (1000 sets at a time) until pairwise >= sep_deg."""
    if n <= 1:
        return _unit(rng.standard_normal((n, k)))
    limit = np.cos(np.radians(sep_deg))
    off = ~np.eye(n, dtype=bool)
    for _ in range(2000):
        L = _unit(rng.standard_normal((1000, n, k)))
        ok = (np.abs(L @ L.transpose(0, 2, 1))[:, off] <= limit).all(axis=1)
        if ok.any():
            return L[np.argmax(ok)]
    raise RuntimeError(f"could not place {n} lines {sep_deg} deg apart in k = {k}")


def _tangent(rng: np.random.Generator, mu: np.ndarray, n: int) -> np.ndarray:
    """(n, k) standard normal vectors in the tangent space of the unit vector mu."""
    Z = rng.standard_normal((n, len(mu)))
    return Z - np.outer(Z @ mu, mu)


def _exp_map(mu: np.ndarray, T: np.ndarray) -> np.ndarray:
    """Unit rows exp_mu(t) for tangent vectors T (n, k) (angles in radians)."""
    r = np.linalg.norm(T, axis=1, keepdims=True)
    direction = np.divide(T, r, out=np.zeros_like(T), where=r > 0)
    return np.cos(r) * mu + np.sin(r) * direction


def line_members(rng: np.random.Generator, mu: np.ndarray, n: int, sigma_deg: float) -> np.ndarray:
    """(n, k) unit members of the line mu, isotropic spread sigma_deg per tangent dimension."""
    return _exp_map(mu, np.radians(sigma_deg) * _tangent(rng, mu, n))


def _signed(rng: np.random.Generator, U: np.ndarray) -> np.ndarray:
    return U * rng.choice([-1.0, 1.0], size=(len(U), 1))


def _shares(m: int, n: int) -> list[int]:
    return [m // n + (i < m % n) for i in range(n)]


def _lines(rng, m: int, k: int, n_lines: int, sigma_deg, sep_deg: float) -> np.ndarray:
    """(m, k) signed unit rows on n_lines lines (equal shares), sigma_deg a float or one per line."""
    L = _axes(rng, n_lines, k, sep_deg)
    sig = np.broadcast_to(np.asarray(sigma_deg, dtype=float), (n_lines,))
    U = np.concatenate([line_members(rng, mu, c, s) for mu, c, s in
                        zip(L, _shares(m, n_lines), sig, strict=True)])
    return _signed(rng, U)


def _finish(rng, U: np.ndarray, amp: np.ndarray | None = None) -> np.ndarray:
    amp = rng.uniform(1.0, 2.0, size=len(U)) if amp is None else amp
    W = U * amp[:, None]
    return W[rng.permutation(len(W))]


def _tight(rng):
    K = int(rng.integers(1, 7))
    m = int(rng.choice([20, 50, 200, 1000] if K <= 3 else [50, 200, 1000]))
    k = int(rng.choice([2, 3, 6, 16, 64] if K <= 3 else [3, 6, 16, 64]))
    sig = rng.uniform(1.0, 3.0, size=K)
    W = _finish(rng, _lines(rng, m, k, K, sig, 30.0))
    return Planted(W, K, 0, {"m": m, "k": k, "sigma": sig.tolist()})


def _broad(rng):
    K = int(rng.integers(1, 5))
    m, k = int(rng.choice([50, 200, 1000])), int(rng.choice([3, 6, 16]))
    sig = float(rng.uniform(3.0, 10.0))
    sep = max(30.0, 6 * sig)
    W = _finish(rng, _lines(rng, m, k, K, sig, sep))
    return Planted(W, K, 0, {"m": m, "k": k, "sigma": sig, "sep": sep})


def _elongated(rng):
    m, k = int(rng.choice([50, 200])), int(rng.choice([3, 6, 16]))
    sig = float(rng.uniform(5.0, 10.0))
    mu = _axes(rng, 1, k, 0.0)[0]
    Z = _tangent(rng, mu, m) * np.radians(sig / 3)  # sigma/3 across
    e = _unit(_tangent(rng, mu, 1))[0]  # the long tangent axis
    Z += np.outer(rng.standard_normal(m) * np.radians(sig) - Z @ e, e)  # sigma along e
    U = _signed(rng, _exp_map(mu, Z))
    return Planted(_finish(rng, U), 1, 0, {"m": m, "k": k, "sigma_long": sig})


def _heavy(rng):
    log_sd = float(rng.choice([1.0, 2.0]))
    U = _lines(rng, 200, 6, 3, 2.0, 30.0)
    amp = np.exp(log_sd * rng.standard_normal(200))
    return Planted(_finish(rng, U, amp), 3, 0, {"m": 200, "k": 6, "log_sd": log_sd})


def _giant(rng):
    K, m = int(rng.integers(2, 5)), int(rng.choice([50, 200]))
    U = _lines(rng, m, 6, K, 2.0, 30.0)  # line 1's members come first
    amp = rng.uniform(1.0, 2.0, size=m)
    amp[0] *= 1000.0  # one neuron of line 1, 1000x
    return Planted(_finish(rng, U, amp), K, 0, {"m": m, "k": 6})


def _background(rng):
    K = int(rng.integers(1, 5))
    m, k = int(rng.choice([100, 500])), int(rng.choice([3, 6, 16]))
    frac = float(rng.uniform(0.2, 0.6))
    n_iso = int(round(frac * m))
    U = np.concatenate([_lines(rng, m - n_iso, k, K, 2.0, 30.0), _unit(rng.standard_normal((n_iso, k)))])
    return Planted(_finish(rng, U), K, 0, {"m": m, "k": k, "isotropic": n_iso})


def _arc(rng, i: int):
    m, k = int(rng.choice([50, 200])), int(rng.choice([3, 6]))
    width = float(rng.uniform(30.0, 120.0))
    with_line = i % 2 == 1  # odd layers add one separate line
    n_line = m // 3 if with_line else 0
    Q = np.linalg.qr(rng.standard_normal((k, k)))[0]  # Q[:, :2] spans the arc's circle
    phi = np.radians(rng.uniform(-width / 2, width / 2, size=m - n_line))
    across = np.radians(1.0) * rng.standard_normal((m - n_line, k - 2)) @ Q[:, 2:].T
    centre = np.outer(np.cos(phi), Q[:, 0]) + np.outer(np.sin(phi), Q[:, 1])
    U = [_exp_map_rows(centre, across)]
    if with_line:
        for _ in range(100_000):  # axis uniform, redrawn until >= 40 deg from the circle
            mu = _unit(rng.standard_normal(k))
            if np.degrees(np.arccos(min(1.0, np.linalg.norm(mu @ Q[:, :2])))) >= 40.0:
                break
        U.append(line_members(rng, mu, n_line, 2.0))
    U = _signed(rng, np.concatenate(U))
    return Planted(_finish(rng, U), int(with_line), 1, {"m": m, "k": k, "width": width})


def _exp_map_rows(C: np.ndarray, T: np.ndarray) -> np.ndarray:
    """exp_{c_i}(t_i) row by row; each t_i is orthogonal to its c_i."""
    r = np.linalg.norm(T, axis=1, keepdims=True)
    direction = np.divide(T, r, out=np.zeros_like(T), where=r > 0)
    return np.cos(r) * C + np.sin(r) * direction


RANDOM_M, RANDOM_K = (20, 50, 200, 1000), (2, 3, 6, 16, 64)


def _random(rng, i: int):
    cell = i % (len(RANDOM_M) * len(RANDOM_K))  # a grid: 10 layers per (m, k) over 200
    m, k = RANDOM_M[cell // len(RANDOM_K)], RANDOM_K[cell % len(RANDOM_K)]
    return Planted(rng.standard_normal((m, k)), 0, 0, {"m": m, "k": k})


def _close(rng):
    m, k = int(rng.choice([50, 200])), int(rng.choice([3, 6, 16]))
    sep = float(rng.uniform(10.0, 30.0))
    a = _axes(rng, 1, k, 0.0)[0]
    e = _unit(_tangent(rng, a, 1))[0]
    b = np.cos(np.radians(sep)) * a + np.sin(np.radians(sep)) * e
    U = np.concatenate([line_members(rng, mu, c, sep / 6)
                        for mu, c in zip((a, b), _shares(m, 2), strict=True)])
    return Planted(_finish(rng, _signed(rng, U)), 2, 0, {"m": m, "k": k, "sep": sep})


def _wide(rng):
    K, k = int(rng.integers(1, 5)), int(rng.choice([6, 32]))
    return Planted(_finish(rng, _lines(rng, 100_000, k, K, 2.0, 30.0)), K, 0, {"m": 100_000, "k": k})


# (k, variance ratio) cells of the diffuse class: the rows' median angle to the long direction is
# >= 60 deg in each (about arctan(sqrt(k - 1) / (0.674 sqrt(ratio))): 68-79 deg)
DIFFUSE_CELLS = ((16, 2.0), (16, 4.0), (65, 5.0), (65, 20.0), (201, 5.0), (201, 20.0))
DIFFUSE_M = (200, 1000)


def _diffuse(rng, i: int):
    """Gaussian rows x ~ N(0, I + (ratio - 1) v vᵀ): one direction with `ratio` x the variance of
    the others, in many inputs -- anisotropy, not condensation (no orientation is shared)."""
    k, ratio = DIFFUSE_CELLS[i % len(DIFFUSE_CELLS)]
    m = DIFFUSE_M[(i // len(DIFFUSE_CELLS)) % len(DIFFUSE_M)]
    v = _unit(rng.standard_normal(k))
    X = rng.standard_normal((m, k))
    X += (np.sqrt(ratio) - 1.0) * np.outer(X @ v, v)
    return Planted(X, 0, 0, {"m": m, "k": k, "ratio": ratio})


def planted(name: str, i: int, *, dev: bool = False) -> Planted:
    """Layer i of class `name` (one of CLASSES): registered seed [class, i], or [class, 10000 + i]."""
    c = CLASSES.index(name)
    rng = np.random.default_rng([c, DEV_OFFSET + i if dev else i])
    make = {"tight": _tight, "broad": _broad, "elongated": _elongated, "heavy-amplitudes": _heavy,
            "giant": _giant, "background": _background, "close-pairs": _close, "wide": _wide}
    if name == "arc":
        return _arc(rng, i)
    if name == "random":
        return _random(rng, i)
    if name == "diffuse":
        return _diffuse(rng, i)
    return make[name](rng)
