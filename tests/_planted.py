"""Planted data shared by the counting tests: unit vectors on well-separated lines."""

import numpy as np


def random_lines(rng: np.random.Generator, n: int, k: int, sep_deg: float = 30.0) -> np.ndarray:
    """(n, k) unit vectors whose lines are pairwise at least sep_deg apart."""
    for _ in range(10_000):
        L = rng.standard_normal((n, k))
        L /= np.linalg.norm(L, axis=1, keepdims=True)
        if (np.abs(L @ L.T) - np.eye(n)).max(initial=0.0) <= np.cos(np.radians(sep_deg)):
            return L
    raise RuntimeError("could not place lines")
