"""Safe expressions: text -> sympy by a whitelist walk over Python's ast; sympy -> torch.

Used for user-defined activations ("x**3*tanh(x)") and target functions ("x1**2 - sin(x2)").
Nothing is passed to eval/exec/sympify, so a config file or a CLI flag cannot run code.
"""

from __future__ import annotations

import ast
import functools
import math
import operator
from collections.abc import Callable, Sequence

import sympy as sp
import torch

from ._formula import _softplus, shorten

Tensor = torch.Tensor

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
_MAX_DEPTH = 100  # nesting levels: keeps every recursive walk (ours, sympy's) far from Python's limit


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
        except (RecursionError, MemoryError):
            raise _ParseError(f"nested deeper than {_MAX_DEPTH} levels") from None
        if _depth(tree.body) > _MAX_DEPTH:
            raise _ParseError(f"nested deeper than {_MAX_DEPTH} levels")
        expr = _to_sympy(tree.body, symbols)
        if expr.has(sp.zoo, sp.nan, sp.oo, -sp.oo):
            raise _ParseError("the expression is infinite or undefined (division by zero?)")
    except _ParseError as err:
        allowed = (
            f"allowed are numbers, variables {', '.join(variables)}, constants pi and e, "
            f"+ - * / **, and functions {', '.join(sorted(_FUNCTIONS))}"
        )
        message = f"cannot parse expression {shorten(text)!r}: {err.reason}; {allowed}"
        raise _ParseError(message, err.reason) from None
    return expr


def _depth(root: ast.AST) -> int:
    """Nesting depth of an ast, found without recursion (so a deep tree cannot overflow it)."""
    deepest, stack = 0, [(root, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + isinstance(child, ast.expr)) for child in ast.iter_child_nodes(node))
    return deepest


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
