"""Analyse a recorded run: per layer, the measured condensation beside every prediction.

For layer k at a snapshot epoch, condlab reports

* the measured orientations (``count_orientations``: lines, directions, shares, tightness);
* the bound of Proposition 1: p lines, 2p directions;
* predictions, each with the angle from every measured line to its nearest predicted line:
  - ``gradient@snapshot``: Sec. 5 with the residual at the snapshot (as the paper does);
  - ``gradient@init``: the same with the residual at initialization (e ~ -y, as the talk);
  - ``sign@init``: the sign flow, what Adam's first steps follow (Adam runs only);
  - ``replay``: the leading-order dynamics replayed with the run's optimizer and residual
    history (``_replay.py``), which captures both the rotation of the residual and Adam.

Residuals keep every output, shape (n, d_out): with vector output weights the p = 1 line is
the top right singular vector of G = EᵀX/n, not the direction of the summed residual (see
analysis/_theory.py). Layer inputs x^[k-1] carry the appended 1.

Wide layers: forward passes run on blocks of points (at most POINT_BLOCK hidden values at a
time), and a one-hidden-layer history holds the inputs x, never the (n, m) hidden layer. In a
thinned record (``train.snapshot_neurons``) an intermediate epoch holds K of the m neurons:
they are measured, and the predictions use the residuals of the epochs recorded in full
(gradient@snapshot is left out there; the note says so).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
import torch

from ..records import Run
from ..training import augment
from ._leading import flow_for_optimizer
from ._orientations import Orientations, count_orientations
from ._replay import History, replay_neurons
from ._theory import Prediction, line_angles, predict_lines

POINT_BLOCK = 1 << 22  # hidden values per block of points in a forward pass (32 MiB in float64)


@dataclass(frozen=True)
class LayerReport:
    """Measured orientations of one layer at one epoch, with the predictions beside them."""

    layer: str
    epoch: int
    activation: str
    p: int | None
    orientations: Orientations
    predictions: dict[str, Prediction] = field(default_factory=dict)
    angles: dict[str, list[float]] = field(default_factory=dict)
    note: str = ""
    rows: np.ndarray | None = None   # rows of the layer measured (thinned epoch); None: all

    @property
    def within_bound(self) -> bool | None:
        """Lines <= p; None without a theory (p undefined) or with nothing condensed (0 lines)."""
        if self.p is None or self.orientations.n_lines == 0:
            return None
        return self.orientations.n_lines <= self.p

    @property
    def bound_status(self) -> str:
        """"within bound", "BOUND VIOLATED", "nothing condensed" (0 lines) or "no theory" (p undefined)."""
        if self.p is None:
            return "no theory"
        if self.orientations.n_lines == 0:
            return "nothing condensed"
        return "within bound" if self.within_bound else "BOUND VIOLATED"

    @property
    def best(self) -> str | None:
        """The prediction whose lines are nearest the measured ones (mean angle)."""
        scored = {k: float(np.mean(v)) for k, v in self.angles.items() if v}
        return min(scored, key=scored.get) if scored else None

    def to_dict(self) -> dict:
        o = self.orientations
        return {
            "layer": self.layer, "epoch": self.epoch, "activation": self.activation, "p": self.p,
            "bound": None if self.p is None else {"lines": self.p, "directions": 2 * self.p},
            "within_bound": self.within_bound, "bound_status": self.bound_status,
            "lines": o.n_lines, "directions": o.n_directions,
            "orientations": o.to_dict(),
            "predictions": {k: {**v.to_dict(), "angles_deg": self.angles.get(k, []),
                                "mean_angle_deg": _mean(self.angles.get(k, []))}
                            for k, v in self.predictions.items()},
            "best_prediction": self.best, "note": self.note,
            "measured_rows": None if self.rows is None else [int(i) for i in self.rows],
        }


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def forward_blocks(net, x: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Inputs (n, cols_k) of every hidden layer and outputs f (n, d_out) of an FCNet at x (n, d).

    Runs on blocks of points so that a layer of width m holds at most POINT_BLOCK values at once;
    the last hidden layer's output is never kept whole.
    """
    step = max(1, POINT_BLOCK // max(net.arch.width, 1))
    depth = net.arch.depth
    if depth == 1:
        return [augment(x)], _one_layer_outputs(net, x, step)
    kept: list[list[torch.Tensor]] = [[] for _ in range(depth)]
    outputs = []
    with torch.no_grad():
        for start in range(0, x.shape[0], step):
            hidden = net.hidden(x[start:start + step])
            for k in range(depth):
                kept[k].append(hidden[k])
            outputs.append(hidden[-1] @ net.layers[-1].T)
    return [torch.cat(k) for k in kept], torch.cat(outputs)


def _one_layer_outputs(net, x: torch.Tensor, step: int) -> torch.Tensor:
    """f (n, d_out) of a one-hidden-layer FCNet, block after block of points in reused buffers.

    Fresh (block, m) tensors per block leave the allocator's heap fragmented (measured: 2 GiB
    retained at m = 1e6); three buffers allocated once keep the peak at three blocks.
    """
    arch, (W, A) = net.arch, net.layers
    m = arch.width
    z, h, slope = (torch.empty(min(step, x.shape[0]), m, dtype=W.dtype) for _ in range(3))
    outputs = []
    with torch.no_grad():
        for start in range(0, x.shape[0], step):
            xa = augment(x[start:start + step].to(W.dtype))
            b = xa.shape[0]
            torch.matmul(xa, W.T, out=z[:b])
            arch.activations[0].value_and_grad(z[:b], h[:b], slope[:b])
            f = h[:b] @ A[:, :m].T
            outputs.append(f + A[:, m] if arch.output_bias else f)
    return torch.cat(outputs)


def run_history(run: Run, until: int) -> list[History]:
    """Per hidden layer: its inputs and the residuals at every fully recorded epoch <= until.

    One forward pass per snapshot serves every layer.
    """
    x, y = torch.as_tensor(run.x, dtype=torch.float64), torch.as_tensor(run.y, dtype=torch.float64)
    epochs = [int(e) for e in run.full_epochs if e <= until]
    inputs: list[list[np.ndarray]] = [[] for _ in range(run.config.model.depth)]
    residuals = []
    for epoch in epochs:
        hidden, f = forward_blocks(run.network(epoch), x)
        for k, layer_inputs in enumerate(inputs):
            layer_inputs.append(hidden[k].numpy())
        residuals.append((f - y).numpy())  # (n, d_out)
    return [History(np.array(epochs), np.stack(layer), np.stack(residuals)) for layer in inputs]


def layer_history(run: Run, layer: int, until: int) -> History:
    """Layer inputs and residuals at every recorded epoch <= until (from the snapshots)."""
    return run_history(run, until)[layer]


def analyze_layer(run: Run, layer: int, epoch: int, *, replay: bool = True, predict: bool = True,
                  count_kwargs: dict | None = None, seed: int = 0,
                  history: History | None = None) -> LayerReport:
    """Measure and predict the condensation of hidden layer `layer` (0-based) at `epoch`.

    `predict=False` only measures; `replay=False` skips the (slower) leading-order replay;
    `history` (from ``run_history``) saves recomputing the layer's inputs.
    """
    name = f"layer{layer + 1}"
    act = run.architecture.activations[layer]
    orientations = count_orientations(run.layer(name, epoch), **(count_kwargs or {}))
    full = run.is_full(epoch)
    report = LayerReport(name, epoch, act.name, act.multiplicity, orientations,
                         rows=None if full else run.rows(name, epoch))
    if not full:
        shown = ", ".join(str(int(e)) for e in run.full_epochs if e <= epoch)
        report = _with_note(report, f"thinned snapshot: {len(report.rows)} of {run.config.model.width} "
                            f"neurons measured; predictions use the residuals at epochs {shown}")
    frozen = eps_froze(run, layer, orientations)
    if frozen:
        report = _with_note(report, frozen)
    if act.multiplicity is None:
        return _with_note(report, f"multiplicity undefined ({act.note}): no leading-order theory")
    if not predict:
        return report
    depth = run.config.model.depth
    if layer < depth - 1:  # the layers above multiply the residual by a sample-dependent factor
        above = f"layer {depth}" if layer + 2 == depth else f"layers {layer + 2}-{depth}"
        report = _with_note(report, f"predictions for layer {layer + 1} of {depth} ignore the factor "
                            f"back-propagated through {above}: they treat the residual as this "
                            "layer's output signal (the two-layer theory on its inputs)")
    measured = np.array([c.mean for c in orientations.lines])
    history = history if history is not None else layer_history(run, layer, epoch)
    p, coef = act.multiplicity, act.leading_coefficient
    at = {"snapshot": -1, "init": 0}
    for key, flow, when in [("gradient@snapshot", "gradient", "snapshot"),
                            ("gradient@init", "gradient", "init"), ("sign@init", "sign", "init")]:
        if flow == "sign" and flow_for_optimizer(run.config.train.optimizer) != "sign":
            continue
        if when == "snapshot" and not full:
            continue  # the residual at a thinned epoch is unknown
        i = at[when]
        report.predictions[key] = predict_lines(history.inputs[i], history.residuals[i], p,
                                                flow=flow, coefficient=coef)
    if replay and epoch > 0:
        report.predictions["replay"] = replay_prediction(run, history, p, coef, epoch, seed)
    if "replay" in report.predictions and report.predictions["replay"].note:
        report = _with_note(report, report.predictions["replay"].note)
    for key, pred in report.predictions.items():
        if len(measured) and len(pred.lines):
            report.angles[key] = [float(a) for a in line_angles(measured, pred.lines)]
    return report


FROZEN_SHARE = 0.3  # negligible share of a layer's neurons from which Adam's eps is suspected


def first_gradient(run: Run, layer: int) -> np.ndarray:
    """dR/dW (m, cols) of hidden layer `layer` at epoch 0, R = 1/(2n) sum_i |f(x_i) - y_i|^2 (eq. 3)."""
    net = run.network(0)
    x, y = torch.as_tensor(run.x, dtype=torch.float64), torch.as_tensor(run.y, dtype=torch.float64)
    loss = (net(x) - y).square().sum() / (2 * len(x))
    (grad,) = torch.autograd.grad(loss, [net.layers[layer]])
    return grad.numpy()


def eps_froze(run: Run, layer: int, o: Orientations) -> str:
    """A note when Adam's eps froze the layer: >= FROZEN_SHARE of its neurons negligible and most
    of its first gradients below train.eps (Adam then takes momentum steps far below lr); else ""."""
    t = run.config.train
    rows = len(o.negligible) + len(o.scattered) + sum(len(c.members) for c in (*o.lines, *o.arcs))
    share = len(o.negligible) / rows if rows else 0.0
    if share < FROZEN_SHARE or flow_for_optimizer(t.optimizer) != "sign" or 0 not in run.full_epochs:
        return ""
    below = float(np.mean(np.abs(first_gradient(run, layer)) < t.eps))
    if below <= 0.5:
        return ""
    return (f"Adam's eps froze this layer: {share:.0%} of its neurons are negligible and {below:.0%} "
            f"of its first gradients are below train.eps = {t.eps:g}, so Adam took momentum steps far "
            "below lr; set train.eps smaller (e.g. 1e-20)")


def replay_prediction(run: Run, history: History, p: int, coef: float, epoch: int,
                      seed: int = 0) -> Prediction:
    """Lines reached by test neurons under the leading-order replay (grouped like neurons)."""
    t = run.config.train
    W = replay_neurons(history, p, coef, optimizer=t.optimizer, lr=run.spec.lr,
                       init_std=run.spec.init_std, until=epoch, betas=(t.beta1, t.beta2),
                       eps=t.eps, weight_decay=run.spec.weight_decay, momentum=run.spec.momentum,
                       nesterov=t.nesterov, seed=seed)
    flow = flow_for_optimizer(t.optimizer)
    if not np.all(np.isfinite(W)):
        # The leading-order model grows without bound for p >= 2 (w' ~ |w|^(p-1)): a finite
        # network saturates, the Taylor model does not. That is a result, not an error.
        return Prediction(np.zeros((0, W.shape[1])), f"replay-{t.optimizer}", flow, p, p, 2 * p,
                          note=f"replay diverged before epoch {epoch} (the leading-order model "
                               "blows up; no prediction)")
    found = count_orientations(W)
    lines = np.array([c.mean for c in found.lines]).reshape(-1, W.shape[1])
    return Prediction(lines, f"replay-{t.optimizer}", flow, p, p, 2 * p)


def _with_note(report: LayerReport, note: str) -> LayerReport:
    return dataclasses.replace(report, note="; ".join(n for n in (report.note, note) if n))
