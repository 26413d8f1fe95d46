"""Small formula helpers that need no sympy, so that training with a built-in activation never loads it.

``shorten`` keeps error messages about formulas on one line, ``_softplus`` is the stable softplus
that both the built-in registry (condlab.activations._activations) and compiled expressions
(condlab.activations._expressions) use, and ``MAX_ORDER`` / ``_what`` are shared by the symbolic
(condlab.activations._taylor) and the numeric multiplicity (condlab.activations._activations).
"""

from __future__ import annotations

import torch

MAX_ORDER = 32  # derivatives checked; x**33 and flatter are "undefined", with that reason


def shorten(text: object, width: int = 80) -> str:
    """A long formula cut in the middle, so that an error message stays one readable line."""
    text = str(text)
    return text if len(text) <= width else f"{text[:width - 20]}...{text[-12:]} ({len(text)} characters)"


def _softplus(t: torch.Tensor) -> torch.Tensor:
    # log(1 + e^t) = logaddexp(t, 0): stable at ±large t and exact (F.softplus cuts over to t at 20)
    return torch.logaddexp(t, torch.zeros_like(t))


def _what(s: int) -> str:
    """Why the multiplicity is undefined when the s-th derivative has two one-sided values."""
    return "not differentiable" if s == 1 else f"derivative of order {s - 1} is not differentiable"
