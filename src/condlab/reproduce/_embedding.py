"""The embedding principle in training (talk: "identification of critical points and functions").

A wide tanh network (hundreds of neurons) trained from small initialization by full-batch GD
on a 1-D target stalls on loss plateaus. The talk reads each plateau as a critical point of a
*narrower* network, embedded into the wide one (Zhang et al., NeurIPS 2021; J. Mach. Learn.
2022). condlab checks this: at each plateau it merges the condensed neurons (condlab.reduce,
negligible neurons merged into one) into a narrow network and measures its width, its loss
against the plateau's and its gradient norm against the gradients met on the way; then Newton
steps from the narrow network look for a nearby exact critical point of the narrow network.
"""

from __future__ import annotations

import numpy as np
import torch

from .. import preset
from .._embed import gradient_norm, newton_refine
from ..analysis import reduce
from ._claims import ExperimentResult
from ._context import Context

MODES = {"full": (200, 40000), "quick": (200, 6000), "smoke": (100, 4000)}   # width, epochs
INIT_STD, LR = 1e-4, 0.2
PLATEAU_CHANGE = 0.02      # loss falls by < 2 % from epoch t to 2t ...
PLATEAU_SPAN = 2.0         # ... for t over at least a factor 2 (the plateau spans [t0, 2 t1])
MAX_WIDTH_SHARE = 0.1      # the narrow network has at most 10 % of the neurons
LOSS_MATCH = 0.05          # |R_narrow - R_plateau| <= 5 % R_plateau
GRAD_SHARE = 0.05          # ||grad R_narrow|| <= 5 % of the largest ||grad R_wide|| along the run
CRITICAL_TOL = 1e-10       # Newton from the narrow network reaches ||grad R|| <= this


def plateaus(loss: np.ndarray, change: float = PLATEAU_CHANGE, span: float = PLATEAU_SPAN) -> list[int]:
    """Epochs in the middle (geometric) of each loss plateau.

    A plateau is a maximal interval [t0, t1] of epochs with R(2t) >= (1 - change) R(t) for every t in
    it and t1 >= span * t0 (epoch 0 excluded; the last epochs, whose 2t is not recorded, too).
    """
    last = (len(loss) - 1) // 2
    t = np.arange(1, last + 1)
    flat = loss[2 * t] >= (1 - change) * loss[t]
    found, start = [], None
    for i, ok in enumerate(np.append(flat, False)):
        if ok and start is None:
            start = t[i]
        elif not ok and start is not None:
            end = t[i - 1]
            if end >= span * start:
                found.append(int(round(np.sqrt(start * 2 * end))))
            start = None
    return found


def _snapshot_list(epochs: int) -> list[int]:
    log = np.unique(np.logspace(0, np.log10(epochs), 80).round().astype(int))
    return sorted(set(log.tolist()) | set(range(0, epochs + 1, max(1, epochs // 40))))


def embedding(ctx: Context) -> ExperimentResult:
    """Plateaus of a wide tanh network are embedded critical points of narrow ones."""
    from ..plotting import panel_row, plateau_plot
    res = ExperimentResult("embedding", "talk: embedding principle, identification of critical points",
                           ctx.seeds)
    mode = "smoke" if getattr(ctx, "smoke", False) else ("quick" if ctx.quick else "full")
    width, epochs = MODES[mode]
    seeds = ctx.seeds[:1] if mode == "smoke" else ctx.seeds
    res.seeds = seeds
    res.settings = {"mode": mode, "width": width, "epochs": epochs, "init_std": INIT_STD, "lr": LR,
                    "optimizer": "gd", "dtype": "float64", "data": "Fig. 5: n = 40, x ~ U[-1, 1.5], "
                    "sin(3x) + sin(6x)/2", "plateau": {"change": PLATEAU_CHANGE, "span": PLATEAU_SPAN},
                    "thresholds": {"max_width_share": MAX_WIDTH_SHARE, "loss_match": LOSS_MATCH,
                                   "grad_share": GRAD_SHARE, "critical_tol": CRITICAL_TOL}}
    res.choices += ["plateau: R(2t) >= 0.98 R(t) for t over a factor >= 2; the snapshot nearest the "
                    "plateau's geometric middle is reduced",
                    "reduction: condensed lines merged (condlab.reduce, default thresholds), negligible "
                    "neurons merged into one (leading order), scattered neurons kept",
                    "the talk's example uses 500 neurons; 200 (100 in the CI-sized run) here"]
    snaps = _snapshot_list(epochs)
    runs = ctx.train(preset("fig5"), "wide", f"train.seeds={seeds}", f"model.width={width}",
                     f"model.init_std={INIT_STD}", "train.optimizer=gd", f"train.lr={LR}",
                     f"train.epochs={epochs}", "train.dtype=float64", f"train.snapshots={snaps}")
    claims = {
        "narrow": res.claim("embedding/narrow", "at every plateau the condensed network merges into at "
                            f"most {MAX_WIDTH_SHARE:.0%} of its width",
                            max_width=int(MAX_WIDTH_SHARE * width)),
        "loss": res.claim("embedding/loss", f"the merged narrow network's loss is within {LOSS_MATCH:.0%} of "
                          "the plateau's", tolerance=LOSS_MATCH),
        "gradient": res.claim("embedding/gradient", f"the merged narrow network's gradient norm is at most "
                              f"{GRAD_SHARE:.0%} of the largest along the run", share=GRAD_SHARE),
        "critical": res.claim("embedding/critical", f"Newton steps from the narrow network reach a critical "
                              f"point (||grad R|| <= {CRITICAL_TOL:g}) whose loss is within {LOSS_MATCH:.0%} "
                              "of the plateau's", tol=CRITICAL_TOL, tolerance=LOSS_MATCH),
    }
    fig, axes = panel_row(min(len(runs), 3), 4.6, 3.6)
    for i, run in enumerate(runs):
        rows = _measure_run(run, claims)
        res.settings[f"plateaus/seed{run.spec.seed}"] = rows
        if i < len(axes):
            plateau_plot(run.loss[1:], [r["epoch"] for r in rows], [r["narrow_loss"] for r in rows],
                         [r["narrow_width"] for r in rows], ax=axes[i],
                         title=f"width {width}, seed {run.spec.seed}")
    ctx.save(res, fig, "embedding")
    return res


def _measure_run(run, claims: dict) -> list[dict]:
    """Reduce at every plateau of one run and record every claim; returns one row per plateau."""
    snapshots = run.epochs
    grads = [gradient_norm(run.network(int(e)), run.x, run.y) for e in snapshots]
    top = max(grads)
    rows = []
    for middle in plateaus(run.loss):
        epoch = int(snapshots[np.argmin(np.abs(np.log(np.maximum(snapshots, 1) / middle)))])
        red = reduce(run, epoch=epoch, negligible="merge", rank=False)
        plateau_loss = float(run.loss[epoch])
        narrow_loss = red.errors["reduced_loss"]
        narrow_grad = gradient_norm(red.net, run.x, run.y)
        # Newton only (no L-BFGS): a minimizer would slide off a saddle; Newton finds the nearby
        # critical point whatever its index
        refined, norms = newton_refine(red.net, run.x, run.y, steps=30, lbfgs_iters=0)
        with torch.no_grad():
            refined_loss = float(((refined(_t(run.x)) - _t(run.y)) ** 2).sum() / (2 * len(run.x)))
        row = {"epoch": epoch, "plateau_loss": plateau_loss, "narrow_width": red.reduced_width,
               "lines": red.n_lines, "narrow_loss": narrow_loss,
               "loss_gap": abs(narrow_loss - plateau_loss) / plateau_loss,
               "narrow_grad": narrow_grad, "wide_grad": grads[int(np.flatnonzero(snapshots == epoch)[0])],
               "max_wide_grad": top, "newton_grad": norms[-1], "newton_loss": refined_loss,
               "newton_gap": abs(refined_loss - plateau_loss) / plateau_loss}
        rows.append(row)
        claims["narrow"].record(row["narrow_width"] <= MAX_WIDTH_SHARE * red.width,
                                narrow_width=row["narrow_width"], lines=red.n_lines, epoch=epoch)
        claims["loss"].record(row["loss_gap"] <= LOSS_MATCH, loss_gap=round(row["loss_gap"], 5),
                              plateau_loss=plateau_loss, narrow_loss=narrow_loss, epoch=epoch)
        claims["gradient"].record(narrow_grad <= GRAD_SHARE * top, grad_share=round(narrow_grad / top, 6),
                                  wide_grad_share=row["wide_grad"] / top, epoch=epoch)
        claims["critical"].record(norms[-1] <= CRITICAL_TOL and row["newton_gap"] <= LOSS_MATCH,
                                  newton_grad=norms[-1], newton_gap=round(row["newton_gap"], 5), epoch=epoch)
    return rows


def _t(values) -> torch.Tensor:
    return torch.as_tensor(np.asarray(values), dtype=torch.float64)
