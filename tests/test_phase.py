"""Phase diagram (JMLR 2021): parameterization, the GD-to-convergence trainer, regimes, resume.

Pre-registered (before any diagram was drawn): slope margin 0.05 (SLOPE_MARGIN), boundary margin
0.15, agreement >= 95 % of grid points away from the boundary, seed 0 for the smoke grid.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import condlab
from condlab.phase import (
    SCHEMES,
    DiagramSpec,
    boundary_distance,
    coordinates,
    phase_diagram,
    preset_spec,
    rescaled_time,
    scales,
    theory_regime,
    train_to_convergence,
)
from condlab.phase._diagram import SLOPE_MARGIN, plan_diagram
from condlab.phase._train import _loss_grad_bound, _State, init_params


@pytest.mark.parametrize("g, gp, m", [(0.25, -0.5, 100), (1.75, 0.5, 1000), (2.0, 1.5, 12345)])
def test_scales_give_kappa_m_to_minus_gamma_exactly(g, gp, m):
    s = scales(g, gp, m)
    assert math.isclose(s.kappa, m ** -g, rel_tol=1e-12)
    assert math.isclose(s.kappa_prime, m ** -gp, rel_tol=1e-12)
    assert coordinates(s, m) == pytest.approx((g, gp), abs=1e-12)


def test_named_schemes_tend_to_the_talks_coordinates_and_regimes():
    talk = {"lecun": (0.5, 0.5, "linear"), "he": (0.5, 0.5, "linear"), "xavier": (1, 0, "critical"),
            "ntk": (0.5, 0, "linear"), "mean-field": (1, 0, "critical")}
    assert set(SCHEMES) == set(talk)
    for name, (g, gp, regime) in talk.items():
        s = SCHEMES[name]
        assert (s.gamma, s.gamma_prime, s.regime) == (g, gp, regime)
        assert theory_regime(g, gp) == regime
        # constants (2, d) only move the finite-m estimate by O(1 / log m)
        big = 10**12
        assert coordinates(s.scales(big, 3), big) == pytest.approx((g, gp), abs=0.07)


def test_theory_regimes_and_boundary_distance():
    assert theory_regime(0.5, -3) == "linear" and theory_regime(2, 1.5) == "linear"
    assert theory_regime(2, 0.5) == "condensed" and theory_regime(1.5, 0.5) == "critical"
    assert theory_regime(1, -1) == "critical"
    assert boundary_distance(1, -2) == 0 and boundary_distance(2, 1) == 0
    assert boundary_distance(1.5, 0) == pytest.approx(0.5 / math.sqrt(2))
    assert boundary_distance(0.5, -1) == pytest.approx(0.5)
    assert boundary_distance(0, 1) == pytest.approx(math.sqrt(2))


def test_rescaled_time_divides_by_beta1_beta2():
    s = scales(1.0, 0.5, 100)
    assert rescaled_time(2.0, s) == pytest.approx(2.0 / (s.beta1 * s.beta2))


def test_asi_output_is_zero_at_start_and_gradients_match_autograd():
    m = 7
    s = [scales(1.5, 0.25, m), scales(0.5, 1.0, m)]
    a, w = init_params(m, s, [0, 1], asi=True)
    x = torch.tensor([[-0.5, 1.0], [0.0, 1.0], [0.5, 1.0]], dtype=torch.float64)
    y = torch.tensor([-0.5, 0.0, 1.0], dtype=torch.float64)
    alpha = torch.tensor([v.alpha for v in s], dtype=torch.float64)
    f0 = torch.einsum("rk,rkn->rn", a, torch.relu(w @ x.T))
    assert torch.allclose(f0, torch.zeros_like(f0), atol=1e-15)
    a = a + 0.1 * torch.randn(a.shape, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    st = _State(a.clone(), w.transpose(1, 2).contiguous(), alpha, 1.0)
    loss, (ga, gw), bound = _loss_grad_bound(st, x, y, torch.relu, lambda z: (z > 0).double(), None)
    a_, w_ = a.clone().requires_grad_(True), w.clone().requires_grad_(True)
    f = torch.einsum("rk,rkn->rn", a_, torch.relu(w_ @ x.T)) / alpha[:, None]
    ref = 0.5 * ((f - y) ** 2).mean(1)
    ref.sum().backward()
    assert torch.allclose(loss, ref.detach(), rtol=1e-12)
    assert torch.allclose(ga, a_.grad, rtol=1e-10, atol=1e-300)
    assert torch.allclose(gw.transpose(1, 2), w_.grad, rtol=1e-10, atol=1e-300)
    # the bound is at least the top Hessian eigenvalue (exact Hessian of this tiny net)
    for r in range(2):
        def loss_r(theta, r=r):
            aa, ww = theta[: 2 * m], theta[2 * m:].reshape(2 * m, 2)
            ff = (aa * torch.relu(ww @ x.T).T).sum(1) / alpha[r]
            return 0.5 * ((ff - y) ** 2).mean()
        theta = torch.cat([a[r], w[r].flatten()])
        top = torch.linalg.eigvalsh(torch.autograd.functional.hessian(loss_r, theta))[-1]
        assert float(bound[r]) >= float(top) * (1 - 1e-9)


def test_batched_runs_equal_single_runs_and_converge():
    m = 300
    pts = [(0.5, 0.5), (1.75, 0.0)]
    together = train_to_convergence(m, [scales(g, gp, m) for g, gp in pts], [0, 1])
    for (g, gp), seed, run in zip(pts, [0, 1], together.runs, strict=True):
        alone = train_to_convergence(m, [scales(g, gp, m)], [seed]).runs[0]
        assert run.converged and run.loss < 1e-6 and run.steps == alone.steps
        assert run.rd_w == pytest.approx(alone.rd_w, rel=1e-9)
        assert run.curve["loss"][-1] == run.loss and len(run.curve["step"]) == run.steps + 1


def test_step_budget_marks_runs_not_converged():
    run = train_to_convergence(50, [scales(0.5, 0.5, 50)], [0], max_steps=5).runs[0]
    assert not run.converged and run.steps == 5 and run.status == "complete"


def test_rd_below_float_rounding_is_kept():
    # at gamma' = 1.5 the input weights barely move: RD below the rounding of w - w0 (~1e-16)
    m = 1000
    run = train_to_convergence(m, [scales(0.25, 1.5, m)], [0]).runs[0]
    assert run.converged and 0 < run.rd_w < 1e-9


def _small_spec(**kw) -> DiagramSpec:
    # the smoke grid (all 25 points off the boundary) on widths 10^2..10^3: seconds, not minutes
    base = preset_spec("smoke")
    return DiagramSpec("test", base.gammas, base.gamma_primes, [100, 300, 1000], [0], **kw)


def test_small_diagram_agrees_with_the_theory_and_schemes_sit_in_the_talks_regimes(tmp_path):
    res = phase_diagram(_small_spec(), out=tmp_path)
    assert res.agreement["counted"] == 25
    assert res.agreement["share"] >= 0.95, res.agreement["disagree"]
    for name, s in res.schemes.items():
        assert s["holds"], (name, s)
    claims = json.loads((tmp_path / "claims.json").read_text())
    assert all(v["holds"] for v in claims["verdicts"])
    assert (tmp_path / "phase_diagram.png").is_file() and (tmp_path / "rescaled_time.png").is_file()
    again = phase_diagram(_small_spec(), out=tmp_path)  # resume: nothing trained again
    assert (again.sweep.trained, again.sweep.skipped) == (0, len(again.sweep.plan.runs))


@pytest.mark.slow
@pytest.mark.parametrize("target", ["authors", "harder"])
def test_smoke_diagram_agrees_with_the_theory(tmp_path, target):
    res = phase_diagram(preset_spec("smoke", target), out=tmp_path)
    assert res.agreement["counted"] == 25
    assert res.agreement["share"] >= 0.95, res.agreement["disagree"]


def test_plan_hashes_are_stable_and_batches_bounded():
    plan, batches = plan_diagram(_small_spec())
    assert len(plan.runs) == (25 + len(SCHEMES)) * 3
    assert len({r.hash for r in plan.runs}) == len(plan.runs)
    again, _ = plan_diagram(_small_spec())
    assert [r.hash for r in again.runs] == [r.hash for r in plan.runs]
    assert sum(len(b.runs) for b in batches) == len(plan.runs)
    assert SLOPE_MARGIN == 0.05  # pre-registered


def test_killed_diagram_resumes_without_retraining_finished_points(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text("gammas: [0.5, 1.75]\ngamma_primes: [0.0, 1.0]\nschemes: []\nseeds: [0, 1]\n"
                    "widths: [100, 120, 140, 160, 180, 200, 3000, 4000, 5000]\n")
    out = tmp_path / "out"
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(Path(condlab.__file__).parents[1]))
    cmd = [sys.executable, "-m", "condlab", "phase-diagram", "--spec", str(spec), "--out", str(out),
           "--no-progress"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        if len(list((out / "runs").glob("*/meta.json"))) >= 8:
            break
        time.sleep(0.02)
    if proc.poll() is not None:
        pytest.fail("the diagram finished before it could be killed: make the spec longer")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = {p.parent.name: p.stat().st_mtime_ns for p in (out / "runs").glob("*/meta.json")}
    total = 4 * 2 * 9
    assert 8 <= len(before) < total
    from condlab.phase._diagram import load_diagram_spec

    again = phase_diagram(load_diagram_spec(spec), out=out)
    assert (again.sweep.trained, again.sweep.skipped, again.sweep.failed) == (total - len(before),
                                                                             len(before), 0)
    for name, mtime in before.items():
        assert (out / "runs" / name / "meta.json").stat().st_mtime_ns == mtime
    assert not list((out / "runs").glob("*.partial"))
    rows = (out / "results.csv").read_text().splitlines()
    assert len(rows) == total + 1 and all(",complete," in r for r in rows[1:])


def test_cli_rejects_three_layers_and_bad_specs(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(Path(condlab.__file__).parents[1]))
    bad = tmp_path / "bad.yaml"
    bad.write_text("gamas: [1]\n")
    for args, start in [(["--layers", "4"], "condlab: error: --layers 4 is not accepted"),
                        (["--spec", str(bad)], "condlab: error: unknown diagram spec key 'gamas'")]:
        proc = subprocess.run([sys.executable, "-m", "condlab", "phase-diagram", *args, "--out",
                               str(tmp_path / "o")], capture_output=True, text=True, env=env)
        assert proc.returncode == 2 and proc.stderr.startswith(start), proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
    assert not np.isnan(boundary_distance(1, 0))


def test_kernel_time_scales_rescaled_time_by_the_kernel_rate():
    from condlab.phase import kernel_time

    s = SCHEMES["mean-field"].scales(1000)  # kappa = 1/m, kappa' = 1
    assert kernel_time(5.0, s, 1000) == pytest.approx(5.0 * 1000 * 1e-6 * 2)


RAY_SCRIPT = """\
set -u
ip link set lo up
export RAY_USAGE_STATS_ENABLED=0
"$RAY" start --head --node-ip-address=127.0.0.1 --port=6379 --num-cpus=2 \\
    --include-dashboard=false --disable-usage-stats > "$WORK/ray-start.log" 2>&1 || exit 90
"$PY" -m condlab phase-diagram --spec "$WORK/spec.yaml" --executor ray --address 127.0.0.1:6379 \\
    --out "$WORK/ray" --no-progress > "$WORK/out.txt" 2>&1
echo $? > "$WORK/rc"
"$RAY" stop > /dev/null 2>&1
"""


@pytest.mark.slow
def test_ray_diagram_equals_the_in_process_one(tmp_path):
    """The diagram through --executor ray on a loopback-only head (as tests/test_sweep_ray.py)."""
    import importlib.util
    import shutil

    if importlib.util.find_spec("ray") is None or shutil.which("unshare") is None or subprocess.run(
            ["unshare", "-n", "-p", "-f", "--mount-proc", "true"], capture_output=True).returncode:
        pytest.skip("needs Ray and network/PID namespaces (root)")
    spec = tmp_path / "spec.yaml"
    spec.write_text("gammas: [0.5, 1.75]\ngamma_primes: [0.0, 1.0]\nschemes: [ntk]\n"
                    "widths: [100, 300, 1000]\nseeds: [0]\n")
    # HOME in tmp_path: Ray keeps per-user state in ~/.ray (an auth token left there by another
    # Ray session makes this head refuse its own workers); the test must not depend on it
    (tmp_path / "home").mkdir()
    env = dict(os.environ, WORK=str(tmp_path), PY=sys.executable, OMP_NUM_THREADS="1",
               HOME=str(tmp_path / "home"), RAY=str(Path(sys.executable).parent / "ray"),
               PYTHONPATH=str(Path(condlab.__file__).parents[1]))
    subprocess.run(["unshare", "-n", "-p", "-f", "--mount-proc", "bash", "-c", RAY_SCRIPT], env=env,
                   timeout=600, check=False)
    assert (tmp_path / "rc").read_text().strip() == "0", (tmp_path / "out.txt").read_text()
    from condlab.phase._diagram import load_diagram_spec

    phase_diagram(load_diagram_spec(spec), out=tmp_path / "local")
    import csv

    ray_rows = list(csv.DictReader((tmp_path / "ray" / "results.csv").read_text().splitlines()))
    local_rows = list(csv.DictReader((tmp_path / "local" / "results.csv").read_text().splitlines()))
    assert len(ray_rows) == len(local_rows) == 15
    for a, b in zip(ray_rows, local_rows, strict=True):
        assert (a["run"], a["status"], a["steps"]) == (b["run"], b["status"], b["steps"])
        assert float(a["rd_w"]) == pytest.approx(float(b["rd_w"]), rel=1e-9)
