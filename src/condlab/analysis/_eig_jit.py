"""Small symmetric eigenproblems, compiled (numba): the Gram matrices of the count's groups.

`_eig` (Householder tridiagonalization and implicit QL, Jacobi rotations where QL does not
converge) gives all eigenpairs of a k x k matrix without a LAPACK call per 6 x 6 matrix;
`_power` the top eigenvector of a Gram matrix with a certificate of its accuracy, where one
eigenvalue dominates (a tight group: a few matrix-vector products).
"""

from __future__ import annotations

import math

import numpy as np

from condlab.analysis._cluster_jit import compile_in

try:
    import numba
except ImportError:
    numba = None


def _eig(S):
    """Eigenvalues (k,) of symmetric S (k, k), descending, and unit eigenvectors (k, k), as columns:
    Householder tridiagonalization and implicit QL (as LAPACK's dsteqr, backward stable: about
    a third of the Jacobi rotations' work at k = 6); the rotations where QL does not converge."""
    Z = S.copy()
    d, e = _tridiagonal(Z)
    if not _ql(d, e, Z):
        return _eig_jacobi(S)
    order = np.argsort(-d)
    return d[order], Z[:, order]


def _tridiagonal(a):
    """Householder reduction of symmetric a (n, n) to tridiagonal form (Numerical Recipes' tred2,
    from 0): diagonal d, subdiagonal e (e[0] = 0); a becomes the orthogonal transformation."""
    n = a.shape[0]
    d, e = np.zeros(n), np.zeros(n)
    for i in range(n - 1, 0, -1):
        l = i - 1  # noqa: E741 (the book's names)
        h = scale = 0.0
        if l > 0:
            for k in range(l + 1):
                scale += abs(a[i, k])
            if scale == 0.0:
                e[i] = a[i, l]
            else:
                for k in range(l + 1):
                    a[i, k] /= scale
                    h += a[i, k] * a[i, k]
                f = a[i, l]
                g = -math.sqrt(h) if f >= 0.0 else math.sqrt(h)
                e[i] = scale * g
                h -= f * g
                a[i, l] = f - g
                f = 0.0
                for j in range(l + 1):
                    a[j, i] = a[i, j] / h
                    g = 0.0
                    for k in range(j + 1):
                        g += a[j, k] * a[i, k]
                    for k in range(j + 1, l + 1):
                        g += a[k, j] * a[i, k]
                    e[j] = g / h
                    f += e[j] * a[i, j]
                hh = f / (h + h)
                for j in range(l + 1):
                    f = a[i, j]
                    g = e[j] - hh * f
                    e[j] = g
                    for k in range(j + 1):
                        a[j, k] -= f * e[k] + g * a[i, k]
        else:
            e[i] = a[i, l]
        d[i] = h
    d[0] = e[0] = 0.0
    for i in range(n):
        if d[i] != 0.0:
            for j in range(i):
                g = 0.0
                for k in range(i):
                    g += a[i, k] * a[k, j]
                for k in range(i):
                    a[k, j] -= g * a[k, i]
        d[i] = a[i, i]
        a[i, i] = 1.0
        for j in range(i):
            a[j, i] = a[i, j] = 0.0
    return d, e


def _ql(d, e, z):
    """Implicit QL with shifts on the tridiagonal (d, e) (Numerical Recipes' tqli, from 0): d
    becomes the eigenvalues, the columns of z (the tridiagonalization's transform) the
    eigenvectors. False after 30 iterations on one eigenvalue (then nothing is trusted)."""
    n = len(d)
    for i in range(1, n):
        e[i - 1] = e[i]
    e[n - 1] = 0.0
    for l in range(n):  # noqa: E741
        it = 0
        while True:
            m = l
            while m < n - 1:
                dd = abs(d[m]) + abs(d[m + 1])
                if abs(e[m]) + dd == dd:
                    break
                m += 1
            if m == l:
                break
            if it == 30:
                return False
            it += 1
            g = (d[l + 1] - d[l]) / (2.0 * e[l])
            r = math.sqrt(g * g + 1.0)
            g = d[m] - d[l] + e[l] / (g + (abs(r) if g >= 0.0 else -abs(r)))
            s = c = 1.0
            p = 0.0
            i = m - 1
            early = False
            while i >= l:
                f = s * e[i]
                b = c * e[i]
                r = math.sqrt(f * f + g * g)  # no overflow here: entries ~ rows (hypot: slow)
                e[i + 1] = r
                if r == 0.0:
                    d[i + 1] -= p
                    e[m] = 0.0
                    early = True
                    break
                s = f / r
                c = g / r
                g = d[i + 1] - p
                r = (d[i] - g) * s + 2.0 * c * b
                p = s * r
                d[i + 1] = g + p
                g = c * r - b
                for k in range(n):
                    f = z[k, i + 1]
                    z[k, i + 1] = s * z[k, i] + c * f
                    z[k, i] = c * z[k, i] - s * f
                i -= 1
            if early:
                continue
            d[l] -= p
            e[l] = g
            e[m] = 0.0
    return True


def _eig_jacobi(S):
    """`_eig` by cyclic Jacobi rotations.

    Cyclic Jacobi rotations until the off-diagonal's squared norm is below 1e-30 of S's (entries
    ~1e-15 of its norm: backward stable, as LAPACK's eigh; the margins need no more), without a
    LAPACK call per 6 x 6 matrix. Each rotation updates rows / columns p, q of the symmetric
    matrix once (the diagonal pair from apq and t alone).
    """
    k = S.shape[0]
    A, V = S.copy(), np.eye(k)
    total = 0.0
    for i in range(k):
        for j in range(k):
            total += A[i, j] * A[i, j]
    for _ in range(60):
        off = 0.0
        for i in range(k):
            for j in range(i + 1, k):
                off += A[i, j] * A[i, j]
        if off <= 1e-30 * total:
            break
        for p in range(k - 1):
            for q in range(p + 1, k):
                apq = A[p, q]
                if apq * apq <= 1e-34 * total:
                    continue
                theta = (A[q, q] - A[p, p]) / (2.0 * apq)
                t = (1.0 if theta >= 0 else -1.0) / (abs(theta) + math.sqrt(theta * theta + 1.0))
                c = 1.0 / math.sqrt(t * t + 1.0)
                s = t * c
                A[p, p] -= t * apq
                A[q, q] += t * apq
                A[p, q] = A[q, p] = 0.0
                for r in range(k):
                    if r != p and r != q:
                        arp, arq = A[r, p], A[r, q]
                        A[r, p] = A[p, r] = c * arp - s * arq
                        A[r, q] = A[q, r] = s * arp + c * arq
                for r in range(k):
                    vrp, vrq = V[r, p], V[r, q]
                    V[r, p], V[r, q] = c * vrp - s * vrq, s * vrp + c * vrq
    w = np.empty(k)
    for i in range(k):
        w[i] = A[i, i]
    order = np.argsort(-w)
    return w[order], V[:, order]


def _unit_vector(v):
    norm = 0.0
    for i in range(len(v)):
        norm += v[i] * v[i]
    return v / math.sqrt(norm)


def _power(G, eig_gap):
    """Top unit eigenvector of a Gram matrix G (k, k) by power iteration, and whether it is
    certain: the residual r = |Gv - ρv| (ρ = vᵀGv) and the gap δ = ρ - l2, with l2 <= tr G - ρ
    (G is positive semi-definite), bound its angle to the true one by r / δ (Davis-Kahan);
    certain where that is <= 1e-11 rad and δ > eig_gap · (ρ + r) (well-posed, as the
    eigendecomposition's test). A tight group's l2 / l1 is ~0.01: a few steps."""
    k = G.shape[0]
    tr, big = 0.0, 0
    for i in range(k):
        tr += G[i, i]
        if G[i, i] > G[big, big]:
            big = i
    v = np.empty(k)
    norm = math.sqrt(G[big, big])
    if norm == 0.0:
        return v, False
    for i in range(k):
        v[i] = G[i, big] / norm  # the column of the largest diagonal entry: near the top one
    v = _unit_vector(v)
    u = np.empty(k)
    for _ in range(40):
        rho, uu = 0.0, 0.0
        for i in range(k):
            u[i] = 0.0
            for j in range(k):
                u[i] += G[i, j] * v[j]
            rho += v[i] * u[i]
        res = 0.0
        for i in range(k):
            res += (u[i] - rho * v[i]) ** 2
            uu += u[i] * u[i]
        res = math.sqrt(res)
        gap = rho - (tr - rho) - 1e-13 * tr  # rho - l2, l2 <= tr - l1 <= tr - rho (+ rounding)
        if gap > eig_gap * (rho + res) and res <= 1e-11 * gap:
            return v, True
        if gap <= 0.0 and _ > 3:
            return v, False  # no dominant eigenvalue: left to the eigendecomposition
        uu = math.sqrt(uu)
        for i in range(k):
            v[i] = u[i] / uu
    return v, False


def _gram(X):
    """XᵀX (k, k) of rows X (n, k) (loops: no BLAS binding to compile)."""
    n, k = X.shape
    G = np.zeros((k, k))
    for i in range(n):
        for a in range(k):
            for b in range(k):
                G[a, b] += X[i, a] * X[i, b]
    return G


def _dots(X, v):
    """X @ v (n,) for rows X (n, k) and v (k,)."""
    out = np.zeros(X.shape[0])
    for i in range(X.shape[0]):
        for j in range(X.shape[1]):
            out[i] += X[i, j] * v[j]
    return out


if numba is not None:
    compile_in(globals(), ("_eig", "_tridiagonal", "_ql", "_eig_jacobi", "_unit_vector", "_power", "_gram",
                           "_dots"))
