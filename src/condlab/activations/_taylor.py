"""Multiplicity by truncated Taylor series at 0: bounded work for any expression (Definition 1).

Repeated symbolic differentiation (``sp.diff`` + ``simplify``) can take minutes on short inputs
such as ``tanh(tanh(tanh(tanh(tanh(tanh(x))))))**7``, because the derivatives grow as
products of the chain rule. Here each node of the expression becomes a truncated power series
in t, computed bottom-up with the classical O(N^2) recurrences (w' = u'w for exp, w' = (1-w^2)u'
for tanh, ...), so the work is O(nodes x N^2) for N terms, whatever the nesting.

Both sides of 0 are expanded: the *right* series of f(t) and the *left* series of f(-t), t > 0.
A smooth f has left coefficients (-1)^k times the right ones; relu-like kinks (Max, Abs,
Heaviside) resolve to one branch on each side, and a mismatch at order s means the s-th
derivative does not exist at 0, which is how the notes "left derivative a, right derivative b"
arise. Arithmetic is exact (``fractions.Fraction``) while every constant met is rational; an
irrational one (log 2 in softplus, 1/sqrt(pi) in erf, tanh(1), pi) switches to 60-digit
mpmath floats, where a coefficient below 1e-40 times the largest one counts as zero.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import mpmath
import sympy as sp

from ._formula import MAX_ORDER, _what

FAST_ORDER = 12       # tried first: almost every activation has p <= 12
TIME_LIMIT = 2.0      # seconds for one multiplicity, both arithmetics together
EXACT_SHARE = 0.4     # of TIME_LIMIT, before exact arithmetic gives way to floats
DPS = 60              # mpmath digits in float mode
REL_ZERO = 1e-40      # float mode: |c| <= REL_ZERO * max|c| counts as zero

Multiplicity = tuple[int | None, float | None, str]


class Undefined(Exception):
    """The multiplicity is undefined; the message says why (one line)."""


class _Switch(Exception):
    """Exact arithmetic cannot go on (an irrational constant, or too slow): use floats."""


class _Timeout(Exception):
    pass


@dataclass
class _Series:
    """sum_i c[i] t**(lo + i), exact for exponents below hi = lo + len(c)."""

    c: list
    lo: int

    @property
    def hi(self) -> int:
        return self.lo + len(self.c)

    def at(self, k: int) -> Any:
        return self.c[k - self.lo] if self.lo <= k < self.hi else 0


class _Arith:
    """Numbers of one mode: exact (Fraction) or float (mpmath mpf, DPS digits)."""

    _FLOAT_FUNCS = {sp.exp: mpmath.exp, sp.log: mpmath.log, sp.sin: mpmath.sin, sp.cos: mpmath.cos,
                    sp.tanh: mpmath.tanh, sp.tan: mpmath.tan, sp.sinh: mpmath.sinh,
                    sp.cosh: mpmath.cosh, sp.atan: mpmath.atan, sp.erf: mpmath.erf}
    # exact values at 0 (the only point where these functions are rational)
    _AT_ZERO = {sp.exp: 1, sp.sin: 0, sp.cos: 1, sp.tanh: 0, sp.tan: 0, sp.sinh: 0, sp.cosh: 1,
                sp.atan: 0}

    def __init__(self, exact: bool, deadline: float):
        self.exact, self.deadline, self.ops = exact, deadline, 0

    def tick(self) -> None:
        self.ops += 1
        if self.ops % 256 == 0 and time.monotonic() > self.deadline:
            raise _Switch() if self.exact else _Timeout()

    def num(self, value: Any) -> Any:
        return Fraction(value) if self.exact else mpmath.mpf(value)

    def const(self, expr: sp.Expr) -> Any:
        if self.exact:
            if expr.is_Rational:
                return Fraction(int(expr.p), int(expr.q))
            raise _Switch()
        value = sp.N(expr, DPS)
        if not value.is_real or not value.is_finite:
            raise Undefined(f"the constant {expr} is not a finite real number")
        return mpmath.mpf(str(value))

    def func(self, fn: type, u0: Any) -> Any:
        """fn(u0) for a function of the whitelist."""
        if self.exact:
            if u0 == 0 and fn in self._AT_ZERO:
                return Fraction(self._AT_ZERO[fn])
            if fn is sp.log and u0 == 1:
                return Fraction(0)
            raise _Switch()
        return self._FLOAT_FUNCS[fn](u0)

    def root(self, a0: Any, r: Any) -> Any:
        """a0**r for a0 > 0 and a non-integer r."""
        if self.exact:
            value = sp.Rational(a0.numerator, a0.denominator) ** sp.Rational(r.numerator, r.denominator)
            if value.is_Rational:
                return Fraction(int(value.p), int(value.q))
            raise _Switch()
        return mpmath.power(a0, r)

    def zero(self, c: Any, scale: Any = 1) -> bool:
        return c == 0 if self.exact else abs(c) <= REL_ZERO * max(1, scale)

    def show(self, c: Any) -> str:
        return str(c) if self.exact else mpmath.nstr(c, 6)


def _normalize(a: _Series, ar: _Arith) -> _Series:
    scale = max((abs(c) for c in a.c), default=0)
    k = 0
    while k < len(a.c) and ar.zero(a.c[k], scale):
        k += 1
    return _Series(a.c[k:], a.lo + k)


def _add(a: _Series, b: _Series, sign: int = 1) -> _Series:
    lo, hi = min(a.lo, b.lo), min(a.hi, b.hi)
    return _Series([a.at(k) + sign * b.at(k) for k in range(lo, hi)], lo) if hi > lo else _Series([], hi)


def _mul(a: _Series, b: _Series, ar: _Arith) -> _Series:
    a, b = _normalize(a, ar), _normalize(b, ar)
    lo, hi = a.lo + b.lo, min(a.hi + b.lo, b.hi + a.lo)
    out = []
    for k in range(hi - lo):
        ar.tick()
        first, last = max(0, k - len(b.c) + 1), min(k, len(a.c) - 1)
        out.append(sum((a.c[i] * b.c[k - i] for i in range(first, last + 1)), start=ar.num(0)))
    return _Series(out, lo)


def _scale(a: _Series, k: Any) -> _Series:
    return _Series([k * c for c in a.c], a.lo)


def _inv(a: _Series, ar: _Arith) -> _Series:
    a = _normalize(a, ar)
    if not a.c:
        raise Undefined(f"division by a quantity with no non-zero term below order {a.hi} at 0")
    inv0, out = 1 / a.c[0], []
    for k in range(len(a.c)):
        ar.tick()
        acc = sum((a.c[j] * out[k - j] for j in range(1, k + 1)), start=ar.num(0))
        out.append(inv0 if k == 0 else -inv0 * acc)
    return _Series(out, -a.lo)


def _pow_int(a: _Series, n: int, ar: _Arith) -> _Series:
    if n < 0:
        return _inv(_pow_int(a, -n, ar), ar)
    # the constant 1, long enough never to limit the precision of a product with `a`
    result, base = _Series([ar.num(1)] + [ar.num(0)] * len(a.c), 0), a
    while n:
        if n & 1:
            result = _mul(result, base, ar)
        n >>= 1
        if n:
            base = _mul(base, base, ar)
    return result


def _pow_real(a: _Series, exponent: sp.Expr, ar: _Arith) -> _Series:
    """a**r for a non-integer constant r, via u w' = r u' w (a binomial series)."""
    a = _normalize(a, ar)
    if not a.c:
        if exponent.is_positive:
            return _Series([], math.ceil(a.hi * float(exponent)))
        raise Undefined("not finite at 0: a negative power of a quantity that vanishes there")
    e = a.lo * exponent  # exact (sympy), so that 3 * (1/3) is the integer 1
    if not e.is_integer:
        raise Undefined("not differentiable at 0: a fractional power of a quantity that vanishes there")
    r = ar.const(exponent)
    if a.c[0] < 0:
        raise Undefined("not real near 0: a fractional power of a negative quantity")
    q = [c / a.c[0] for c in a.c]
    w = [ar.num(1)]
    for k in range(1, len(q)):
        ar.tick()
        w.append(sum(((r * j - (k - j)) * q[j] * w[k - j] for j in range(1, k + 1)), start=ar.num(0)) / k)
    scale = ar.root(a.c[0], r)
    return _Series([scale * c for c in w], int(e))


def _dense(a: _Series, ar: _Arith, what: str) -> list:
    a = _normalize(a, ar)
    if a.lo < 0:
        raise Undefined(f"not finite at 0: the argument of {what} has a pole there")
    return [a.at(k) for k in range(a.hi)] or [ar.num(0)]


def _integrate(d: list, g: list, w0: Any, ar: _Arith) -> list:
    """w with w(0) = w0 and w' = g u' (d: the series of u, g: of g, both known)."""
    w = [w0]
    for k in range(1, len(d)):
        ar.tick()
        w.append(sum((j * d[j] * g[k - j] for j in range(1, k + 1)), start=ar.num(0)) / k)
    return w


def _self_ode(d: list, w0: Any, g_of_w, ar: _Arith) -> list:
    """w' = g(w) u' where g_m depends on w_0..w_m only (exp, tanh, tan)."""
    w, g = [w0], [g_of_w([w0], 0)]
    for k in range(1, len(d)):
        ar.tick()
        w.append(sum((j * d[j] * g[k - j] for j in range(1, k + 1)), start=ar.num(0)) / k)
        g.append(g_of_w(w, k))
    return w


def _square_term(w: list, m: int, ar: _Arith) -> Any:
    return sum((w[i] * w[m - i] for i in range(m + 1)), start=ar.num(0))


def _function(fn: type, u: _Series, ar: _Arith) -> _Series:
    d = _dense(u, ar, fn.__name__)
    n = len(d)
    if fn is sp.exp:
        return _Series(_self_ode(d, ar.func(fn, d[0]), lambda w, m: w[m], ar), 0)
    if fn in (sp.tanh, sp.tan):
        sign = -1 if fn is sp.tanh else 1
        return _Series(_self_ode(d, ar.func(fn, d[0]), lambda w, m: (1 if m == 0 else 0)
                                 + sign * _square_term(w, m, ar), ar), 0)
    if fn in (sp.sin, sp.cos, sp.sinh, sp.cosh):
        sign = -1 if fn in (sp.sin, sp.cos) else 1
        first = sp.sin if fn in (sp.sin, sp.cos) else sp.sinh
        second = sp.cos if first is sp.sin else sp.cosh
        s, c = [ar.func(first, d[0])], [ar.func(second, d[0])]
        for k in range(1, n):
            ar.tick()
            s.append(sum((j * d[j] * c[k - j] for j in range(1, k + 1)), start=ar.num(0)) / k)
            c.append(sign * sum((j * d[j] * s[k - j] for j in range(1, k + 1)), start=ar.num(0)) / k)
        return _Series(s if fn is first else c, 0)
    if fn is sp.log:
        if ar.zero(d[0]):
            raise Undefined("not finite at 0: log of a quantity that vanishes there")
        if d[0] < 0:
            raise Undefined("not real at 0: log of a negative quantity")
        g = _inv(_Series(d, 0), ar)
        return _Series(_integrate(d, [g.at(k) for k in range(n)], ar.func(fn, d[0]), ar), 0)
    if fn is sp.atan:
        one = _Series([ar.num(1)] + [ar.num(0)] * (n - 1), 0)
        g = _inv(_add(one, _mul(_Series(d, 0), _Series(d, 0), ar)), ar)
        return _Series(_integrate(d, [g.at(k) for k in range(n)], ar.func(fn, d[0]), ar), 0)
    if fn is sp.erf:
        square = _mul(_Series(d, 0), _Series(d, 0), ar)
        g = _scale(_function(sp.exp, _scale(square, -1), ar), 2 / ar.const(sp.sqrt(sp.pi)))
        return _Series(_integrate(d, [g.at(k) for k in range(n)], ar.func(fn, d[0]), ar), 0)
    raise Undefined(f"{fn.__name__} is not supported by the series method")


def _sign(u: _Series, ar: _Arith, what: str) -> int:
    u = _normalize(u, ar)
    if not u.c:
        raise Undefined(f"{what} of a quantity that vanishes near 0 to order {u.hi}")
    return 1 if u.c[0] > 0 else -1


def _branch(node: sp.Expr, args: list[_Series], ar: _Arith, n: int) -> _Series:
    """Kinks: the branch that holds on this side of 0 (decided by the leading coefficient)."""
    if isinstance(node, sp.Abs):
        u = _normalize(args[0], ar)
        return _scale(u, -1) if u.c and u.c[0] < 0 else u
    if isinstance(node, sp.Max | sp.Min):
        best = args[0]
        for other in args[1:]:
            diff = _normalize(_add(other, best, -1), ar)
            if diff.c and (diff.c[0] > 0) == isinstance(node, sp.Max):
                best = other
        return best
    if isinstance(node, sp.Heaviside | sp.sign):
        s = _sign(args[0], ar, type(node).__name__)
        value = (1 if s > 0 else 0) if isinstance(node, sp.Heaviside) else s
        return _Series([ar.num(value)] + [ar.num(0)] * (n - 1), 0)
    raise Undefined(f"{type(node).__name__} is not supported by the series method")


def _series(node: sp.Expr, x: sp.Symbol, side: int, n: int, ar: _Arith, memo: dict) -> _Series:
    if node in memo:
        return memo[node]
    if not node.free_symbols:
        out = _Series([ar.const(node)] + [ar.num(0)] * (n - 1), 0)
    elif node == x:
        out = _Series([ar.num(0), ar.num(side)] + [ar.num(0)] * (n - 2), 0)
    elif isinstance(node, sp.Pow) and not node.exp.free_symbols:
        base = _series(node.base, x, side, n, ar, memo)
        if node.exp.is_Integer:
            out = _pow_int(base, int(node.exp), ar)
        else:
            out = _pow_real(base, node.exp, ar)
    elif isinstance(node, sp.Pow):  # b**u = exp(u log b)
        out = _series(sp.exp(node.exp * sp.log(node.base), evaluate=False), x, side, n, ar, memo)
    else:
        args = [_series(a, x, side, n, ar, memo) for a in node.args]
        if isinstance(node, sp.Add):
            out = args[0]
            for a in args[1:]:
                out = _add(out, a)
        elif isinstance(node, sp.Mul):
            out = args[0]
            for a in args[1:]:
                out = _mul(out, a, ar)
        elif len(args) == 1 and type(node) in _Arith._FLOAT_FUNCS:
            out = _function(type(node), args[0], ar)
        else:
            out = _branch(node, args, ar, n)
    memo[node] = out
    return out


def _both_sides(expr: sp.Expr, x: sp.Symbol, n: int, ar: _Arith) -> tuple[_Series, _Series]:
    sides = []
    for side in (1, -1):
        s = _normalize(_series(expr, x, side, n, ar, {}), ar)
        if s.lo < 0:
            raise Undefined("not finite at 0: the function has a pole there")
        sides.append(s)
    return sides[0], sides[1]


def _read(right: _Series, left: _Series, max_order: int, ar: _Arith) -> Multiplicity | None:
    """p from the two one-sided series, or None when they are too short to decide."""
    r0, l0 = right.at(0), left.at(0)
    scale = max([abs(c) for c in right.c + left.c] or [0])
    if not ar.zero(r0 - l0, scale):
        return None, None, f"not continuous at 0: left limit {ar.show(l0)}, right limit {ar.show(r0)}"
    top = min(max_order, right.hi - 1, left.hi - 1)
    for s in range(1, top + 1):
        rs, ls = right.at(s), (-1) ** s * left.at(s)
        fact = math.factorial(s)
        if not ar.zero(rs - ls, scale):
            sides = f"left derivative {ar.show(ls * fact)}, right derivative {ar.show(rs * fact)}"
            return None, None, f"{_what(s)} at 0: {sides}"
        if not ar.zero(rs, scale):
            value = float(rs * fact)
            if not math.isfinite(value):
                big = ar.show(rs * fact)
                return None, None, f"not determined: derivative {s} at 0 is {big}, beyond a float"
            return s, value, ""
    return None if top < max_order else (None, None, f"all derivatives up to order {max_order} vanish at 0")


def taylor_multiplicity(expr: sp.Expr, x: sp.Symbol, max_order: int = MAX_ORDER) -> Multiplicity:
    """(p, sigma^(p)(0), note) of expr in x, with bounded time; p None with a reason if undefined."""
    start = time.monotonic()
    orders = sorted({min(FAST_ORDER, max_order), max_order})
    exact = True
    for order in orders:
        n, got = order + 1, None
        for _ in range(4):  # divisions shorten a series; retry with more terms when they did
            try:
                ar = _Arith(exact, start + TIME_LIMIT * (EXACT_SHARE if exact else 1.0))
                with mpmath.workdps(DPS):
                    got = _read(*_both_sides(expr, x, n, ar), order, ar)
            except _Switch:
                exact = False
                continue
            except _Timeout:
                return None, None, f"not determined: the Taylor series took longer than {TIME_LIMIT:g} s"
            except Undefined as err:
                return None, None, str(err)
            except (ZeroDivisionError, OverflowError, ValueError) as err:
                return None, None, f"not determined: {err}"
            if got is not None:
                if got[0] is not None or order == max_order or got[2].startswith(("not", "deriv")):
                    return got
                break
            n += order + 1
        if got is None:
            return None, None, "not determined: divisions by quantities vanishing at 0 left too few terms"
    return None, None, f"all derivatives up to order {max_order} vanish at 0"
