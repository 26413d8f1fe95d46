"""Arcs: neurons spread flat and continuously along one great circle, not condensed on a line.

A set of rows is an *arc* when it holds at least ARC_MIN_ROWS rows and, along the great circle
that fits it best (its axial mean and main tangent direction), is

* wide: sqrt(12) × the std of its angles along the circle >= ARC_MIN_DEG (the width of a flat
  band with that std);
* one-dimensional: that std >= ARC_ANISOTROPY × its rms spread across the circle per dimension;
* flat, not peaked: the range of the angles over their std is below what a Gaussian sample of
  that size shows with probability ARC_ALPHA (`flat_bound`: a studentized range test, one-sided)
  — a broad Gaussian line, however wide, is no arc;
* continuous: its largest gap between consecutive angles is one that uniform angles leave with
  probability >= GAP_ALPHA (union bound over the n − 1 spacings: gap <= (1 − (GAP_ALPHA /
  (n − 1))^(1/(n − 2))) × range), so two lines side by side are no arc.

Candidates are the mixture's groups and *chains* of groups (a sparse arc is fitted by several
components with chance gaps between them): two groups are chained when, along the circle through
their axes, the empty gap between them passes the continuity test for their union; chains are
closed transitively. A chain is an arc when it passes the tests above and its angles are better
described by one flat band than by one Gaussian per group (BIC); otherwise it is cut at its
widest gap between groups and each part is tested again, down to single groups.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ._memo import memoized

ARC_MIN_ROWS = 20
ARC_MIN_DEG = 20.0
ARC_ANISOTROPY = 4.0
ARC_ALPHA = 0.05
GAP_ALPHA = 0.01
FLAT_NULL_DRAWS, FLAT_NULL_SEED = 4000, 20261127  # the simulated null of `flat_bound`
LANCZOS_MIN = 192  # above this size on both sides (dims, members): Lanczos, not a dense eigh


def top_vector(X: np.ndarray, M: np.ndarray, fallback: np.ndarray, out_of: np.ndarray | None = None
               ) -> np.ndarray:
    """Top eigenvector (P, k) of each member scatter Σ_i M_i x_i x_iᵀ: rows X (P, n, k), 0/1
    weights M (P, n), the unit vector `out_of` (P, k) projected out of every row if given;
    `fallback` (P, k) where the scatter is 0.

    Computed on the smaller side: the k × k scatter when k <= the largest member count, else the
    c × c Gram matrix of the c member rows (top eigenvector w, then Yᵀw / ‖Yᵀw‖: the same vector,
    as Y Yᵀ and Yᵀ Y share their nonzero spectrum). A 768 x 3072 layer (GPT-2's MLP output)
    has groups of a few hundred rows: a 3072² eigenproblem per group took minutes. Where both
    sides exceed LANCZOS_MIN (a trained 3072 x 768 layer: lines of a thousand rows in 768
    dimensions), a dense eigh would cost O(side³) for one vector: `_top_lanczos` instead.
    """
    c = int(M.sum(axis=1).max(initial=0))
    if may_use_lanczos(c, X.shape[2]):
        return _top_lanczos(X, M, fallback, out_of)
    if X.shape[2] <= c:
        S = (X.transpose(0, 2, 1) * M[:, None, :]) @ X
        if out_of is not None:  # (I - vvᵀ) S (I - vvᵀ)
            v, vT = out_of[:, :, None], out_of[:, None, :]
            Sv = S @ v
            S = S - Sv * vT - v * Sv.transpose(0, 2, 1) + (vT @ Sv) * (v * vT)
        vec = np.linalg.eigh(S)[1][..., -1]
        some = np.abs(S).sum(axis=(1, 2)) > 0
    else:  # members first (stable: row order kept), the padding rows zero
        rows = np.argsort(M <= 0, axis=1, kind="stable")[:, :max(c, 1)]
        Y = np.take_along_axis(X, rows[..., None], axis=1) * np.take_along_axis(M, rows, axis=1)[..., None]
        if out_of is not None:
            Y -= (Y @ out_of[:, :, None]) * out_of[:, None, :]
        w = np.linalg.eigh(Y @ Y.transpose(0, 2, 1))[1][..., -1]
        vec = (w[:, None, :] @ Y)[:, 0]
        norm = np.linalg.norm(vec, axis=1, keepdims=True)
        vec /= np.maximum(norm, 1e-300)
        some = np.abs(Y).sum(axis=(1, 2)) > 0
    return np.where(some[:, None], vec, fallback)


def may_use_lanczos(m: int, k: int) -> bool:
    """Whether counting a layer of m rows and k inputs can take `_top_lanczos` (whose first call
    in a process imports scipy.sparse.linalg, ~0.2 s): a group needs more than LANCZOS_MIN
    members and dimensions."""
    return min(int(m), int(k)) > LANCZOS_MIN


def preload_lanczos() -> None:
    """Import what `_top_lanczos` needs now, e.g. before a loop whose counts must not stall once."""
    import scipy.sparse.linalg  # noqa: F401


def _top_lanczos(X: np.ndarray, M: np.ndarray, fallback: np.ndarray, out_of: np.ndarray | None
                 ) -> np.ndarray:
    """`top_vector` by Lanczos iterations (scipy's ``eigsh``, eigenvalue to 1e-9) on v -> Yᵀ(Y v),
    Y the member rows: a few dozen products with Y instead of forming and decomposing a k × k
    matrix. Where the top eigenvalue stands apart (a line's axis, an arc's tangent) it is the
    dense solver's vector to ~1e-9; where it does not (the tangent of a round line: no main
    direction) it is another vector of the near-degenerate top, as arbitrary as the dense one's.
    Started from `fallback` (a fixed start: the same vector on every call); where ARPACK does not
    converge, the dense eigh of that set."""
    from scipy.sparse.linalg import ArpackNoConvergence, LinearOperator, eigsh

    out = np.array(fallback, dtype=float, copy=True)
    for p in range(len(X)):
        on = M[p] > 0
        Y = X[p][on] * M[p][on, None]
        if out_of is not None:
            Y = Y - (Y @ out_of[p])[:, None] * out_of[p]
        if not np.abs(Y).sum() > 0:
            continue
        k = Y.shape[1]
        start = fallback[p] if np.abs(fallback[p]).sum() > 0 else np.ones(k)
        op = LinearOperator((k, k), matvec=lambda v, Y=Y: Y.T @ (Y @ v), dtype=Y.dtype)
        try:
            out[p] = eigsh(op, k=1, which="LA", v0=start, tol=1e-9)[1][:, 0]
        except ArpackNoConvergence:  # rare (a flat top spectrum): the dense solver never fails so
            out[p] = np.linalg.eigh(Y.T @ Y)[1][:, -1]
    return out


def gap_bound(n: np.ndarray) -> np.ndarray:
    """Largest spacing, as a share of the range, that n uniform values leave with prob. >= GAP_ALPHA."""
    n = np.maximum(np.asarray(n, dtype=float), 3.0)
    return 1.0 - (GAP_ALPHA / (n - 1.0)) ** (1.0 / (n - 2.0))


def band(X: np.ndarray, mask: np.ndarray, axis: np.ndarray) -> dict:
    """Shape of P candidate row sets along their great circles: rows X (P, n, k), members mask
    (P, n), fallback axes (P, k) (for an empty set). Angles t (P, n) (radians, 0 off the mask),
    their std `sd`, rms spread `across` per dimension, member count."""
    P, n, k = X.shape
    M = mask.astype(float)
    XT = X.transpose(0, 2, 1)
    V = top_vector(X, M, axis)  # the axis: top eigenvector of Σ u uᵀ
    c = (X @ V[..., None])[..., 0]  # (P, n)
    # main tangent direction: the top eigenvector of the members' scatter with the axis projected out
    E = top_vector(X, M, X[np.arange(P), np.argmax((1.0 - c * c) * M, axis=1)], out_of=V)
    V, E = V[:, None, :], E[:, None, :]
    t = np.arctan2((E @ XT)[:, 0] * np.sign(c), np.abs(c)) * M
    count = M.sum(1)
    cnt = np.maximum(count, 1.0)
    dev = (t - (t.sum(1) / cnt)[:, None]) * M
    m2 = (dev**2).sum(1) / cnt
    theta2 = np.arccos(np.minimum(np.abs(c), 1.0)) ** 2
    across2 = (np.maximum(theta2 - t * t, 0.0) * M).sum(1) / (cnt * max(k - 2, 1))
    return {"axis": V[:, 0], "along": E[:, 0], "t": t, "sd": np.sqrt(m2), "across": np.sqrt(across2),
            "count": count}


def arc_test(b: dict, mask: np.ndarray, k: int) -> np.ndarray:
    """(P,) whether each candidate of `band` is an arc (module docstring)."""
    ok = (b["count"] >= ARC_MIN_ROWS) & (np.degrees(math.sqrt(12.0) * b["sd"]) >= ARC_MIN_DEG)
    if k > 2:
        ok &= b["sd"] >= ARC_ANISOTROPY * b["across"]
    for p in np.flatnonzero(ok):
        t = np.sort(b["t"][p][mask[p]])
        span = t[-1] - t[0]
        ok[p] = np.diff(t).max() <= gap_bound(len(t)) * span  # continuous; then flat:
        ok[p] = ok[p] and span / t.std() < flat_bound(len(t))
    return ok


@functools.lru_cache(maxsize=256)
def flat_bound(n: int) -> float:
    """The ARC_ALPHA quantile of range / std of n Gaussian values (simulated once per n, fixed seed).

    A flat band's range is about sqrt(12) = 3.46 of its std; a Gaussian sample's grows with n
    (about 4.1 at n = 34), so a smaller ratio than the Gaussian's ARC_ALPHA quantile says flat.
    This studentized range test is more powerful against a flat band than the kurtosis at the
    sizes that matter here (a 34-row band: kurtosistest p ≈ 0.12). The simulated values are
    kept in condlab's cache folder (`_memo`), so a new process reads them instead.
    """
    # "v1": the simulation below; a change to it that changes its values must change the tag
    key = f"v1 draws={FLAT_NULL_DRAWS} seed={FLAT_NULL_SEED} alpha={ARC_ALPHA!r} numpy={np.__version__}"
    return memoized("flat_bound", key, n, _simulate_flat_bound)


def _simulate_flat_bound(n: int) -> float:
    """flat_bound(n), simulated."""
    rng = np.random.default_rng(FLAT_NULL_SEED)
    block = max(1, (1 << 20) // n)  # draws per block: at most ~8 MB at a time (an 8192-row band)
    ratios = []
    for start in range(0, FLAT_NULL_DRAWS, block):
        z = rng.standard_normal((min(block, FLAT_NULL_DRAWS - start), n))
        ratios.append(np.ptp(z, axis=1) / z.std(axis=1))
    return float(np.quantile(np.concatenate(ratios), ARC_ALPHA))


def chains(U: np.ndarray, row_group: np.ndarray, V: np.ndarray, live: np.ndarray) -> np.ndarray:
    """(B, K) chain root of each group (the smallest group index chained to it; -1: no group).

    Groups g, h (rows labelled g / h in row_group (B, n), axes V (B, K, k), live (B, K)) are
    chained when along the circle through their axes the gap between them passes the continuity
    test for their union.
    """
    B, n, k = U.shape
    K = V.shape[1]
    root = np.where(live, np.arange(K), -1)
    slots = np.flatnonzero(live.sum(axis=0) > 0)
    if slots.size < 2:
        return root
    M = (row_group[:, None, :] == slots[:, None]).astype(float)  # (B, L, n)
    N = M.sum(2)
    C = V[:, slots] @ U.transpose(0, 2, 1)  # (B, L, n)
    cos_gh = V[:, slots] @ V[:, slots].transpose(0, 2, 1)
    cd = np.minimum(np.abs(cos_gh), 1.0)
    # Screen: g's members lie within r_g (their largest angle to g's axis) of t = 0 along the
    # circle and h's within r_h of t = d, so the gap is >= d - R and the span <= d + R
    # (R = r_g + r_h); pairs with d (1 - bound) > R (1 + bound) cannot pass the continuity test.
    r = np.where(M > 0, np.arccos(np.minimum(np.abs(C), 1.0)), 0.0).max(axis=2)  # (B, L)
    R = r[:, :, None] + r[:, None, :]
    gb = gap_bound(N[:, :, None] + N[:, None, :])
    d = np.arccos(cd)
    cand = d * (1.0 - gb) <= (1.0 + gb) * R * (1.0 + 1e-6) + 1e-9
    cand &= (N[:, :, None] > 0) & (N[:, None, :] > 0)
    cand &= ~np.eye(len(slots), dtype=bool)
    b, g, h = np.nonzero(cand)
    link = np.zeros(cand.shape, dtype=bool)
    if b.size:
        link[b, g, h] = _gap_ok(C[b, g], C[b, h] * np.where(cos_gh[b, g, h] < 0, -1.0, 1.0)[:, None],
                                cd[b, g, h], M[b, g], M[b, h])
    link |= link.transpose(0, 2, 1)
    A = (link | np.eye(len(slots), dtype=bool)).astype(float)
    for _ in range(max(1, math.ceil(math.log2(len(slots))))):
        A = np.minimum(A @ A, 1.0)
    first = slots[np.argmax(A > 0, axis=2)]  # (B, L)
    root[:, slots] = np.where(live[:, slots], first, -1)
    return root


def _gap_ok(cg: np.ndarray, ch: np.ndarray, cd: np.ndarray, Mg: np.ndarray, Mh: np.ndarray) -> np.ndarray:
    """(P,) whether, along the circle from axis g toward axis h, the gap between g's and h's
    members passes the continuity test for their union: cosines of the rows to each axis cg, ch
    (P, n) (h's sign turned toward g), |cos| between the axes cd (P,), memberships Mg, Mh (P, n)."""
    sd = np.sqrt(np.maximum(1.0 - cd * cd, 0.0))[:, None]
    side = np.where(cg + ch < 0, -1.0, 1.0)
    y = np.divide(ch - cd[:, None] * cg, sd, out=np.zeros(ch.shape), where=sd > 1e-12)
    t = np.arctan2(side * y, side * cg)  # along the circle from g toward h
    Mu = np.maximum(Mg, Mh)
    nu = np.maximum(Mu.sum(-1), 1.0)
    big, small = 1e9, -1e9
    hi_g = np.where(Mg > 0, t, small).max(-1)
    lo_h = np.where(Mh > 0, t, big).min(-1)
    span = np.where(Mu > 0, t, small).max(-1) - np.where(Mu > 0, t, big).min(-1)
    return lo_h - hi_g <= gap_bound(nu) * span


def find_arcs(U: np.ndarray, row_group: np.ndarray, axes: np.ndarray, live: np.ndarray):
    """Arcs among the groups of a fitted stack: (arc (B, K), width (B, K) in degrees).

    row_group (B, n): each row's group slot (-1: none); axes (B, K, k): start axes of the groups;
    live (B, K): the group slots in use. arc[b, g] is the slot of the arc that group g belongs to
    (-1: g is a line); width[b, a] is arc a's width (sqrt(12) x the std of its angles).
    """
    B, n, k = U.shape
    K = axes.shape[1]
    M = row_group[:, None, :] == np.arange(K)[:, None]  # (B, K, n)
    V = axes.copy()  # group axes (B, K, k): top eigenvectors of the members' scatter, live groups only
    lay, grp = np.nonzero(live)
    if lay.size:
        X = U[lay]  # (G, n, k)
        V[lay, grp] = top_vector(X, M[lay, grp].astype(float), axes[lay, grp])
    chain = chains(U, row_group, V, live)
    arc, width = np.full((B, K), -1), np.zeros((B, K))
    size = M.sum(axis=2)  # (B, K) rows per group
    # rows per chain (indexed by its root): most chains are too small to be an arc, and are
    # left out here, in one pass, rather than one layer at a time below
    at = np.nonzero(live)
    rows = np.bincount(at[0] * K + chain[at], weights=size[at], minlength=B * K).reshape(B, K)
    lay, root = np.nonzero(live & (chain == np.arange(K)) & (rows >= ARC_MIN_ROWS))
    todo = [(b, np.flatnonzero(live[b] & (chain[b] == r)))
            for b, r in zip(lay.tolist(), root.tolist(), strict=True)]
    while todo:  # one batched test per level: a chain is an arc, or is cut and its parts tested next
        todo = [(b, g) for b, g in todo if size[b, g].sum() >= ARC_MIN_ROWS]
        if not todo:
            break
        b = np.array([b for b, _ in todo])
        mask = np.stack([M[i, g].any(axis=0) for i, g in todo])
        bnd = band(U[b], mask, V[b, [g[0] for _, g in todo]])
        ok = arc_test(bnd, mask, k)
        parts = []
        for i, (lb, groups) in enumerate(todo):
            t = bnd["t"][i]
            if ok[i] and (len(groups) == 1 or _flat_beats_lines(t, row_group[lb], groups)):
                arc[lb, groups], width[lb, groups[0]] = groups[0], np.degrees(math.sqrt(12.0) * bnd["sd"][i])
            elif len(groups) > 1:
                parts += [(lb, part) for part in _cut(t, row_group[lb], groups)]
        todo = parts
    return arc, width


def _cut(t: np.ndarray, row_group: np.ndarray, groups: np.ndarray) -> list[np.ndarray]:
    """The two parts of a chain of groups either side of the widest gap between its groups along
    its circle (angles t of the rows)."""
    lo = np.array([t[row_group == g].min() for g in groups])
    hi = np.array([t[row_group == g].max() for g in groups])
    order = np.argsort((lo + hi) / 2, kind="stable")
    gaps = lo[order][1:] - np.maximum.accumulate(hi[order])[:-1]
    cut = int(np.argmax(gaps)) + 1
    return [np.sort(groups[order[:cut]]), np.sort(groups[order[cut:]])]


def _flat_beats_lines(t: np.ndarray, row_group: np.ndarray, groups: np.ndarray) -> bool:
    """BIC of the chain's angles t: one uniform band (2 parameters) against one Gaussian per group
    with the group's own mean, std and share (3G − 1 parameters); True when the band wins."""
    x = t[np.isin(row_group, groups)]
    n = len(x)
    flat = -n * math.log(max(float(x.max() - x.min()), 1e-12)) - math.log(n)
    dens = np.zeros(n)
    for g in groups:
        y = t[row_group == g]
        sd = max(float(y.std()), 1e-6)
        dens += len(y) / n * np.exp(-0.5 * ((x - y.mean()) / sd) ** 2) / (sd * math.sqrt(2 * math.pi))
    lines = float(np.log(np.maximum(dens, 1e-300)).sum()) - (3 * len(groups) - 1) / 2 * math.log(n)
    return flat > lines
