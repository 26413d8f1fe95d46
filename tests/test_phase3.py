"""Three-layer phase diagram (after Zhou et al., NeurIPS 2022): parameterization, trainer, resume, CLI.

Pre-registered (set in the task's brief before any three-layer run): slope margin 0.05 as for two
layers; seeds [0, 1]; deep in the all-linear corner (gamma, gamma') = (0.25, 1.5) every layer's slope
is < -0.05, deep in the condensed corner (2.25, -0.5) the first layer's slope is > +0.05, both over
widths 64, 128, 256 (the smoke widths).
"""

from __future__ import annotations

import json
import math

import pytest
import torch

from condlab._cli import main
from condlab.phase import (
    SCHEMES3,
    DiagramSpec3,
    Scales3,
    coordinates3,
    lazy_exponents,
    phase_diagram3,
    scales3,
)
from condlab.phase._diagram3 import SLOPE_MARGIN, fit_layers, plan_diagram3, run_sweep3
from condlab.phase._train3 import _State3, init_params3, loss_grad_bound3, train3_to_convergence

X = torch.tensor([[-0.5, 1.0], [0.0, 1.0], [0.5, 1.0]], dtype=torch.float64)
Y = torch.tensor([-0.5, 0.0, 1.0], dtype=torch.float64)


@pytest.mark.parametrize("g, gp, g2, m",
                         [(0.25, -0.5, 0.0, 64), (1.75, 0.5, 0.3, 1000), (2.0, 1.5, -0.2, 777)])
def test_scales3_give_the_coordinates_exactly(g, gp, g2, m):
    s = scales3(g, gp, m, g2)
    assert math.isclose(s.kappa, m**-g, rel_tol=1e-12)
    assert math.isclose(s.kappa_prime, m**-gp, rel_tol=1e-12)
    assert math.isclose(s.kappa2, m**-g2, rel_tol=1e-12)
    assert coordinates3(s) == pytest.approx((g, gp, g2), abs=1e-12)


def test_named_schemes_tend_to_their_coordinates():
    # the two-layer talk's (gamma, gamma'); the middle layer at gamma2 = 0 except Xavier's (fan-out m)
    talk = {"lecun": (0.5, 0.5, 0), "he": (0.5, 0.5, 0), "xavier": (1, 0, -0.5), "ntk": (0.5, 0, 0),
            "mean-field": (1, 0, 0)}
    assert set(SCHEMES3) == set(talk)
    big = 10**12
    for name, point in talk.items():
        s = SCHEMES3[name]
        assert (s.gamma, s.gamma_prime, s.gamma2) == point
        assert coordinates3(s.scales(big, 1)) == pytest.approx(point, abs=0.07)


def test_rd_depends_on_the_coordinates_only():
    """Scaling every beta by s and alpha by s^3 rescales time only: the adaptive step absorbs it."""
    m, s = 40, 7.0
    base = scales3(1.25, 0.5, m, 0.25)
    moved = Scales3(base.alpha * s**3, base.beta1 * s, base.beta2 * s, base.beta3 * s, m)
    assert coordinates3(moved) == pytest.approx(coordinates3(base), abs=1e-12)
    one, two = train3_to_convergence(m, [base, moved], [3, 3]).runs
    assert one.steps == two.steps
    for layer in ("rd_w1", "rd_w2", "rd_a"):
        assert getattr(one, layer) == pytest.approx(getattr(two, layer), rel=1e-6)


def test_lazy_exponents_by_hand():
    # (1, 0, 0): the W2 part of the kernel dominates; W1 moves m^-1, W2 m^-1/2
    assert lazy_exponents(1.0, 0.0) == pytest.approx({"w1": -1.0, "w2": -0.5, "a": -1.0})
    assert lazy_exponents(0.5, 0.5) == pytest.approx({"w1": -1.5, "w2": -1.0, "a": -0.5})
    # (1.25, 1): only a outgrows its start (e_a = 1/4); redone with a at its changed size, the hidden
    # layers' exponents move from (-1.75, -1.25) to (-1.5, -1)
    assert lazy_exponents(1.25, 1.0) == pytest.approx({"w1": -1.5, "w2": -1.0, "a": 0.25})


def _perturbed_state(m: int):
    sc = [scales3(1.5, 0.25, m), scales3(0.5, 1.0, m, 0.2)]
    w1, w2, a = init_params3(m, sc, [0, 1], asi=True)
    alpha = torch.tensor([s.alpha for s in sc], dtype=torch.float64)
    f0 = torch.einsum("bk,bkn->bn", a, torch.relu(w2 @ torch.relu(w1 @ X.T))).view(2, 2, 3).sum(1)
    assert torch.allclose(f0, torch.zeros_like(f0), atol=1e-15)  # ASI: f = 0 at the start
    gen = torch.Generator().manual_seed(3)
    w1 = w1 + 0.3 * torch.randn(w1.shape, generator=gen, dtype=torch.float64) * w1.abs().mean()
    a = a + 0.5 * torch.randn(a.shape, generator=gen, dtype=torch.float64) * a.abs().mean()
    return w1, w2, a, alpha


def _f(w1, w2, a):
    h2 = torch.relu(torch.relu(w1 @ X.T).transpose(-1, -2) @ w2.transpose(-1, -2))   # (..., n, m)
    return (h2 * a[..., None, :]).sum(-1)


def test_gradients_match_autograd_and_the_bound_covers_the_hessian():
    m = 6
    w1, w2, a, alpha = _perturbed_state(m)
    state = _State3(w1.clone(), w2.clone(), a.clone(), alpha, 1.0, 2)
    loss, (g1, (d2, h1, g2norm), ga), bound = loss_grad_bound3(state, X, Y)
    g2 = torch.bmm(d2.transpose(1, 2), h1)
    assert torch.allclose(g2norm, g2.norm(dim=(1, 2)), rtol=1e-10)
    p1, p2, pa = (t.clone().requires_grad_(True) for t in (w1, w2, a))
    ref = 0.5 * ((_f(p1, p2, pa).view(2, 2, 3).sum(1) / alpha[:, None] - Y) ** 2).mean(1)
    ref.sum().backward()
    assert torch.allclose(loss, ref.detach(), rtol=1e-12)
    for mine, auto in ((g1, p1.grad), (g2, p2.grad), (ga, pa.grad)):
        assert torch.allclose(mine, auto, rtol=1e-10, atol=1e-300)
    for r in range(2):
        sl = slice(2 * r, 2 * r + 2)

        def loss_r(th, r=r):
            k1, k2 = 2 * m * 2, 2 * m * m
            ff = _f(th[:k1].view(2, m, 2), th[k1:k1 + k2].view(2, m, m), th[k1 + k2:].view(2, m)).sum(0)
            return 0.5 * ((ff / alpha[r] - Y) ** 2).mean()

        theta = torch.cat([w1[sl].flatten(), w2[sl].flatten(), a[sl].flatten()])
        top = torch.linalg.eigvalsh(torch.autograd.functional.hessian(loss_r, theta))[-1]
        assert float(bound[r]) >= float(top) * (1 - 1e-9)


def test_batched_runs_equal_single_runs_and_converge():
    m = 48
    pts = [(0.5, 0.5), (1.75, 0.0)]
    together = train3_to_convergence(m, [scales3(g, gp, m) for g, gp in pts], [0, 1])
    for (g, gp), seed, run in zip(pts, [0, 1], together.runs, strict=True):
        alone = train3_to_convergence(m, [scales3(g, gp, m)], [seed]).runs[0]
        assert run.converged and run.loss < 1e-6 and run.steps == alone.steps
        assert run.rd_w1 == pytest.approx(alone.rd_w1, rel=1e-9)
        assert run.rd_w2 == pytest.approx(alone.rd_w2, rel=1e-9)
        assert run.curve["loss"][-1] == run.loss and len(run.curve["step"]) == run.steps + 1


def test_step_budget_marks_runs_not_converged():
    run = train3_to_convergence(16, [scales3(0.5, 0.5, 16)], [0], max_steps=5).runs[0]
    assert not run.converged and run.steps == 5 and run.status == "complete"


def _tiny(**kw) -> DiagramSpec3:
    base = dict(name="tiny3", gammas=[0.5, 2.0], gamma_primes=[0.0, 1.0], widths=[16, 32], seeds=[0],
                schemes=["ntk"], max_steps=400)
    return DiagramSpec3(**{**base, **kw})


def test_tiny_diagram_end_to_end_and_resume(tmp_path):
    spec = _tiny()
    res = phase_diagram3(spec, out=tmp_path)
    assert res.sweep.trained == 10 and res.sweep.failed == 0
    for name in ("results.csv", "regimes.csv", "claims.json", "phase_diagram.png", "spec.yaml"):
        assert (tmp_path / name).is_file()
    lines = (tmp_path / "regimes.csv").read_text().splitlines()
    assert len(lines) == 1 + 5 * 3  # per point (4 grid + 1 scheme) and layer
    claims = json.loads((tmp_path / "claims.json").read_text())
    assert claims["verdicts"] and "CONJECTURE" in claims["verdicts"][0]["claim"]
    # resume: a finished run is never trained again; a removed one is retrained alone
    plan, _ = plan_diagram3(spec)
    keep, gone = plan.runs[0].hash, plan.runs[1].hash
    stamp = (tmp_path / "runs" / keep / "meta.json").stat().st_mtime_ns
    again = run_sweep3(spec, out=tmp_path)  # the sweep alone: no figures to redraw
    assert again.trained == 0 and again.skipped == 10
    import shutil

    shutil.rmtree(tmp_path / "runs" / gone)
    third = run_sweep3(spec, out=tmp_path)
    assert third.trained == 1 and third.skipped == 9
    assert (tmp_path / "runs" / keep / "meta.json").stat().st_mtime_ns == stamp
    assert (tmp_path / "runs" / gone / "meta.json").is_file()


def test_cli_layers_3_runs_a_spec_and_rejects_what_it_cannot_do(tmp_path, capsys):
    spec = tmp_path / "s.yaml"
    spec.write_text("layers: 3\ngammas: [0.5]\ngamma_primes: [0.0]\nwidths: [16, 32]\nseeds: [0]\n"
                    "schemes: []\nmax_steps: 200\n")
    args = ["phase-diagram", "--spec", str(spec), "--out", str(tmp_path / "o"), "--no-progress"]
    assert main(args) == 0  # the spec's `layers: 3` picks the three-layer diagram
    assert "w1:" in capsys.readouterr().out and (tmp_path / "o" / "regimes.csv").is_file()
    spec.write_text("activation: tanh\n")
    assert main(["phase-diagram", "--layers", "3", *args[1:]]) == 2
    err = capsys.readouterr().err
    assert "only relu" in err and len(err.strip().splitlines()) == 1
    assert main(["phase-diagram", "--layers", "4", "--smoke"]) == 2
    assert "--layers 4" in capsys.readouterr().err
    assert main(["phase-diagram", "--gamma2", "0.5", "--smoke"]) == 2
    assert "--gamma2 0.5" in capsys.readouterr().err


@pytest.mark.experiment
def test_corners_linear_and_condensed_on_preregistered_seeds(tmp_path):
    """Stated before looking: at (0.25, 1.5) every layer's slope < -0.05; at (2.25, -0.5) W1's > +0.05
    (widths 64, 128, 256; seeds [0, 1] pooled in one fit per point, as the diagram fits)."""
    spec = DiagramSpec3("corners", [0.25, 2.25], [1.5, -0.5], widths=[64, 128, 256], seeds=[0, 1], schemes=[])
    spec.gammas, spec.gamma_primes = [0.25], [1.5]
    lin = fit_layers(run_sweep3(spec, out=tmp_path / "lin").rows)
    assert {f.layer: f.slope < -SLOPE_MARGIN for f in lin} == {"w1": True, "w2": True, "a": True}
    spec.gammas, spec.gamma_primes = [2.25], [-0.5]
    cond = fit_layers(run_sweep3(spec, out=tmp_path / "cond").rows)
    assert [f.slope for f in cond if f.layer == "w1"][0] > SLOPE_MARGIN


def test_a_second_diagram_on_the_same_out_is_refused(tmp_path):
    from condlab.records._lock import FolderInUse, folder_lock

    with folder_lock(tmp_path), pytest.raises(FolderInUse, match="in use by another phase diagram"):
        run_sweep3(_tiny(), out=tmp_path)
    assert not (tmp_path / "runs").exists()  # nothing trained, nothing written
