"""The runs of ``reproduce optimistic``: the teacher, the student configs, and the two inits.

Small init goes through the shared trainer (``Context.train``: condlab's one std for every
parameter). Large init is LeCun's standard scaling, which one std cannot express: the input
weights and biases (w_i, b_i) start from N(0, 1/(d + 1)) (pre-activations of unit variance on
unit-variance inputs) and the output weights from N(0, 1/m), so the output is O(1) at any width
(the 1/√m scaling). Those runs are trained by condlab's batched trainer (``train_batch``, the
loop ``condlab.train`` runs) from weights drawn with condlab's generator (``init_weights`` with
std 1, then scaled per layer), full-batch GD in float64 as the small-init runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from .. import Config
from ._context import stop_if_signalled

D, BOX = 4, math.sqrt(3.0)
TEACHERS = {  # (a_i, w_i): distinct directions, |w_i| ~ 1.2 (tanh's nonlinear range on the box)
    1: [(1.0, (0.8, -0.6, 0.5, 0.3))],
    2: [(1.0, (0.8, -0.6, 0.5, 0.3)), (-0.8, (-0.4, 0.2, 0.9, -0.7))],
}


@dataclass
class Fit:
    """One run's final network (None when it diverged) and its relative errors (inf: diverged)."""

    net: torch.nn.Module | None
    test: float
    train: float
    seed: int


def _expression(k: int) -> str:
    terms = []
    for a, w in TEACHERS[k]:
        inner = " + ".join(f"{c}*x{i + 1}" for i, c in enumerate(w)).replace("+ -", "- ")
        terms.append(f"{a}*tanh({inner})")
    return " + ".join(terms).replace("+ -", "- ")


def teacher(k: int, x: np.ndarray) -> np.ndarray:
    """f*(x) of the k-neuron teacher, x (n, d) -> (n,)."""
    return sum(a * np.tanh(x @ np.array(w)) for a, w in TEACHERS[k])


def student_config(k: int, n: int, width: int, epochs: int, init: dict, snapshots: str | list[int],
                   data_seed: int) -> Config:
    """The student of width `width` on n teacher samples (data.seed `data_seed`), GD in float64."""
    return Config.from_dict({
        "name": f"optimistic-k{k}-n{n}-m{width}",
        "data": {"n": n, "d": D, "low": -BOX, "high": BOX, "target": _expression(k), "seed": data_seed},
        "model": {"width": width, "output_bias": False, "init_std": [init["init_std"]]},
        "train": {"optimizer": "gd", "lr": [init["lr"]], "epochs": epochs, "dtype": "float64",
                  "snapshots": snapshots}})


def relative_error(net: torch.nn.Module, x: np.ndarray, y: np.ndarray) -> float:
    """‖f(x) − y‖ / ‖y‖ of a network on inputs x (n, d), targets y (n,)."""
    with torch.no_grad():
        f = net(torch.as_tensor(x, dtype=torch.float64)).numpy()[:, 0]
    return float(np.linalg.norm(f - y) / np.linalg.norm(y))


def fits_of_runs(runs, x_test: np.ndarray, y_test: np.ndarray) -> list[Fit]:
    """The Fit of each condlab Run (last snapshot); a run that did not complete has none."""
    fits = []
    for run in runs:
        if run.status != "complete":
            fits.append(Fit(None, math.inf, math.inf, run.spec.seed))
            continue
        net = run.network(int(run.epochs[-1]))
        fits.append(Fit(net, relative_error(net, x_test, y_test),
                        relative_error(net, run.x, run.y[:, 0]), run.spec.seed))
    return fits


def lecun_fits(cfg: Config, seeds: list[int], x_test: np.ndarray, y_test: np.ndarray) -> list[Fit]:
    """Train `cfg`'s student from LeCun-scaled weights, one batch over `seeds` -> their Fits.

    A stop request (Ctrl-C) ends the batch inside the trainer; it is raised again here, so
    the experiment stops instead of judging half-trained runs.
    """
    from ..records import RunSpec
    from ..training import Architecture, BatchedNet, FCNet, init_weights, make_dataset, train_batch

    data = make_dataset(cfg.data)
    arch = Architecture.from_config(cfg.model, cfg.data.d)
    net = BatchedNet(arch, len(seeds), torch.float64, torch.device("cpu"))
    scales = [1 / math.sqrt(cfg.data.d + 1), 1 / math.sqrt(cfg.model.width)]  # fan-in of (x, 1); of m
    for r, seed in enumerate(seeds):
        net.load(r, [w * s for w, s in zip(init_weights(arch, seed, 1.0), scales, strict=True)])
    specs = [RunSpec(seed=s, init_std=1.0, lr=cfg.train.lr[0]) for s in seeds]
    epochs = cfg.train.epochs
    outcome = train_batch(net, torch.as_tensor(data.x), torch.as_tensor(data.y), specs, optimizer="gd",
                          epochs=epochs, snapshot_at=[epochs])
    if outcome.interrupted:
        raise KeyboardInterrupt(f"optimistic: interrupted while training {cfg.name} (large init)")
    stop_if_signalled(f"optimistic: {cfg.name} (large init)")   # a Ctrl-C a finalizer swallowed
    fits = []
    for r, seed in enumerate(seeds):
        if outcome.diverged_epoch[r] is not None:
            fits.append(Fit(None, math.inf, math.inf, seed))
            continue
        student = FCNet(arch, [w[r].clone() for w in net.weights])
        fits.append(Fit(student, relative_error(student, x_test, y_test),
                        relative_error(student, data.x, data.y[:, 0]), seed))
    return fits
