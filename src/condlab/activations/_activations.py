"""Activation functions and their multiplicity.

Zhou et al., "Towards Understanding the Condensation of Neural Networks at Initial
Training" (NeurIPS 2022), Definition 1: an activation σ has *multiplicity* p if

    σ^(s)(0) = 0 for s = 1, ..., p-1    and    σ^(p)(0) ≠ 0.

At small initialisation the input weights condense onto at most 2p directions, so p
is the number this module exists for. Convention: p is *undefined* (None) when σ, or
one of the derivatives on the way to p, is not differentiable at 0 (relu, leaky_relu:
the one-sided derivatives differ), when σ is not finite or constant, or when every
derivative up to order 32 vanishes at 0. The `note` field of an Activation then says which.

Every built-in carries a formula and its p is computed from it, never typed in: on first
access to ``expr``, ``multiplicity``, ``leading_coefficient`` or ``note``, so that training with
a built-in (which needs only ``fn``, ``grad`` and the fused forms) never imports sympy, whose
import and parsing cost about half a second. Expressions typed by users are parsed by a
whitelist walk over Python's `ast`, never by eval/exec/sympify, so a config file or a CLI flag
cannot run code.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from ..training import ACTIVATION_ALIASES
from ._formula import MAX_ORDER, _softplus, _what, shorten

if TYPE_CHECKING:
    import sympy as sp

Tensor = torch.Tensor
TensorFn = Callable[[Tensor], Tensor]
Multiplicity = tuple[int | None, float | None, str]
Theory = tuple["sp.Expr | None", int | None, float | None, str]  # (expr, p, σ^(p)(0), note)


def __getattr__(name: str) -> Any:
    # the parser's entry points, importable from here as before without importing sympy eagerly
    if name in ("expression_to_torch", "parse_expression"):
        from . import _expressions

        return getattr(_expressions, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class Activation:
    """An activation σ with its exact derivative and its multiplicity p (Definition 1).

    ``expr``, ``multiplicity``, ``leading_coefficient`` (σ^(p)(0) itself, not divided by p!)
    and ``note`` (why p is undefined, where it is) are properties: given at construction in
    ``theory``, or, when that is None, computed from ``formula`` on first access (sympy).
    They are functions of ``formula`` (or of ``fn``), so equality and hashing leave them out.
    """

    name: str
    formula: str
    fn: TensorFn
    grad: TensorFn
    # Optional fused (σ(t), σ'(t)) into given outputs, sharing work such as one tanh for both
    # (the training hot loop calls value_and_grad).
    fused: Callable[[Tensor, Tensor, Tensor], None] | None = None
    theory: Theory | None = field(default=None, compare=False, repr=False)

    def _theory(self) -> Theory:
        return self.theory if self.theory is not None else _theory_of_formula(self.formula)

    @property
    def expr(self) -> sp.Expr | None:
        return self._theory()[0]

    @property
    def multiplicity(self) -> int | None:
        return self._theory()[1]

    @property
    def leading_coefficient(self) -> float | None:
        return self._theory()[2]

    @property
    def note(self) -> str:
        return self._theory()[3]

    def __call__(self, t: Tensor) -> Tensor:
        return self.fn(t)

    def value_and_grad(self, t: Tensor, value: Tensor, slope: Tensor) -> None:
        """Write σ(t) into `value` and σ'(t) into `slope` (same shape as t; may be strided views).

        Equal to (fn(t), grad(t)) within rounding (one tanh serves both, say).
        """
        if self.fused is not None:
            self.fused(t, value, slope)
        else:
            value.copy_(self.fn(t))
            slope.copy_(self.grad(t))

    @classmethod
    def from_callable(cls, name: str, fn: TensorFn, grad: TensorFn | None = None) -> Activation:
        """Wrap a plain elementwise torch callable; p is estimated with autograd at 0."""
        p, coeff, note = multiplicity_numeric(fn)
        grad = grad if grad is not None else autograd_grad(fn)
        return cls(name, name, fn, grad, theory=(None, p, coeff, note))


def autograd_grad(fn: TensorFn) -> TensorFn:
    # fn is elementwise, so d(sum fn(t))/dt is exactly the elementwise derivative.
    def grad(t: Tensor) -> Tensor:
        with torch.enable_grad():
            t = t.detach().requires_grad_(True)
            (g,) = torch.autograd.grad(fn(t).sum(), t, allow_unused=True)
        return torch.zeros_like(t) if g is None else g

    return grad


# -----------------------------------------------------------------------------
# multiplicity: symbolic for expressions, numeric for plain callables

@functools.lru_cache(maxsize=512)
def multiplicity(expr: sp.Expr, max_order: int = MAX_ORDER) -> Multiplicity:
    """Multiplicity p of σ = expr at 0 (Definition 1) as (p, σ^(p)(0), note); None if undefined.

    Computed from truncated one-sided Taylor series (condlab.activations._taylor): bounded work for any
    expression the parser accepts, derivatives checked up to `max_order`.
    """
    import sympy as sp

    from ._taylor import taylor_multiplicity

    free = sorted(expr.free_symbols, key=str)
    if len(free) > 1:
        raise ValueError(f"an activation is a function of x alone, got {expr}")
    if not free:
        return None, None, "a constant: every derivative vanishes"
    x = sp.Symbol(free[0].name, real=True)
    return taylor_multiplicity(expr.xreplace({free[0]: x}), x, max_order)


def multiplicity_numeric(fn: TensorFn, max_order: int = 8, tol: float = 1e-6) -> Multiplicity:
    """Multiplicity of a plain callable by nested float64 autograd at 0, with a kink test."""
    # Autograd is exact, so σ^(s) at ±h (h tiny) differs by about 2h·σ^(s+1)(0) for smooth
    # σ but by a whole jump at a kink: that is how relu-like functions are caught.
    h = 1e-6
    pts = torch.tensor([-h, 0.0, h], dtype=torch.float64, requires_grad=True)
    with torch.enable_grad():
        y = fn(pts)
        for s in range(1, max_order + 1):
            g = None
            if y.requires_grad:
                (g,) = torch.autograd.grad(y.sum(), pts, create_graph=True, allow_unused=True)
            y = torch.zeros_like(pts) if g is None else g
            left, mid, right = y.detach().tolist()
            if abs(right - left) > 1e-3 * (1 + abs(left) + abs(right)):
                sides = f"left derivative {left:.6g}, right derivative {right:.6g}"
                return None, None, f"{_what(s)} at 0: {sides}"
            if abs(mid) > tol:
                return s, mid, ""
    return None, None, f"all derivatives up to order {max_order} vanish at 0 (tol {tol:g})"


# -----------------------------------------------------------------------------
# the registry: built-ins with hand-written fast fn and exact grad

_SQRT1_2 = 1 / math.sqrt(2)
_INV_SQRT2PI = 1 / math.sqrt(2 * math.pi)


def _sech2(t: Tensor) -> Tensor:  # tanh' = 1 - tanh²
    return 1 - torch.tanh(t) ** 2


def _sigmoid_grad(t: Tensor) -> Tensor:
    return torch.sigmoid(t) * torch.sigmoid(-t)  # = s(1 - s), without the cancellation in 1 - s


def _gelu_grad(t: Tensor) -> Tensor:  # (x·Φ)' = Φ + x·φ
    return 0.5 * (1 + torch.erf(t * _SQRT1_2)) + t * torch.exp(-t * t / 2) * _INV_SQRT2PI


# name -> (formula in the parser's language, fn, grad); p comes from parsing the formula
_BUILTINS: dict[str, tuple[str, TensorFn, TensorFn]] = {
    "tanh": ("tanh(x)", torch.tanh, _sech2),
    "sigmoid": ("sigmoid(x)", torch.sigmoid, _sigmoid_grad),
    "softplus": ("softplus(x)", _softplus, torch.sigmoid),
    "gelu": ("x/2*(1 + erf(x/sqrt(2)))", F.gelu, _gelu_grad),
    "silu": ("x*sigmoid(x)", F.silu, lambda t: torch.sigmoid(t) + t * _sigmoid_grad(t)),
    "relu": ("relu(x)", torch.relu, lambda t: (t > 0).to(t.dtype)),
    "leaky_relu": ("relu(x) - 0.01*relu(-x)", lambda t: F.leaky_relu(t, 0.01),
                   lambda t: torch.where(t > 0, torch.ones_like(t), torch.full_like(t, 0.01))),
    "xtanh": ("x*tanh(x)", lambda t: t * torch.tanh(t),
              lambda t: torch.tanh(t) + t * _sech2(t)),
    "x2tanh": ("x**2*tanh(x)", lambda t: t * t * torch.tanh(t),
               lambda t: 2 * t * torch.tanh(t) + t * t * _sech2(t)),
}  # fmt: skip


# Fused (σ, σ') written into preallocated outputs: the training hot loop allocates nothing,
# because on CPU a fresh multi-megabyte tensor per step costs more in page faults than the math.
def _one(t: Tensor) -> Tensor:
    return torch.ones((), dtype=t.dtype, device=t.device)  # 0-d: broadcasts in one pass


def fused_tanh(t: Tensor, value: Tensor, slope: Tensor) -> None:
    torch.tanh(t, out=value)
    torch.addcmul(_one(t), value, value, value=-1, out=slope)  # 1 - tanh²


def _fused_sigmoid(t: Tensor, value: Tensor, slope: Tensor) -> None:
    torch.sigmoid(t, out=value)
    torch.mul(value, value, out=slope)
    slope.neg_().add_(value)  # s - s²


def _fused_xtanh(t: Tensor, value: Tensor, slope: Tensor) -> None:
    torch.tanh(t, out=slope)  # slope holds tanh for now
    torch.mul(t, slope, out=value)  # t·tanh
    slope.addcmul_(value, slope, value=-1).add_(t)  # tanh + t(1 - tanh²) = tanh - t·tanh² + t


def _fused_x2tanh(t: Tensor, value: Tensor, slope: Tensor) -> None:
    torch.tanh(t, out=slope)
    torch.mul(t, slope, out=value)  # v = t·tanh
    torch.mul(t, t, out=slope)
    slope.addcmul_(value, value, value=-1).add_(value, alpha=2)  # 2t·tanh + t²(1 - tanh²)
    value.mul_(t)  # t²·tanh


_FUSED = {"tanh": fused_tanh, "sigmoid": _fused_sigmoid, "xtanh": _fused_xtanh,
          "x2tanh": _fused_x2tanh}
_ALIASES = ACTIVATION_ALIASES  # _checks.BUILTIN_ACTIVATIONS lists _BUILTINS' names (tested)
_USER: dict[str, Activation] = {}  # filled by register_activation


@functools.lru_cache(maxsize=1)
def _builtin_registry() -> dict[str, Activation]:
    # no sympy here: a built-in's expr and p are computed from its formula on first access
    return {name: Activation(name, formula, fn, grad, fused=_FUSED.get(name))
            for name, (formula, fn, grad) in _BUILTINS.items()}


@functools.lru_cache(maxsize=64)
def _theory_of_formula(formula: str) -> Theory:
    """(expr, p, σ^(p)(0), note) of a formula in x, computed once per formula (imports sympy)."""
    from ._expressions import parse_expression

    expr = parse_expression(formula)
    return (expr, *multiplicity(expr))


@functools.lru_cache(maxsize=128)
def _from_expression(text: str) -> Activation:
    import sympy as sp

    from ._expressions import expression_to_torch

    expr, *rest = _theory_of_formula(text)
    x = sp.Symbol("x", real=True)
    fn, grad = expression_to_torch(expr), expression_to_torch(sp.diff(expr, x))
    return Activation(text, text, fn, grad, theory=(expr, *rest))


def get_activation(spec: str | Activation) -> Activation:
    """Return a registry activation by (case-insensitive) name, or one built from a formula in x."""
    if isinstance(spec, Activation):
        return spec
    if not isinstance(spec, str):
        raise TypeError(f"activation must be a name or an expression string, got {spec!r}")
    key = spec.strip().lower()
    registry = {**_builtin_registry(), **_USER}
    if _ALIASES.get(key, key) in registry:
        return registry[_ALIASES.get(key, key)]
    from ._expressions import _ParseError

    try:
        return _from_expression(spec.strip())
    except _ParseError as err:
        hint = (
            f"known activations are {', '.join(sorted(registry))}; "
            "or give an expression in x such as 'x**3*tanh(x)'"
        )
        if spec.strip().isidentifier():  # looks like a misspelt name, not a formula
            raise ValueError(f"unknown activation {shorten(spec)!r}: {hint}") from None
        raise ValueError(f"invalid activation {shorten(spec)!r}: {err.reason}; {hint}") from None


def check_trainable(act: Activation) -> None:
    """Raise a one-line ValueError when a network with `act` cannot train (or starts non-finite).

    Refused: a constant, σ' = 0 at every point of a grid over [-8, 8] (relu(-x**2)), and a σ
    or σ' that is not finite at 0, where every small-initialization run starts.
    """
    grid = torch.linspace(-8, 8, 1601, dtype=torch.float64)
    with torch.no_grad():
        at0 = torch.zeros(1, dtype=torch.float64)
        finite = bool(torch.isfinite(act.fn(at0)).all() and torch.isfinite(act.grad(at0)).all())
        moves = finite and bool(act.grad(grid).abs().gt(0).any())
    # A constant fails one of the two numeric checks, so act.expr (sympy, for a built-in) is
    # only read for an activation that is refused anyway, to name the better reason.
    if not moves and act.expr is not None and not act.expr.free_symbols:
        raise ValueError(f"activation {shorten(act.name)!r} is a constant: its gradient is zero, "
                         "so a network with it cannot train")
    if not finite:
        raise ValueError(f"activation {shorten(act.name)!r} or its derivative is not finite at 0, "
                         "where small-initialization training starts")
    if not moves:
        raise ValueError(f"activation {shorten(act.name)!r} has derivative 0 everywhere on [-8, 8]: "
                         "a network with it cannot train")


def list_activations() -> list[Activation]:
    """All registered activations (built-in and user-registered), sorted by name."""
    return [act for _, act in sorted({**_builtin_registry(), **_USER}.items())]


def register_activation(name: str, expr: str) -> Activation:
    """Register a named activation defined by an expression in x and return it."""
    key = name.strip().lower()
    if not key.isidentifier():
        raise ValueError(f"activation name {name!r} must be an identifier such as 'x3tanh'")
    if key in _BUILTINS or key in _ALIASES:
        raise ValueError(f"cannot redefine the built-in activation {name!r}")
    act = replace(_from_expression(expr.strip()), name=key)
    _USER[key] = act  # re-registering a user name replaces it
    return act


def activation_table() -> list[dict]:
    """Rows {"name", "formula", "p"} for `condlab activations`; p is "undefined" when None."""
    return [{"name": a.name, "formula": a.formula,
             "p": a.multiplicity if a.multiplicity is not None else "undefined"}
            for a in list_activations()]  # fmt: skip
