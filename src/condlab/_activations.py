"""Activation functions and their multiplicity.

Zhou et al., "Towards Understanding the Condensation of Neural Networks at Initial
Training" (NeurIPS 2022), Definition 1: an activation σ has *multiplicity* p if

    σ^(s)(0) = 0 for s = 1, ..., p-1    and    σ^(p)(0) ≠ 0.

At small initialisation the input weights condense onto at most 2p directions, so p
is the number this module exists for. Convention: p is *undefined* (None) when σ, or
one of the derivatives on the way to p, is not differentiable at 0 (relu, leaky_relu:
the one-sided derivatives differ), or when every derivative we check vanishes at 0.
The `note` field of an Activation then says which.

Every built-in carries a sympy expression and its p is computed from it, never typed
in. Expressions typed by users are parsed by a whitelist walk over Python's `ast`,
never by eval/exec/sympify, so a config file or a CLI flag cannot run code.
"""

from __future__ import annotations

import ast
import functools
import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import sympy as sp
import torch
import torch.nn.functional as F

Tensor = torch.Tensor
TensorFn = Callable[[Tensor], Tensor]
Multiplicity = tuple[int | None, float | None, str]


@dataclass(frozen=True)
class Activation:
    """An activation σ with its exact derivative and its multiplicity p (Definition 1)."""

    name: str
    formula: str
    expr: sp.Expr | None
    fn: TensorFn
    grad: TensorFn
    multiplicity: int | None
    leading_coefficient: float | None  # σ^(p)(0) itself, not divided by p!
    note: str = ""
    # Optional fused (σ(t), σ'(t)) into given outputs, sharing work such as one tanh for both;
    # the training hot loop calls value_and_grad, so it is a speed-up, never a change of result.
    fused: Callable[[Tensor, Tensor, Tensor], None] | None = None

    def __call__(self, t: Tensor) -> Tensor:
        return self.fn(t)

    def value_and_grad(self, t: Tensor, value: Tensor, slope: Tensor) -> None:
        """Write σ(t) into `value` and σ'(t) into `slope` (same shape as t; may be strided views)."""
        if self.fused is not None:
            self.fused(t, value, slope)
        else:
            value.copy_(self.fn(t))
            slope.copy_(self.grad(t))

    @classmethod
    def from_callable(cls, name: str, fn: TensorFn, grad: TensorFn | None = None) -> Activation:
        """Wrap a plain elementwise torch callable; p is estimated with autograd at 0."""
        p, coeff, note = multiplicity_numeric(fn)
        grad = grad if grad is not None else _autograd_grad(fn)
        return cls(name, name, None, fn, grad, p, coeff, note)


def _autograd_grad(fn: TensorFn) -> TensorFn:
    # fn is elementwise, so d(sum fn(t))/dt is exactly the elementwise derivative.
    def grad(t: Tensor) -> Tensor:
        with torch.enable_grad():
            t = t.detach().requires_grad_(True)
            (g,) = torch.autograd.grad(fn(t).sum(), t, allow_unused=True)
        return torch.zeros_like(t) if g is None else g

    return grad


# -----------------------------------------------------------------------------
# safe parsing: text -> sympy, by walking a whitelist of ast nodes

_CONSTANTS = {"pi": sp.pi, "e": sp.E}
_FUNCTIONS: dict[str, Callable[[sp.Expr], sp.Expr]] = {
    "sin": sp.sin, "cos": sp.cos, "tan": sp.tan, "exp": sp.exp, "log": sp.log,
    "sqrt": sp.sqrt, "tanh": sp.tanh, "sinh": sp.sinh, "cosh": sp.cosh,
    "atan": sp.atan, "arctan": sp.atan, "erf": sp.erf, "abs": sp.Abs,
    "sigmoid": lambda u: 1 / (1 + sp.exp(-u)),
    "softplus": lambda u: sp.log(1 + sp.exp(u)),
    "relu": lambda u: sp.Max(0, u),
}  # fmt: skip
_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv, ast.Pow: operator.pow}  # fmt: skip
_MAX_LENGTH = 2000  # a formula, not a program; also bounds the work sympy can be made to do
_MAX_POWER_BITS = 100_000  # refuse 9**9**9-style constants that would take ages to compute


class _ParseError(ValueError):
    def __init__(self, message: str, reason: str | None = None):
        super().__init__(message)
        self.reason = reason or message  # the short part naming the offending piece


def parse_expression(text: str, variables: Sequence[str] = ("x",)) -> sp.Expr:
    """Parse a formula such as 'x**2*tanh(x)' into sympy through a whitelist (no eval)."""
    symbols = {name: sp.Symbol(name, real=True) for name in variables}
    try:
        if not isinstance(text, str) or len(text) > _MAX_LENGTH:
            raise _ParseError(f"expected a string of at most {_MAX_LENGTH} characters")
        try:
            tree = ast.parse(text.strip(), mode="eval")
        except SyntaxError as err:
            raise _ParseError(f"invalid syntax ({err.msg})") from None
        expr = _to_sympy(tree.body, symbols)
        if expr.has(sp.zoo, sp.nan, sp.oo, -sp.oo):
            raise _ParseError("the expression is infinite or undefined (division by zero?)")
    except _ParseError as err:
        allowed = (
            f"allowed are numbers, variables {', '.join(variables)}, constants pi and e, "
            f"+ - * / **, and functions {', '.join(sorted(_FUNCTIONS))}"
        )
        message = f"cannot parse expression {text!r}: {err.reason}; {allowed}"
        raise _ParseError(message, err.reason) from None
    return expr


def _to_sympy(node: ast.AST, symbols: dict[str, sp.Symbol]) -> sp.Expr:
    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _ParseError(f"constant {ast.unparse(node)} is not a number")
        if isinstance(value, float) and not math.isfinite(value):
            raise _ParseError(f"constant {ast.unparse(node)} is not finite")
        # repr -> Rational keeps 0.01 exactly 1/100, so multiplicities stay exact
        return sp.Integer(value) if isinstance(value, int) else sp.Rational(repr(value))
    if isinstance(node, ast.Name):
        if node.id in symbols:
            return symbols[node.id]
        if node.id in _CONSTANTS:
            return _CONSTANTS[node.id]
        if node.id in _FUNCTIONS:
            raise _ParseError(f"function '{node.id}' must be called, as in '{node.id}(x)'")
        raise _ParseError(f"unknown name '{node.id}'")
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        operand = _to_sympy(node.operand, symbols)
        return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitXor):
        raise _ParseError(f"'^' in '{ast.unparse(node)}' is xor in Python; use '**' for powers")
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _to_sympy(node.left, symbols), _to_sympy(node.right, symbols)
        if isinstance(node.op, ast.Pow) and left.is_Number and right.is_Number:
            if abs(float(right)) * math.log2(abs(float(left)) + 2) > _MAX_POWER_BITS:
                raise _ParseError(f"power '{ast.unparse(node)}' is too large")
        return _BINOPS[type(node.op)](left, right)
    if isinstance(node, ast.Call):
        name = node.func.id if isinstance(node.func, ast.Name) else None
        if name not in _FUNCTIONS:
            raise _ParseError(f"call of '{ast.unparse(node.func)}' is not allowed")
        if node.keywords or len(node.args) != 1:
            raise _ParseError(f"'{name}' takes exactly one positional argument")
        return _FUNCTIONS[name](_to_sympy(node.args[0], symbols))
    kind = type(node).__name__.lower()
    raise _ParseError(f"{kind} '{ast.unparse(node)}' is not allowed")


# -----------------------------------------------------------------------------
# sympy -> torch, by walking the expression tree once into nested closures

_Compiled = Callable[[Sequence[Tensor]], "Tensor | float | int"]
_UNARY: dict[type, Callable[[Tensor], Tensor]] = {
    sp.sin: torch.sin, sp.cos: torch.cos, sp.tan: torch.tan, sp.exp: torch.exp,
    sp.log: torch.log, sp.tanh: torch.tanh, sp.sinh: torch.sinh, sp.cosh: torch.cosh,
    sp.atan: torch.atan, sp.asin: torch.asin, sp.acos: torch.acos, sp.asinh: torch.asinh,
    sp.erf: torch.erf, sp.erfc: torch.erfc, sp.Abs: torch.abs, sp.sign: torch.sign,
}  # fmt: skip


def expression_to_torch(expr: sp.Expr, variables: Sequence[str] = ("x",)) -> Callable[..., Tensor]:
    """Compile a sympy expression into an elementwise torch function of `variables`."""
    if not isinstance(expr, sp.Basic):
        raise TypeError(f"expected a sympy expression, got {type(expr).__name__}")
    index = {name: i for i, name in enumerate(variables)}
    unknown = sorted(s.name for s in expr.free_symbols if s.name not in index)
    if unknown:
        raise ValueError(
            f"expression {expr} uses {', '.join(unknown)}; expected only {', '.join(variables)}"
        )
    body = _compile(expr, index)

    def f(*args: Tensor) -> Tensor:
        if len(args) != len(index):
            raise TypeError(f"expected {len(index)} tensor(s) for {', '.join(variables)}")
        out, ref = body(args), args[0]
        shape = torch.broadcast_shapes(*(a.shape for a in args))
        if not isinstance(out, Tensor):  # a constant expression still returns a full tensor
            dtype = ref.dtype if ref.is_floating_point() else torch.get_default_dtype()
            return torch.full(shape, float(out), dtype=dtype, device=ref.device)
        return out if out.shape == shape else out.expand(shape).contiguous()

    return f


def _one_plus_exp(node: sp.Expr) -> sp.Expr | None:
    # matches 1 + exp(u) and returns u, so sigmoid and softplus compile to stable ops
    if isinstance(node, sp.Add) and len(node.args) == 2 and sp.S.One in node.args:
        other = node.args[0] if node.args[1] == sp.S.One else node.args[1]
        return other.args[0] if isinstance(other, sp.exp) else None
    return None


def _compile(node: sp.Expr, index: dict[str, int]) -> _Compiled:
    if not node.free_symbols:  # constant subtree: evaluate once, here
        value = complex(node.evalf())
        if value.imag or not math.isfinite(value.real):
            raise ValueError(f"constant {node} is not a finite real number")
        return lambda args: value.real
    if isinstance(node, sp.Symbol):
        i = index[node.name]
        return lambda args: args[i]
    if isinstance(node, sp.Pow) and node.exp == -1 and (u := _one_plus_exp(node.base)) is not None:
        inner = _compile(u, index)  # 1/(1+exp(u)) = sigmoid(-u)
        return lambda args: torch.sigmoid(-inner(args))
    if isinstance(node, sp.log) and (u := _one_plus_exp(node.args[0])) is not None:
        inner = _compile(u, index)  # log(1+exp(u)) = softplus(u)
        return lambda args: _softplus(inner(args))
    kids = [_compile(arg, index) for arg in node.args]
    if isinstance(node, sp.Add | sp.Mul):
        op = operator.add if isinstance(node, sp.Add) else operator.mul
        return lambda args: functools.reduce(op, (k(args) for k in kids))
    if isinstance(node, sp.Pow):
        base, exponent = kids
        return lambda args: torch.pow(base(args), exponent(args))
    if node.func in _UNARY:
        fn, (arg,) = _UNARY[node.func], kids
        return lambda args: fn(arg(args))
    if isinstance(node, sp.Heaviside):  # sympy's H(0) is the second argument, 1/2 by default
        arg, h0 = kids[0], float(node.args[1]) if len(node.args) > 1 else 0.5
        return lambda args: _heaviside(arg(args), h0)
    if isinstance(node, sp.DiracDelta):  # derivative of a step: zero almost everywhere
        return lambda args: torch.zeros_like(kids[0](args))
    if isinstance(node, sp.Max | sp.Min):
        op = torch.maximum if isinstance(node, sp.Max) else torch.minimum
        return lambda args: functools.reduce(op, _tensors(*[k(args) for k in kids]))
    raise ValueError(f"cannot translate {type(node).__name__} ('{node}') to torch")


def _heaviside(t: Tensor, h0: float) -> Tensor:
    return (t > 0).to(t.dtype) + h0 * (t == 0).to(t.dtype)


def _tensors(*vals: Tensor | float) -> list[Tensor]:
    # torch.maximum/minimum want tensors; a constant becomes a 0-d tensor that broadcasts
    ref = next(v for v in vals if isinstance(v, Tensor))
    return [v if isinstance(v, Tensor) else ref.new_tensor(v) for v in vals]


# -----------------------------------------------------------------------------
# multiplicity: symbolic for expressions, numeric for plain callables

_NONSMOOTH = (sp.Heaviside, sp.Max, sp.Min, sp.Abs, sp.Piecewise, sp.sign, sp.DiracDelta)
_T = sp.Symbol("t", positive=True)


def _what(s: int) -> str:
    return "not differentiable" if s == 1 else f"derivative of order {s - 1} is not differentiable"


def _is_finite_real(v: sp.Expr) -> bool:
    # is_comparable rules out nan, complex values and AccumBounds (a limit that oscillates)
    return bool(v.is_comparable) and bool(v.is_finite)


def _one_sided(d: sp.Expr, x: sp.Symbol, side: int) -> sp.Expr:
    # x = ±t with t > 0 lets sympy resolve Heaviside/Max/Abs/sign on that side by itself;
    # what remains is usually smooth in t, so t = 0 works and `limit` is the slow fallback.
    e = d.subs(x, side * _T)
    v = sp.nan if e.has(*_NONSMOOTH) else e.subs(_T, 0)
    if not _is_finite_real(v):
        try:
            v = sp.limit(e, _T, 0, "+")
        except (NotImplementedError, ValueError):
            v = sp.nan
    return v


def _sides(d: sp.Expr, x: sp.Symbol) -> tuple[sp.Expr, sp.Expr, bool]:
    # the one-sided limits at 0 and whether they are finite and equal
    left, right = _one_sided(d, x, -1), _one_sided(d, x, +1)
    same = _is_finite_real(left) and _is_finite_real(right) and sp.simplify(left - right) == 0
    return left, right, same


@functools.lru_cache(maxsize=512)
def multiplicity(expr: sp.Expr, max_order: int = 12) -> Multiplicity:
    """Multiplicity p of σ = expr at 0 (Definition 1) as (p, σ^(p)(0), note); None if undefined."""
    free = sorted(expr.free_symbols, key=str)
    if len(free) > 1:
        raise ValueError(f"an activation is a function of x alone, got {expr}")
    if not free:
        return None, None, f"all derivatives up to order {max_order} vanish at 0"
    x = sp.Symbol(free[0].name, real=True)  # so that d|x|/dx is sign(x), not a complex mess
    expr = expr.xreplace({free[0]: x})
    smooth = not expr.has(*_NONSMOOTH)
    if not smooth:  # a jump in σ itself (x + Heaviside(x)) hides behind equal derivatives
        left, right, same = _sides(expr, x)
        if not same:
            return None, None, f"not continuous at 0: left limit {left}, right limit {right}"
    d = expr
    for s in range(1, max_order + 1):
        d = sp.diff(d, x)
        value = d.subs(x, 0) if smooth else sp.nan
        if not _is_finite_real(value):
            # σ^(s-1) is continuous at 0, so equal finite one-sided limits of σ^(s) are σ^(s)(0)
            left, right, same = _sides(d, x)
            if not same:
                sides = f"left derivative {left}, right derivative {right}"
                return None, None, f"{_what(s)} at 0: {sides}"
            value = left
        if not sp.simplify(value).is_zero:
            return s, float(value), ""
    return None, None, f"all derivatives up to order {max_order} vanish at 0"


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


def _softplus(t: Tensor) -> Tensor:
    # log(1 + e^t) = logaddexp(t, 0): stable at ±large t and exact (F.softplus cuts over to t at 20)
    return torch.logaddexp(t, torch.zeros_like(t))


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


def _fused_tanh(t: Tensor, value: Tensor, slope: Tensor) -> None:
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


_FUSED = {"tanh": _fused_tanh, "sigmoid": _fused_sigmoid, "xtanh": _fused_xtanh,
          "x2tanh": _fused_x2tanh}
_ALIASES = {"swish": "silu", "x_tanh": "xtanh", "x2_tanh": "x2tanh"}
_USER: dict[str, Activation] = {}  # filled by register_activation


@functools.lru_cache(maxsize=1)
def _builtin_registry() -> dict[str, Activation]:
    # built lazily on first use so that importing condlab does not pay for sympy work
    out = {}
    for name, (formula, fn, grad) in _BUILTINS.items():
        expr = parse_expression(formula)
        out[name] = Activation(name, formula, expr, fn, grad, *multiplicity(expr),
                               fused=_FUSED.get(name))
    return out


@functools.lru_cache(maxsize=128)
def _from_expression(text: str) -> Activation:
    expr = parse_expression(text)
    x = sp.Symbol("x", real=True)
    fn, grad = expression_to_torch(expr), expression_to_torch(sp.diff(expr, x))
    return Activation(text, text, expr, fn, grad, *multiplicity(expr))


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
    try:
        return _from_expression(spec.strip())
    except _ParseError as err:
        hint = (
            f"known activations are {', '.join(sorted(registry))}; "
            "or give an expression in x such as 'x**3*tanh(x)'"
        )
        if spec.strip().isidentifier():  # looks like a misspelt name, not a formula
            raise ValueError(f"unknown activation {spec!r}: {hint}") from None
        raise ValueError(f"invalid activation {spec!r}: {err.reason}; {hint}") from None


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
