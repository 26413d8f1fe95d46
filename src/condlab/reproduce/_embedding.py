"""The embedding principle in training (talk: "identification of critical points and functions").

A wide tanh network trained from small initialization by full-batch GD on a 1-D target stalls
on loss plateaus. The talk reads each plateau as a critical point of a *narrower* network,
embedded into the wide one (Zhang et al., NeurIPS 2021; J. Mach. Learn. 2022). condlab checks
this: at each plateau it merges the condensed neurons (condlab.reduce, negligible neurons merged
into one) into a narrow network and compares its width and loss with the plateau's; Newton
steps from the narrow network then look for the nearby exact critical point of the narrow
network (``_embedding_points``).

On Fig. 5's target the only plateaus are trivial (issue 25): the best constant fit (hidden
layer silent) and the best linear fit (a critical point at infinity). So a degeneracy rule
(``_embedding_points.degenerate``) separates those from non-degenerate critical points, and the
target is a steep tanh plus a small fast wiggle, tanh(5x - 1) + 0.05 sin(12x): after the
trivial plateaus the network fits the tanh with finite weights and stalls while the wiggle
stays unfitted - the candidate for a non-degenerate plateau. Whether it is one, and whether it
is that critical point embedded, is what the claims judge.
"""

from __future__ import annotations

import numpy as np
import torch

from .. import preset
from ..analysis import reduce
from ._claims import ExperimentResult
from ._context import Context
from ._embedding_points import critical_point, degenerate, embedded

# --- Pre-registered: every setting and threshold below was set before the default runs judged
# the claims (seeds 0-4); the target, width and epochs were chosen on probe seed 100 (issue 25). ---
TARGET = "tanh(5*x-1)+0.05*sin(12*x)"
MODES = {"full": (200, 200_000), "quick": (50, 100_000), "smoke": (50, 100_000)}   # width, epochs
INIT_STD, LR = 1e-4, 0.2
PLATEAU_CHANGE = 0.02      # loss falls by < 2 % from epoch t to 2t ...
PLATEAU_SPAN = 2.0         # ... for t over at least a factor 2 (the plateau spans [t0, 2 t1])
MAX_WIDTH_SHARE = 0.1      # narrow: the merged network has at most 10 % of the neurons
LOSS_MATCH = 0.05          # |R_narrow - R_plateau| <= 5 % R_plateau (merged network and critical point)
OUTPUT_MATCH = 0.05        # ||f_critical - f_wide|| <= 5 % ||f_wide|| on the training inputs
CRITICAL_TOL = 1e-10       # Newton from the narrow network reaches ||grad R|| <= this
NEWTON_STEPS = 40
ACTIVE_SHARE = 0.01        # a neuron is active when |a| ||(w, b)|| >= 1 % of the largest
MIN_ACTIVE = 1             # non-degenerate: >= 1 active neuron (0 = the best constant fit) ...
MAX_NORM = 100.0           # ... at ||θ_c|| <= 100 (the linear fit's critical point is at infinity) ...
MIN_HESSIAN_RATIO = 1e-8   # ... with min/max |eig| of the active neurons' Hessian >= 1e-8
THRESHOLDS = {"max_width_share": MAX_WIDTH_SHARE, "loss_match": LOSS_MATCH, "output_match": OUTPUT_MATCH,
              "critical_tol": CRITICAL_TOL, "active_share": ACTIVE_SHARE, "min_active": MIN_ACTIVE,
              "max_norm": MAX_NORM, "min_hessian_ratio": MIN_HESSIAN_RATIO}
DEGENERACY = {"tol": CRITICAL_TOL, "min_active": MIN_ACTIVE, "max_norm": MAX_NORM,
              "min_ratio": MIN_HESSIAN_RATIO}


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


def mode_of(ctx: Context) -> str:
    return "smoke" if getattr(ctx, "smoke", False) else ("quick" if ctx.quick else "full")


def train_config(mode: str, seeds: list[int]):
    """The config `reproduce embedding` trains in `mode` (GD, float64: the diagnostic variants
    'gd' and 'float64' would change nothing)."""
    width, epochs = MODES[mode]
    return preset("fig5").with_overrides([
        f"data.target={TARGET}", f"train.seeds={seeds}", f"model.width={width}",
        f"model.init_std={INIT_STD}",
        "train.optimizer=gd", f"train.lr={LR}", f"train.epochs={epochs}", "train.dtype=float64",
        f"train.snapshots={_snapshot_list(epochs)}"])


def _claims(res: ExperimentResult, width: int) -> dict:
    return {
        "narrow": res.claim("embedding/narrow", "at every plateau the condensed network merges into at "
                            f"most {MAX_WIDTH_SHARE:.0%} of its width",
                            max_width=int(MAX_WIDTH_SHARE * width)),
        "loss": res.claim("embedding/loss", f"the merged narrow network's loss is within {LOSS_MATCH:.0%} of "
                          "the plateau's", tolerance=LOSS_MATCH),
        "nondegenerate": res.claim(
            "embedding/nondegenerate", "every run meets a non-degenerate plateau: Newton from the narrow "
            f"network reaches ||grad R|| <= {CRITICAL_TOL:g} at a point with >= {MIN_ACTIVE} active "
            f"neuron(s) (|a| ||w|| >= {ACTIVE_SHARE:.0%} of the largest), ||θ|| <= {MAX_NORM:g}, and "
            f"min/max |eig| of the active neurons' Hessian >= {MIN_HESSIAN_RATIO:g}", **DEGENERACY),
        "critical": res.claim(
            "embedding/critical", "at every non-degenerate plateau the critical point is the plateau, "
            f"embedded: its loss within {LOSS_MATCH:.0%} of the plateau's and its output within "
            f"{OUTPUT_MATCH:.0%} (relative L2) of the wide network's", loss_match=LOSS_MATCH,
            output_match=OUTPUT_MATCH),
    }


def embedding(ctx: Context) -> ExperimentResult:
    """Plateaus of a wide tanh network are embedded critical points of narrow ones."""
    from ..plotting import panel_row, plateau_plot
    res = ExperimentResult("embedding", "talk: embedding principle, identification of critical points",
                           ctx.seeds)
    mode = mode_of(ctx)
    width, epochs = MODES[mode]
    seeds = ctx.seeds[:1] if mode == "smoke" else ctx.seeds
    res.seeds = seeds
    res.settings = {"mode": mode, "width": width, "epochs": epochs, "init_std": INIT_STD, "lr": LR,
                    "optimizer": "gd", "dtype": "float64", "data": f"n = 40, x ~ U[-1, 1.5], {TARGET}",
                    "plateau": {"change": PLATEAU_CHANGE, "span": PLATEAU_SPAN}, "thresholds": THRESHOLDS}
    res.choices += ["plateau: R(2t) >= 0.98 R(t) for t over a factor >= 2; the snapshot nearest the "
                    "plateau's geometric middle is reduced",
                    "reduction: condensed lines merged (condlab.reduce, default thresholds), negligible "
                    "neurons merged into one (leading order), scattered neurons kept",
                    f"target {TARGET} instead of Fig. 5's (whose plateaus are all trivial), chosen with the "
                    "width and epochs on probe seed 100; the talk's example uses 500 neurons"]
    runs = ctx.train(train_config(mode, seeds), "wide")
    claims = _claims(res, width)
    fig, axes = panel_row(min(len(runs), 3), 4.6, 3.6)
    for i, run in enumerate(runs):
        rows = [_measure(run, middle) for middle in plateaus(run.loss)]
        record(claims, rows, run.spec.seed, width)
        res.settings[f"plateaus/seed{run.spec.seed}"] = rows
        if i < len(axes):
            plateau_plot(run.loss[1:], [r["epoch"] for r in rows], [r["narrow_loss"] for r in rows],
                         [r["narrow_width"] for r in rows], ax=axes[i],
                         title=f"width {width}, seed {run.spec.seed}")
    ctx.save(res, fig, "embedding")
    return res


def _measure(run, middle: int) -> dict:
    """Reduce at the snapshot nearest a plateau's middle; Newton to the narrow critical point; judge it."""
    snapshots = run.epochs
    epoch = int(snapshots[np.argmin(np.abs(np.log(np.maximum(snapshots, 1) / middle)))])
    red = reduce(run, epoch=epoch, negligible="merge", rank=False)
    plateau_loss = float(run.loss[epoch])
    point = critical_point(red.net, run.x, run.y, steps=NEWTON_STEPS, active_share=ACTIVE_SHARE)
    why = degenerate(point, **DEGENERACY)
    with torch.no_grad():
        wide = run.network(epoch)(torch.as_tensor(np.asarray(run.x), dtype=torch.float64)).numpy()[:, 0]
    not_embedded = "" if why else embedded(point, plateau_loss, wide, loss_match=LOSS_MATCH,
                                           output_match=OUTPUT_MATCH)
    output = point.pop("output")
    gap = float(np.linalg.norm(np.asarray(output) - wide) / np.linalg.norm(wide)) if output else None
    return {"epoch": epoch, "plateau_loss": plateau_loss, "narrow_width": red.reduced_width,
            "lines": red.n_lines, "narrow_loss": red.errors["reduced_loss"],
            "loss_gap": abs(red.errors["reduced_loss"] - plateau_loss) / plateau_loss, **point,
            "newton_gap": abs(point["newton_loss"] - plateau_loss) / plateau_loss, "output_gap": gap,
            "degenerate": why, "not_embedded": not_embedded}


def record(claims: dict, rows: list[dict], seed: int, width: int) -> None:
    """Record one run's plateau rows (from ``_measure``, or planted) on the four claims."""
    pair = (0, seed)
    for r in rows:
        claims["narrow"].record(r["narrow_width"] <= MAX_WIDTH_SHARE * width, pair=pair,
                                reason=f"{r['narrow_width']} neurons > {MAX_WIDTH_SHARE:.0%} of {width}",
                                narrow_width=r["narrow_width"], epoch=r["epoch"])
        claims["loss"].record(r["loss_gap"] <= LOSS_MATCH, pair=pair,
                              reason=f"merged loss {r['loss_gap']:.1%} off the plateau's",
                              loss_gap=round(r["loss_gap"], 5), epoch=r["epoch"])
    good = [r for r in rows if not r["degenerate"]]
    why = "; ".join(f"epoch {r['epoch']}: {r['degenerate']}" for r in rows) or "no plateau in the run"
    claims["nondegenerate"].record(bool(good), pair=pair, reason=why, nondegenerate=len(good),
                                   plateaus=len(rows))
    if not good:
        claims["critical"].record(None, pair=pair, reason="no non-degenerate plateau to judge",
                                  newton_gap=None)
    for r in good:
        claims["critical"].record(not r["not_embedded"], pair=pair, reason=r["not_embedded"],
                                  newton_gap=round(r["newton_gap"], 5), output_gap=r["output_gap"],
                                  epoch=r["epoch"])
