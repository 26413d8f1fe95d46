"""`_cluster_lines` compiled (numba), with every decision checked against rounding.

The clustering of _clustering.py (leader pass, assignment to the nearest centre by |cos|,
sign-aligned sums, centre merge by a second leader pass, fixed point) is a sequence of
decisions: |cos| >= thr, which centre is nearest, which sign. Here the same sequence runs in
compiled loops whose sums are added in another order than numpy's BLAS calls, so every cosine
may differ from numpy's by ~1e-15 (sums of at most n unit rows: < 1e-12 for n <= 10^4). Each
decision is therefore taken only when it clears its threshold, or the runner-up, by MARGIN
(1e-9, far above that); the first decision that does not (a row at |cos| ~ thr, two centres
at nearly the same |cos| to a row: ties, duplicate rows in symmetric designs) stops the
compiled pass, and the caller runs `_cluster_lines` itself. Where the pass completes, every
decision is the one numpy takes, so the labels are the same integers.
"""

from __future__ import annotations

import numpy as np

try:
    import numba
except ImportError:  # numba is a dependency; without it, counts use _cluster_lines alone
    numba = None

MARGIN = 1e-9


def _leaders(X, thr, margin):
    """Leader pass over rows X (r, k): (indices, ok); not ok when a |cos| lies within margin of thr.

    Each row's cosines to all leaders so far are computed at once, column by column over the
    leaders held transposed (independent sums: vectorized, not one add chain per pair), each
    summed over j in order as a plain loop would; then read in leader order.
    """
    r, k = X.shape
    lead = np.empty(r, np.int64)
    LT = np.empty((k, r))  # the leaders' rows, as columns
    acc = np.empty(r)
    nl = 0
    for a in range(r):
        acc[:nl] = 0.0
        for j in range(k):
            x = X[a, j]
            for t in range(nl):
                acc[t] += x * LT[j, t]
        covered, doubt = False, False
        for t in range(nl):
            c = abs(acc[t])
            if c >= thr + margin:
                covered = True
                break
            if c > thr - margin:
                doubt = True
        if covered:
            continue
        if doubt:
            return lead[:nl], False
        lead[nl] = a
        LT[:, nl] = X[a]
        nl += 1
    return lead[:nl], True


def _nearest(X, C, thr, margin, threshold):
    """Nearest centre by |cos| per row of X (r, k) among C (c, k); -1 below thr when threshold.

    Returns (labels, ok, positive); ok is False when a decision lies within margin (|cos| ~ thr,
    or two centres within margin of the best: numpy's argmax could pick either); positive: the
    cosine to the chosen centre is > 0 (the sign `_aligned_sums` would find). The cosines of all
    rows to one centre are summed at once (rows held transposed: independent sums, vectorized;
    each over j in order, as a plain loop would), and the best and second best of each row are
    kept without branches; then the rows are decided in order.
    """
    r, k = X.shape
    XT = np.ascontiguousarray(X.T)
    dots = np.zeros(r)
    best, second = np.full(r, -1.0), np.full(r, -1.0)
    arg = np.full(r, -1, np.int64)
    positive = np.zeros(r, np.bool_)
    for t in range(C.shape[0]):
        dots[:] = 0.0
        for j in range(k):
            c = C[t, j]
            for a in range(r):
                dots[a] += XT[j, a] * c
        for a in range(r):
            v = abs(dots[a])
            second[a] = max(second[a], min(v, best[a]))
            arg[a] = t if v > best[a] else arg[a]
            positive[a] = dots[a] > 0 if v > best[a] else positive[a]
            best[a] = max(v, best[a])
    labels = np.full(r, -1, np.int64)
    for a in range(r):
        if arg[a] < 0:
            continue
        if threshold and best[a] < thr - margin:
            continue
        if (threshold and best[a] <= thr + margin) or best[a] - second[a] <= margin:
            return labels, False, positive
        labels[a] = arg[a]
    return labels, True, positive


def _aligned_sums(X, labels, C, n):
    """(n, k) sums of rows of X flipped to the side of their centre C[label] (labels >= 0)."""
    positive = np.zeros(X.shape[0], np.bool_)
    for a in range(X.shape[0]):
        t = labels[a]
        if t >= 0:
            c = 0.0
            for j in range(X.shape[1]):
                c += X[a, j] * C[t, j]
            positive[a] = c > 0  # |c| >= thr: the sign is not in doubt
    return _signed_sums(X, labels, positive, n)


def _signed_sums(X, labels, positive, n):
    """`_aligned_sums` of rows X whose signs to their centres are known (positive: > 0)."""
    k = X.shape[1]
    out = np.zeros((n, k))
    for a in range(X.shape[0]):
        t = labels[a]
        if t < 0:
            continue
        s = 1.0 if positive[a] else -1.0
        for j in range(k):
            out[t, j] += s * X[a, j]
    return out


def _unit(V):
    out = np.empty_like(V)
    for i in range(V.shape[0]):
        s = 0.0
        for j in range(V.shape[1]):
            s += V[i, j] * V[i, j]
        s = np.sqrt(s)
        for j in range(V.shape[1]):
            out[i, j] = V[i, j] / s
    return out


def _cluster(U, sample, thr, need, max_iter, margin):
    """Labels of `_cluster_lines` (n,), and whether every decision cleared the margin."""
    n = U.shape[0]
    S = U[sample]
    lead, ok = _leaders(S, thr, margin)
    if not ok:
        return np.full(n, -1, np.int64), False
    joined, ok, _ = _nearest(S, S[lead], thr, margin, True)
    if not ok:
        return joined, False
    sizes = np.zeros(len(lead), np.int64)
    for a in range(len(joined)):
        if joined[a] >= 0:
            sizes[joined[a]] += 1
    centres = S[lead[sizes >= need]]
    labels = np.full(n, -2, np.int64)
    for _ in range(max_iter + 1):
        new, ok, positive = _nearest(U, centres, thr, margin, True)
        if not ok or _ == max_iter or np.array_equal(new, labels):
            return new, ok  # the fixed point, or (after max_iter rounds) the last assignment
        labels = new
        c = centres.shape[0]
        sizes = np.zeros(c, np.int64)
        for a in range(n):
            if labels[a] >= 0:
                sizes[labels[a]] += 1
        sums = _signed_sums(U, labels, positive, c)  # the signs of this assignment's cosines
        alive = np.flatnonzero(sizes > 0)
        alive = alive[np.argsort(-sizes[alive], kind="mergesort")]  # stable, as numpy's
        means = _unit(sums[alive])
        keep, ok = _leaders(means, thr, margin)
        if not ok:
            return labels, False
        if len(keep) == len(alive):
            centres = means
            continue
        host, ok, _ = _nearest(means, means[keep], thr, margin, False)
        if not ok:
            return labels, False
        centres = _unit(_aligned_sums(sums[alive], host, means[keep], len(keep)))
    return labels, False


def compile_in(namespace: dict, names: tuple[str, ...], depends: tuple[str, ...] = ()) -> None:
    """Replace each named plain function of a module's namespace by its numba compilation
    (cached on disk, releasing the GIL); the plain functions are what the code runs without numba.

    numba's disk cache checks the defining file's time stamp only, while a compiled caller holds
    the code of the compiled functions it calls: a module calling the kernels of other modules
    names their files in `depends`, whose contents then key its cache entries too.
    """
    digest = _digest(depends) if depends else ""
    for name in names:
        if digest and not _keyable():  # another numba's cache internals: compile in each process
            namespace[name] = numba.njit(nogil=True)(namespace[name])
            continue
        namespace[name] = numba.njit(cache=True, nogil=True)(namespace[name])
        if digest:
            _key_cache_on(namespace[name], digest)


def _digest(files: tuple[str, ...]) -> str:
    import hashlib

    h = hashlib.sha256()
    for f in files:
        with open(f, "rb") as fh:
            h.update(fh.read())
    return h.hexdigest()


def _keyable() -> bool:
    """Whether numba's FunctionCache (index key, per-dispatcher cache) is there to extend."""
    try:
        from numba.core.caching import FunctionCache
    except ImportError:
        return False
    return hasattr(FunctionCache, "_index_key")


def _key_cache_on(dispatcher, digest: str) -> None:
    """Add `digest` to the index key of the dispatcher's disk cache (numba's FunctionCache)."""
    from numba.core.caching import FunctionCache

    class _Keyed(FunctionCache):
        def _index_key(self, sig, codegen):
            return (*super()._index_key(sig, codegen), digest)

    dispatcher._cache = _Keyed(dispatcher.py_func)


if numba is not None:
    compile_in(globals(), ("_leaders", "_nearest", "_aligned_sums", "_signed_sums", "_unit", "_cluster"))


def cluster_labels(U: np.ndarray, thr: float, min_count: int, seed_rows: int,
                   max_iter: int) -> np.ndarray | None:
    """``_cluster_lines(U, thr, min_count, chunk)[0]`` (n,) for canonical unit rows U (n, k), or
    None where numba is missing or a decision came within MARGIN of its threshold."""
    n = U.shape[0]
    if numba is None or n == 0:
        return None
    if min_count == 1 or n <= seed_rows:
        sample = np.arange(n)
    else:  # as _seed_centres: an even spread over the canonical order
        sample = np.unique(np.linspace(0, n - 1, seed_rows).round().astype(np.int64))
    need = 1 if min_count == 1 else max(2, (min_count * len(sample)) // (2 * n))
    labels, ok = _cluster(np.ascontiguousarray(U, dtype=np.float64), sample, float(thr), need, max_iter,
                          MARGIN)
    return labels if ok else None
