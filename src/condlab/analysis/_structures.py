"""Lines, arcs and chance: what a cap-based cluster of unit rows really is.

A cap of angular radius arccos(cos_threshold) is only a first cut. Three questions follow
(issue 8), each answered from the members' angles and nothing else:

* **Gap rule** (are two caps one line, or one cap two lines?). Project the members of two
  nearby clusters, each flipped to its centre's side, on the plane of the two centres and
  read their angles there; the clusters are *separate* only when the band between the two
  centres holds an empty gap or its middle half holds fewer than MIN_FILL of the points
  between the centres (few points cannot show a gap). Within one cluster, the members'
  angles along its principal tangent axis are split at an empty gap the same way. An empty
  gap must be at least
  ``max(GAP_MIN_DEG, span / (n + 1) * (ln(n + 1) + GAP_MARGIN))``: n points spread uniformly
  over `span` leave a largest gap of about span·ln(n)/n, and the margin puts the chance that
  a uniform arc shows such a gap below e^-GAP_MARGIN ≈ 2 %.
* **Arc or line.** A group whose members' angles along its principal tangent axis span
  (5 %-95 % quantiles) at least ARC_DEG is an *arc*: a continuous band, not a line. A line
  with Gaussian angular noise sigma spans 3.3 sigma, so lines with sigma up to 6° are lines.
* **Null model** (is the group more than chance?). For m isotropic rows in R^k, the share of
  rows within angle r of a fixed line is P(r) = I_{sin² r}((k - 1)/2, 1/2) (regularized
  incomplete beta; 2r/pi for k = 2). A group whose j closest members lie within r_j of its
  mean has j - 1 members within 2 r_j of its closest member, so it is *condensed* only when,
  for some j, m · Pr[Binomial(m - 1, P(2 r_j)) >= j - 1] <= NULL_ALPHA: a union bound over
  the m rows that could be that member. (Measuring r from the data's own mean instead would
  halve the radius of chance pairs and let them pass: 0.3 false lines per layer at 40 × 6.)
  Radii are floored at R_MIN_DEG (rounding and duplicate rows).

A count asks for the same group's mean line up to five times (band test against every
other piece, gap split, null model, arc width, the cluster itself), so `Groups` computes
each group's mean, aligned rows and axis angles once per U; results are bit-identical to
calling the plain functions (same arrays, same operations, only not repeated).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import bdtrc, betainc

GAP_MIN_DEG = 4.0
GAP_MARGIN = 4.0
ARC_DEG = 20.0
NULL_ALPHA = 0.01
R_MIN_DEG = 1.0
MIN_FILL = 0.25  # share of the band's points that its middle half must hold to join two caps
MERGE_MAX_DEG = 60.0  # clusters farther apart than this are never tested for a common arc
SPLIT_DEPTH = 8  # a group splits at most this many times
_FAR_COS = math.cos(math.radians(MERGE_MAX_DEG + 1e-3))


def _aligned(U: np.ndarray, centre: np.ndarray) -> np.ndarray:
    """Rows of U flipped to the side of centre (a line has no sign)."""
    s = np.sign(U @ centre)
    return U * np.where(s == 0, 1.0, s)[:, None]


def mean_line(U: np.ndarray) -> np.ndarray:
    """Unit sign-free mean of unit rows (n, k): the top eigenvector of sum u uᵀ."""
    _, vecs = np.linalg.eigh(U.T @ U)
    return vecs[:, -1]


def needed_gap(span: float, n: int) -> float:
    """Smallest empty band (degrees) that separates two groups among n angles over `span` degrees."""
    return max(GAP_MIN_DEG, span / (n + 1) * (math.log(n + 1) + GAP_MARGIN))


def axis_angles(U: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Angles (n,) in degrees of unit rows U (n, k) along their principal tangent axis; and the mean."""
    c = mean_line(U)
    return _axis_phi(_aligned(U, c), c), c


def _axis_phi(A: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Angles of rows A (n, k), aligned to their mean line c, along their principal tangent axis."""
    T = A - np.outer(A @ c, c)
    if A.shape[1] < 2 or not np.any(T):
        return np.zeros(len(A))
    v = np.linalg.svd(T, full_matrices=False)[2][0]
    return np.degrees(np.arctan2(T @ v, A @ c))


def width_deg(U: np.ndarray) -> float:
    """5 %-95 % span (degrees) of the members' angles along the principal tangent axis."""
    if len(U) < 2:
        return 0.0
    return _span(axis_angles(U)[0])


def _span(phi: np.ndarray) -> float:
    q = np.quantile(phi, [0.05, 0.95])  # one call: the same values as two scalar quantiles
    return float(q[1] - q[0])


class Groups:
    """Unit rows U (n, k) and, per group of rows (sorted index array), its measures, each once.

    ``mean(g)`` = mean_line(U[g]), ``axis(g)`` = axis_angles(U[g])[0], ``width(g)`` =
    width_deg(U[g]), ``chance(g, m)`` = chance_p(U[g], m): the same values, memoized by g.
    """

    def __init__(self, U: np.ndarray):
        self.U = U
        self._memo: dict[tuple, object] = {}

    def _get(self, kind: str, g: np.ndarray, make):
        key = (kind, g.dtype.str, g.tobytes())
        value = self._memo.get(key)
        if value is None:
            value = self._memo[key] = make()
        return value

    def mean(self, g: np.ndarray) -> np.ndarray:
        return self._get("mean", g, lambda: mean_line(self.U[g]))

    def aligned(self, g: np.ndarray, flip: bool = False) -> np.ndarray:
        """U[g] flipped to the side of its mean line (of minus it when flip)."""
        return self._get("flip" if flip else "aligned", g,
                         lambda: _aligned(self.U[g], -self.mean(g) if flip else self.mean(g)))

    def axis(self, g: np.ndarray) -> np.ndarray:
        return self._get("axis", g, lambda: _axis_phi(self.aligned(g), self.mean(g)))

    def width(self, g: np.ndarray) -> float:
        return 0.0 if len(g) < 2 else self._get("width", g, lambda: _span(self.axis(g)))

    def radii(self, g: np.ndarray) -> np.ndarray:
        """Angles (degrees) between the members of g and their mean line, ascending."""
        return self._get("radii", g, lambda: np.sort(np.degrees(np.arccos(
            np.clip(np.abs(self.aligned(g) @ self.mean(g)), 0.0, 1.0)))))

    def far(self, g: np.ndarray, r: float) -> int:
        """Members of g at an angle of at least r degrees from their mean line."""
        radii = self.radii(g)
        return len(radii) - int(np.searchsorted(radii, r))

    def is_arc(self, g: np.ndarray) -> bool:
        """width(g) >= ARC_DEG; the 5-95 % span never exceeds the full range (up to rounding,
        ~1e-13 degrees), so a group whose range is clearly below ARC_DEG needs no quantiles."""
        if len(g) < 2:
            return 0.0 >= ARC_DEG
        phi = self.axis(g)
        if float(phi.max() - phi.min()) < ARC_DEG - 1e-6:
            return False
        return self.width(g) >= ARC_DEG

    def chance(self, g: np.ndarray, m: int) -> float:
        return self._get(f"chance{m}", g, lambda: _chance(self.U[g], self.mean(g), m))


def _largest_gap(phi: np.ndarray, min_side: int) -> tuple[float, float]:
    """(gap, cut) of the widest gap between sorted angles leaving >= min_side on each side."""
    s = np.sort(phi)
    if len(s) < 2 * min_side:
        return 0.0, 0.0
    gaps = np.diff(s)[min_side - 1: len(s) - min_side]
    if gaps.size == 0:
        return 0.0, 0.0
    i = int(np.argmax(gaps)) + min_side - 1
    return float(s[i + 1] - s[i]), float((s[i] + s[i + 1]) / 2)


def split_by_gap(U: np.ndarray | Groups, members: np.ndarray, min_side: int,
                 depth: int = 0) -> list[np.ndarray]:
    """Cut a group (member indices into U) at empty gaps along its principal axis, recursively."""
    G = U if isinstance(U, Groups) else Groups(U)
    if depth >= SPLIT_DEPTH or len(members) < 2 * min_side:
        return [members]
    phi = G.axis(members)
    gap, cut = _largest_gap(phi, min_side)
    if gap < needed_gap(float(phi.max() - phi.min()), len(members)):
        return [members]
    return (split_by_gap(G, members[phi < cut], min_side, depth + 1)
            + split_by_gap(G, members[phi >= cut], min_side, depth + 1))


def joined_by_band(U: np.ndarray | Groups, a: np.ndarray, b: np.ndarray) -> bool:
    """Whether groups a, b (indices into U) fill the band between their centres without a gap."""
    G = U if isinstance(U, Groups) else Groups(U)
    return _joined(G, a, b, G.mean(a), G.mean(b))


def _joined(G: Groups, a: np.ndarray, b: np.ndarray, ca: np.ndarray, cb: np.ndarray) -> bool:
    """joined_by_band of groups a, b whose mean lines ca, cb are given."""
    flip = bool(ca @ cb < 0)
    if flip:
        cb = -cb
    alpha = math.degrees(math.acos(min(1.0, float(ca @ cb))))
    if alpha > MERGE_MAX_DEG:
        return False
    e2 = cb - (cb @ ca) * ca
    norm = math.sqrt(e2.dot(e2))  # = np.linalg.norm(e2), which is sqrt(e2.dot(e2)) for 1-D
    if norm < 1e-12:
        return True  # same line
    # The angle of a member of a in the plane of (ca, cb), measured from ca, is at most its
    # angle to ca (likewise for b around cb), so only members at least alpha / 4 from their
    # own mean can fall in the middle half of the band. Fewer than 2 such members: the band
    # is not filled, the same answer as below without projecting anything (the margin of
    # 1e-3 degrees is far above the rounding of either angle).
    if G.far(a, alpha / 4 - 1e-3) + G.far(b, alpha / 4 - 1e-3) < 2:
        return False
    e2 /= norm
    rows = np.concatenate([G.aligned(a), G.aligned(b, flip)])
    phi = np.degrees(np.arctan2(rows @ e2, rows @ ca))
    inside = phi[(phi > 0) & (phi < alpha)]
    band = np.sort(np.concatenate([[0.0, alpha], inside]))
    # Few points cannot show an empty gap, so the band must also be visibly filled: its middle
    # half holds at least a quarter of the points between the centres (half, if uniform).
    middle = np.count_nonzero((inside > alpha / 4) & (inside < 3 * alpha / 4))
    filled = middle >= max(2, MIN_FILL * len(inside))
    return filled and float(np.diff(band).max()) < needed_gap(alpha, len(inside))


def merge_by_band(U: np.ndarray | Groups, pieces: list[np.ndarray]) -> list[np.ndarray]:
    """Union of pieces (index arrays into U) whose bands have no gap; largest piece first."""
    G = U if isinstance(U, Groups) else Groups(U)
    parent = list(range(len(pieces)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    means = [G.mean(p) for p in pieces]
    # Pairs clearly farther apart than MERGE_MAX_DEG are never joined: skip them in one product
    # (a margin of 1e-3 degrees, far above the rounding of the cosines, leaves _joined the rest).
    near = np.abs(np.stack(means) @ np.stack(means).T) >= _FAR_COS if len(pieces) > 1 else None
    for i in range(len(pieces)):
        for j in range(i + 1, len(pieces)):
            if near[i, j] and root(i) != root(j) and _joined(G, pieces[i], pieces[j], means[i], means[j]):
                parent[root(j)] = root(i)
    groups: dict[int, list[np.ndarray]] = {}
    for i, piece in enumerate(pieces):
        groups.setdefault(root(i), []).append(piece)
    return [np.sort(np.concatenate(g)) for g in groups.values()]


def cap_share(r_deg: np.ndarray, k: int) -> np.ndarray:
    """Share of isotropic unit vectors in R^k within r degrees of a fixed line (either sign)."""
    s2 = np.sin(np.radians(np.clip(r_deg, 0.0, 90.0))) ** 2
    return betainc((k - 1) / 2, 0.5, s2)


def chance_p(U: np.ndarray, m: int) -> float:
    """Union-bound p-value that isotropic rows (m of them, in R^k) form a group as tight as U (n, k)."""
    n, k = U.shape
    if k < 2 or n < 2:
        return 1.0
    return _chance(U, mean_line(U), m)


def _chance(U: np.ndarray, c: np.ndarray, m: int) -> float:
    """chance_p of rows U (n, k) whose mean line c is already known."""
    n, k = U.shape
    if k < 2 or n < 2:
        return 1.0
    r = np.sort(np.degrees(np.arccos(np.clip(np.abs(U @ c), 0.0, 1.0))))
    P = cap_share(2 * np.maximum(r[1:], R_MIN_DEG), k)  # j = 2..n members
    j = np.arange(2, n + 1)
    p = m * bdtrc(j - 2, m - 1, P)  # bdtrc(k, N, P) = Pr[Bin(N, P) > k] = Pr[>= j - 1]
    return float(min(1.0, p.min()))
