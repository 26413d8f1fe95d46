"""Evidence for the defaults of condlab.analysis._orientations.count_orientations.

Plants n lines (random signs, angular noise sigma, pairwise at least SEP degrees apart)
plus isotropic scattered neurons of comparable amplitude, and prints, per |cos|
threshold, the fraction of layers where the planted line count is recovered exactly,
and the mean number of false lines found in purely isotropic layers.

    .venv/bin/python benchmarks/threshold_sweep.py [--quick]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from condlab.analysis._orientations import count_orientations

SEP = 30.0  # degrees between planted lines (as lines, i.e. up to sign)


def random_lines(rng: np.random.Generator, n: int, k: int, sep_deg: float = SEP) -> np.ndarray:
    """(n, k) unit vectors whose lines are pairwise at least sep_deg apart (rejection sampling)."""
    for _ in range(10_000):
        L = rng.standard_normal((n, k))
        L /= np.linalg.norm(L, axis=1, keepdims=True)
        C = np.abs(L @ L.T) - np.eye(n)
        if C.max(initial=0.0) <= np.cos(np.radians(sep_deg)):
            return L
    raise RuntimeError("could not place lines")


def jitter(rng: np.random.Generator, u: np.ndarray, sigma_deg: float) -> np.ndarray:
    """Unit vector at angle sigma·|N(0,1)| from u, in a uniformly random perpendicular direction."""
    w = rng.standard_normal(u.shape)
    w -= (w @ u) * u
    w /= np.linalg.norm(w)
    theta = np.radians(sigma_deg) * abs(rng.standard_normal())
    return np.cos(theta) * u + np.sin(theta) * w


def planted(rng, n_lines, k, m, sigma_deg, scattered_frac=0.0, two_signs=True):
    """W (m, k) with planted lines (amplitude 0.5..1) and isotropic rows (0.2..1).

    Returns W, the planted unit lines (n_lines, k) and a mask of the isotropic rows.
    """
    L = random_lines(rng, n_lines, k)
    n_scat = int(round(scattered_frac * m))
    rows = []
    for j in range(m - n_scat):
        sign = rng.choice([-1.0, 1.0]) if two_signs else 1.0
        rows.append(sign * rng.uniform(0.5, 1.0) * jitter(rng, L[j % n_lines], sigma_deg))
    for _ in range(n_scat):
        g = rng.standard_normal(k)
        rows.append(rng.uniform(0.2, 1.0) * g / np.linalg.norm(g))
    perm = rng.permutation(m)
    return np.array(rows)[perm], L, perm >= m - n_scat


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    reps = 3 if args.quick else 10
    thresholds = [0.80, 0.85, 0.88, 0.90, 0.92, 0.93, 0.94, 0.95, 0.96, 0.97, 0.98, 0.99, 0.995]
    print("|cos| threshold:      " + " ".join(f"{t:6.3f}" for t in thresholds))
    for sigma in (1.0, 3.0, 5.0, 8.0):
        for frac in (0.0, 0.2):
            hits = np.zeros(len(thresholds))
            total = 0
            # k = 2 only without isotropic rows: in 2-D a uniform spread of lines already
            # puts more than min_share of the rows inside one 18° cap.
            for k in (2, 3, 6, 10) if frac == 0 else (3, 6, 10):
                for n in (1, 2, 3, 4):
                    for r in range(reps):
                        rng = np.random.default_rng(1000 * k + 10 * n + r)
                        W, _, _ = planted(rng, n, k, 200, sigma, frac)
                        for i, t in enumerate(thresholds):
                            got = count_orientations(W, cos_threshold=t, sweep=(0.0,)).n_lines
                            hits[i] += got == n
                        total += 1
            row = " ".join(f"{h / total:6.2f}" for h in hits)
            print(f"exact, sigma={sigma:.0f}° scat={frac:.1f}: {row}")
    for k in (3, 6, 10):
        for m in (50, 200, 1000):
            false = np.zeros(len(thresholds))
            for r in range(reps):
                W = np.random.default_rng(r).standard_normal((m, k))
                for i, t in enumerate(thresholds):
                    false[i] += count_orientations(W, cos_threshold=t, sweep=(0.0,)).n_lines
            row = " ".join(f"{f / reps:6.2f}" for f in false)
            print(f"isotropic k={k:2d} m={m:4d}:  {row}")
    # amplitude_ratio: condensed rows at amplitude 0.5..1, the isotropic half scaled by `tiny`.
    ratios = [0.01, 0.02, 0.05, 0.1, 0.2, 0.3]
    print("amplitude_ratio:      " + " ".join(f"{r:6.3f}" for r in ratios))
    for tiny in (0.003, 0.03):
        hits = np.zeros(len(ratios))
        for r in range(reps):
            W, _, scat = planted(np.random.default_rng(r), 3, 3, 200, 3.0, 0.5)
            W[scat] *= tiny
            for i, ratio in enumerate(ratios):
                hits[i] += count_orientations(W, amplitude_ratio=ratio).n_lines == 3
        row = " ".join(f"{h / reps:6.2f}" for h in hits)
        print(f"exact, k=3, half isotropic x{tiny}: {row}")
    # min_share: false lines in isotropic layers vs exact counts of 4 planted lines
    # (sigma 3°, 20% isotropic rows, so each planted line holds 20% of the neurons).
    shares = [0.0, 0.01, 0.02, 0.05, 0.1, 0.15]
    print("min_share:            " + " ".join(f"{r:6.3f}" for r in shares))
    for k, m in ((3, 200), (6, 50), (6, 200)):
        false = np.zeros(len(shares))
        for r in range(reps):
            W = np.random.default_rng(r).standard_normal((m, k))
            for i, ms in enumerate(shares):
                false[i] += count_orientations(W, min_share=ms).n_lines
        print(f"isotropic k={k:2d} m={m:4d}:  " + " ".join(f"{f / reps:6.2f}" for f in false))
    hits = np.zeros(len(shares))
    for r in range(reps):
        W, _, _ = planted(np.random.default_rng(r), 4, 6, 200, 3.0, 0.2)
        for i, ms in enumerate(shares):
            hits[i] += count_orientations(W, min_share=ms).n_lines == 4
    print("exact, 4 lines k=6:   " + " ".join(f"{h / reps:6.2f}" for h in hits))
    rng = np.random.default_rng(0)
    W, _, _ = planted(rng, 3, 6, 100_000, 3.0, 0.2)
    t0 = time.perf_counter()
    o = count_orientations(W)
    print(
        f"m=1e5 k=6, 3 lines + 20% isotropic: {o.n_lines} lines, stable={o.stable}, "
        f"{time.perf_counter() - t0:.2f}s"
    )


if __name__ == "__main__":
    main()
