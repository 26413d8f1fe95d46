"""Tests for condlab.activations._activations: multiplicity (Definition 1), fast fn/grad, safe parsing."""

from __future__ import annotations

import math
import re

import pytest
import sympy as sp
import torch

from condlab.activations import _activations as A
from condlab.activations._activations import (
    Activation,
    activation_table,
    expression_to_torch,
    get_activation,
    list_activations,
    multiplicity,
    multiplicity_numeric,
    parse_expression,
    register_activation,
)

BUILTINS = ["gelu", "leaky_relu", "relu", "sigmoid", "silu", "softplus", "tanh", "x2tanh", "xtanh"]
X = sp.Symbol("x", real=True)
# a dense grid, 0 itself, and large |x| where naive softplus/sigmoid overflow or cancel
GRID = torch.cat([torch.linspace(-8, 8, 161), torch.tensor([-50.0, -30, -20, 20, 30, 50])])
REFERENCE_POINTS = [-50, -20, -3, -0.5, 0, 0.7, 2, 20, 50]


@pytest.fixture(autouse=True)
def _isolated_user_registry(monkeypatch):
    # register_activation mutates module state; keep every test independent
    monkeypatch.setattr(A, "_USER", {})


def autograd_derivative(fn, x: torch.Tensor) -> torch.Tensor:
    x = x.detach().clone().requires_grad_(True)
    (g,) = torch.autograd.grad(fn(x).sum(), x)
    return g


# --- multiplicity -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec, p",
    [
        ("tanh", 1),
        ("sigmoid", 1),
        ("softplus", 1),
        ("gelu", 1),
        ("silu", 1),
        ("swish", 1),
        ("xtanh", 2),
        ("x2tanh", 3),
        ("relu", None),
        ("leaky_relu", None),
        ("x*tanh(x)", 2),
        ("x**2*tanh(x)", 3),
        ("x**3*tanh(x)", 4),
        ("sin(x)**2", 2),
        ("x*relu(x)", None),
        ("abs(x)", None),
    ],
)
def test_multiplicity(spec, p):
    act = get_activation(spec)
    assert act.multiplicity == p
    if p is None:
        assert act.leading_coefficient is None
        assert "not differentiable at 0" in act.note
    else:
        assert act.note == ""


@pytest.mark.parametrize(
    "spec, coefficient",
    [
        ("tanh", 1.0),
        ("sigmoid", 0.25),
        ("softplus", 0.5),
        ("gelu", 0.5),
        ("silu", 0.5),
        ("xtanh", 2.0),  # σ''(0)
        ("x2tanh", 6.0),  # σ'''(0)
        ("x**3*tanh(x)", 24.0),  # σ''''(0)
        ("sin(x)**2", 2.0),
    ],
)
def test_leading_coefficient_is_the_pth_derivative(spec, coefficient):
    assert get_activation(spec).leading_coefficient == pytest.approx(coefficient, abs=1e-12)


def test_relu_note_gives_the_one_sided_derivatives():
    assert get_activation("relu").note == (
        "not differentiable at 0: left derivative 0, right derivative 1"
    )
    assert "left derivative 1/100, right derivative 1" in get_activation("leaky_relu").note


def test_kink_in_a_higher_derivative_is_reported_with_its_order():
    _, _, note = multiplicity(parse_expression("x*relu(x)"))
    assert note.startswith("derivative of order 1 is not differentiable at 0")


@pytest.mark.parametrize(
    "text, p, note",
    [
        ("x + relu(x) - relu(x)*1", 1, ""),  # kinks that cancel
        ("x**2 + relu(x)**3", 2, ""),  # a kink in the third derivative does not matter for p = 2
        ("relu(x)/x", None, "not continuous at 0: left limit 0, right limit 1"),  # a jump in σ
        ("sin(x)/x", 2, ""),  # removable singularity: found by the limit fallback
        ("2", None, "a constant: every derivative vanishes"),
        ("x**13", 13, ""),  # above the old search limit of 12
        ("x**33", None, "all derivatives up to order 32 vanish at 0"),
        ("1/x", None, "not finite at 0: the function has a pole there"),
        ("sqrt(x)", None, "not differentiable at 0: a fractional power of a quantity that vanishes there"),
    ],
)
def test_multiplicity_edge_cases(text, p, note):
    got_p, _, got_note = multiplicity(parse_expression(text))
    assert (got_p, got_note) == (p, note)


def test_all_vanishing_derivatives_give_undefined():
    assert multiplicity(parse_expression("x**20"), max_order=5) == (
        None,
        None,
        "all derivatives up to order 5 vanish at 0",
    )


def test_multiplicity_of_deep_nesting_is_bounded():
    # 44 characters that took minutes by repeated symbolic differentiation; the Taylor method
    # is O(nodes x order^2). No timing is asserted: the value shows the series went deep enough.
    assert multiplicity(parse_expression("tanh(tanh(tanh(tanh(tanh(tanh(x))))))**7")) == (7, 5040.0, "")


def test_nesting_depth_is_limited_with_a_message():
    assert get_activation("-" * 99 + "x").multiplicity == 1
    for text in ("-" * 1999 + "x", "tanh(" * 101 + "x" + ")" * 101):
        with pytest.raises(ValueError, match="nested deeper than 100 levels") as info:
            get_activation(text)
        assert len(str(info.value)) < 400


def test_multiplicity_is_cached():
    expr = parse_expression("x**5*tanh(x)")
    first = multiplicity(expr)
    hits = multiplicity.cache_info().hits
    assert multiplicity(expr) == first == (6, 720.0, "")
    assert multiplicity.cache_info().hits == hits + 1


@pytest.mark.parametrize(
    "fn, p, coefficient",
    [
        (lambda t: t * torch.tanh(t), 2, 2.0),
        (lambda t: t**3 * torch.tanh(t), 4, 24.0),
        (torch.tanh, 1, 1.0),
        (torch.relu, None, None),
        (lambda t: torch.nn.functional.leaky_relu(t, 0.01), None, None),
        (lambda t: t * torch.relu(t), None, None),
    ],
)
def test_multiplicity_numeric(fn, p, coefficient):
    got_p, got_coefficient, note = multiplicity_numeric(fn)
    assert got_p == p
    if p is None:
        assert got_coefficient is None and "not differentiable at 0" in note
    else:
        assert got_coefficient == pytest.approx(coefficient, rel=1e-9)


def test_from_callable():
    xtanh = Activation.from_callable("my_xtanh", lambda t: t * torch.tanh(t))
    assert (xtanh.multiplicity, xtanh.expr) == (2, None)
    x = GRID.double()
    torch.testing.assert_close(xtanh.grad(x), get_activation("xtanh").grad(x), rtol=0, atol=1e-12)
    relu = Activation.from_callable("relu", torch.relu)
    assert relu.multiplicity is None
    assert relu.note == "not differentiable at 0: left derivative 0, right derivative 1"


# --- fn and grad --------------------------------------------------------------------------


@pytest.mark.parametrize("name", BUILTINS)
def test_builtin_grad_matches_autograd(name):
    act = get_activation(name)
    x = GRID.double()
    torch.testing.assert_close(act.grad(x), autograd_derivative(act.fn, x), rtol=0, atol=1e-10)


@pytest.mark.parametrize("name", BUILTINS)
def test_builtin_fn_and_grad_match_the_expression(name):
    # the expression (which p is computed from) and the fast torch code describe one function
    act = get_activation(name)
    derivative = sp.diff(act.expr, X)
    for v in REFERENCE_POINTS:
        t = torch.tensor([float(v)], dtype=torch.float64)
        at = {X: sp.Rational(str(v))}
        assert act(t).item() == pytest.approx(float(act.expr.subs(at).evalf(30)), abs=1e-10)
        assert math.isfinite(act.grad(t).item())
        if v != 0:  # sympy's Heaviside(0) = 1/2 is a convention, not a derivative
            expected = float(derivative.subs(at).evalf(30))
            assert act.grad(t).item() == pytest.approx(expected, abs=1e-10)


@pytest.mark.parametrize("name", BUILTINS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_builtin_keeps_shape_and_dtype(name, dtype):
    act = get_activation(name)
    x = torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(0)).to(dtype)
    for out in (act(x), act.grad(x)):
        assert out.shape == x.shape and out.dtype == dtype
        assert torch.isfinite(out).all()


@pytest.mark.parametrize(
    "text",
    [
        "x**3*tanh(x)",
        "sin(x)**2",
        "x*sigmoid(x) + softplus(x)",
        "exp(-x**2/2)*cos(3*x) - e",
        "atan(x) + sqrt(1 + x**2) + arctan(2*x)",
        "erf(x/sqrt(2))*pi + sinh(x/4)*cosh(x/5)",
        "abs(x)*x",
        "relu(x)**2 + 0.5*x",
        "log(1 + x**2) + tan(x/10)",
    ],
)
def test_expression_fn_and_grad_match_autograd(text):
    act = get_activation(text)
    assert act.name == act.formula == text
    x = torch.linspace(-4, 4, 80, dtype=torch.float64)  # even count: 0 is not on the grid
    reference = expression_to_torch(parse_expression(text))
    torch.testing.assert_close(act(x), reference(x))
    torch.testing.assert_close(act.grad(x), autograd_derivative(act.fn, x), rtol=0, atol=1e-10)


def test_expression_sigmoid_and_softplus_are_stable():
    x = torch.tensor([-1000.0, -50.0, 0.0, 50.0, 1000.0], dtype=torch.float64)
    for text in ("sigmoid(x)", "softplus(x)"):
        ours = get_activation(text)(x)
        torch.testing.assert_close(ours, get_activation(text.split("(")[0])(x))


def test_expression_to_torch_several_variables_and_constants():
    x1, x2, x3 = torch.randn(3, 5, dtype=torch.float64).unbind()
    f = expression_to_torch(
        parse_expression("x1*x2 + sin(x3) - 2", ("x1", "x2", "x3")), ("x1", "x2", "x3")
    )
    torch.testing.assert_close(f(x1, x2, x3), x1 * x2 + torch.sin(x3) - 2)
    g = expression_to_torch(parse_expression("x1**2", ("x1", "x2")), ("x1", "x2"))
    assert g(torch.ones(3, 1), torch.ones(1, 4)).shape == (3, 4)  # broadcast over all inputs
    const = expression_to_torch(parse_expression("pi"))(torch.zeros(2, 3, dtype=torch.float64))
    torch.testing.assert_close(const, torch.full((2, 3), math.pi, dtype=torch.float64))
    with pytest.raises(ValueError, match="x2"):
        expression_to_torch(parse_expression("x1 + x2", ("x1", "x2")), ("x1",))


# --- safe parser --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, piece",
    [
        ("__import__('os').system('x')", "__import__('os').system"),
        ("x.__class__", "x.__class__"),
        ("lambda: 1", "lambda"),
        ("open('f')", "open"),
        ("y", "'y'"),
        ("x[0]", "x[0]"),
        ("'abc'", "'abc'"),
        ("tanh(x, 2)", "tanh"),
        ("exp(x=1)", "exp"),
        ("x^2", "**"),
        ("x if x else 1", "x if x else 1"),
        ("sin", "sin(x)"),
        ("1/0", "infinite"),
        ("9**9**9", "too large"),
        ("x +", "invalid syntax"),
    ],
)
def test_parser_rejects_with_a_message_naming_the_piece(text, piece):
    with pytest.raises(ValueError, match=re.escape(piece)) as info:
        parse_expression(text)
    message = str(info.value)
    assert "\n" not in message and "tanh" in message and "sigmoid" in message


def test_parser_builds_exact_sympy():
    assert parse_expression("0.01*x") == X / 100
    assert parse_expression("-x**2 + e**x") == -(X**2) + sp.exp(X)
    assert parse_expression("relu(x)") == sp.Max(0, X)
    assert parse_expression("x1*x2", ("x1", "x2")).free_symbols == {
        sp.Symbol("x1", real=True),
        sp.Symbol("x2", real=True),
    }
    with pytest.raises(ValueError, match="unknown name 'x'"):
        parse_expression("x", ("x1", "x2"))


# --- registry -----------------------------------------------------------------------------


def test_unknown_activation_lists_known_names():
    with pytest.raises(ValueError) as info:
        get_activation("tanhh")
    assert str(info.value) == (
        "unknown activation 'tanhh': known activations are "
        + ", ".join(BUILTINS)
        + "; or give an expression in x such as 'x**3*tanh(x)'"
    )


def test_invalid_expression_names_the_piece_and_the_known_names():
    with pytest.raises(ValueError, match=r"unknown name 'y'.*known activations are gelu") as info:
        get_activation("x*tanh(y)")
    assert "\n" not in str(info.value)


def test_lookup_is_case_insensitive_with_aliases():
    assert get_activation("TANH") is get_activation("tanh")
    assert get_activation(" Swish ") is get_activation("silu")
    act = get_activation("xtanh")
    assert get_activation(act) is act


def test_list_activations_is_the_sorted_registry():
    names = [a.name for a in list_activations()]
    assert names == BUILTINS
    for act in list_activations():
        assert act.expr == parse_expression(act.formula)  # p is computed from the formula
        assert (act.multiplicity, act.leading_coefficient, act.note) == multiplicity(act.expr)


def test_gelu_is_the_exact_erf_form():
    x = torch.linspace(-5, 5, 101, dtype=torch.float64)
    exact = x / 2 * (1 + torch.erf(x / math.sqrt(2)))
    torch.testing.assert_close(get_activation("gelu")(x), exact, rtol=0, atol=1e-12)


def test_register_activation():
    act = register_activation("X3tanh", "x**3*tanh(x)")
    assert (act.name, act.formula, act.multiplicity) == ("x3tanh", "x**3*tanh(x)", 4)
    assert get_activation("x3tanh") is act
    assert "x3tanh" in [a.name for a in list_activations()]
    with pytest.raises(ValueError, match="built-in"):
        register_activation("tanh", "x")
    with pytest.raises(ValueError, match="unknown name 'z'"):
        register_activation("bad", "z")


def test_activation_table():
    register_activation("x3tanh", "x**3*tanh(x)")
    rows = activation_table()
    assert [r["name"] for r in rows] == sorted([*BUILTINS, "x3tanh"])
    by_name = {r["name"]: r for r in rows}
    assert all(set(r) == {"name", "formula", "p"} for r in rows)
    assert by_name["relu"]["p"] == by_name["leaky_relu"]["p"] == "undefined"
    assert (by_name["tanh"]["p"], by_name["xtanh"]["p"], by_name["x2tanh"]["p"]) == (1, 2, 3)
    assert by_name["x3tanh"] == {"name": "x3tanh", "formula": "x**3*tanh(x)", "p": 4}


@pytest.mark.parametrize("name", ["tanh", "sigmoid", "softplus", "gelu", "silu", "xtanh", "x2tanh",
                                  "x**3*tanh(x)", "sin(x)**2"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_value_and_grad_matches_fn_and_grad(name, dtype):
    """The training loop's fused, in-place (σ, σ') equals the separate fn and grad."""
    act = get_activation(name)
    t = torch.linspace(-6, 6, 243, dtype=dtype).reshape(3, 81, 1).expand(3, 81, 2).contiguous()
    value = torch.full((3, 81, 3), float("nan"), dtype=dtype)[..., :2]   # a strided output
    slope = torch.empty_like(t)
    act.value_and_grad(t, value, slope)
    tol = 1e-6 if dtype == torch.float32 else 1e-14
    torch.testing.assert_close(value, act.fn(t), rtol=tol, atol=tol)
    torch.testing.assert_close(slope, act.grad(t), rtol=tol, atol=tol)


def test_builtin_names_known_without_sympy_match_the_registry():
    # config validation trusts _checks' list of names instead of importing sympy and torch
    from condlab.training._checks import ACTIVATION_ALIASES, BUILTIN_ACTIVATIONS

    assert tuple(A._BUILTINS) == BUILTIN_ACTIVATIONS
    for name in BUILTIN_ACTIVATIONS:  # validate() skips check_trainable for these names
        A.check_trainable(A.get_activation(name))
    assert all(A.get_activation(alias).name == name for alias, name in ACTIVATION_ALIASES.items())
