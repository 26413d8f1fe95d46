"""Measure: how close do trained d_out = 2 GD networks condense to the top singular vector of G?

Pre-registered: data seeds 0-2 x init seeds 0-2, Fig. 3's network (d = 5, m = 50, tanh) with
two outputs (targets sin(2 x1 + 1) + x2 and cos(x3) - x4 / 2), GD at lr 0.05, lines counted at
`--epoch` (default 40) for init std `--init-std` (default 0.005). Prints, per pair, the angle
from the largest measured line or arc to the p = 1 prediction (top right singular vector of
G = EᵀX/n) with the residual at initialization, at epoch 10 and at the snapshot, the old
"summed residual" prediction (at initialization), the mean residual at epoch 10 and at the
snapshot over the mean residual at initialization (norm over outputs: how much of the targets'
mean the network, its output bias first, has absorbed), σ₂/σ₁ of G at initialization, and the
loss at the epoch over the loss at epoch 0 (above 0.7: inside the initial stage); then the
spread of each. Nothing here is asserted.

Usage: python benchmarks/multi_output_probe.py [--init-std 1e-6] [--epoch 40]
"""

import argparse

import numpy as np

import condlab
from condlab.analysis import count_orientations, line_angles
from condlab.analysis._report import run_history
from condlab.analysis._theory import p1_line

TARGETS = "[sin(2*x1 + 1) + x2, cos(x3) - x4/2]"


def _angle(lines: np.ndarray, predicted: np.ndarray) -> float | None:
    return round(float(line_angles(lines[:1], predicted[None])[0]), 1) if len(lines) else None


def main(init_std: float, epoch: int) -> None:
    rows = []
    print("data init lines arcs  init-G  e10-G  snap-G  init-sum s2/s1 loss/loss0 mean10/mean0 mean/mean0")
    for data_seed in range(3):
        cfg = condlab.preset("fig3").with_overrides([
            f"data.target={TARGETS}", "model.d_out=2", "train.optimizer=gd", "train.lr=0.05",
            f"model.init_std={init_std}", f"train.epochs={epoch}", "train.snapshots=every:10",
            f"data.seed={data_seed}", "train.seeds=[0,1,2]"])
        for run in condlab.train(cfg, progress=False):
            h = run_history(run, epoch)[0]
            X, E0, Et = h.inputs[0], h.residuals[0], h.residuals[-1]
            E10 = h.residuals[int(np.flatnonzero(h.epochs == 10)[0])]
            mean0 = np.linalg.norm(E0.mean(0))  # the residuals' mean over samples, per output
            left10, left = (round(float(np.linalg.norm(E.mean(0)) / mean0), 2) for E in (E10, Et))
            s = np.linalg.svd(E0.T @ X / len(X), compute_uv=False)
            o = count_orientations(run.layer("layer1", epoch))
            # lines and arcs, largest first: with sigma_2 competing, neurons can spread between
            # the two singular vectors (an arc) instead of sitting on one line
            found = sorted(o.lines + o.arcs, key=lambda c: -c.share)
            lines = np.array([c.mean for c in found]).reshape(-1, X.shape[1])
            row = (data_seed, run.spec.seed, o.n_lines, o.n_arcs, _angle(lines, p1_line(X, E0)),
                   _angle(lines, p1_line(X, E10)), _angle(lines, p1_line(h.inputs[-1], Et)),
                   _angle(lines, p1_line(X, E0.sum(1))), round(float(s[1] / s[0]), 3),
                   round(float(run.loss[epoch] / run.loss[0]), 3), left10, left)
            rows.append(row)
            print(*row)
    for i, name in [(4, "residual at initialization"), (5, "residual at epoch 10"),
                    (6, "residual at the snapshot"), (7, "summed residual at initialization"),
                    (9, "loss / loss at epoch 0"), (10, "mean residual at epoch 10 / at initialization"),
                    (11, "mean residual at the snapshot / at initialization")]:
        values = [r[i] for r in rows if r[i] is not None]
        if values:
            print(f"{name}: median {np.median(values):.3g}, range {min(values):.3g}-{max(values):.3g} "
                  f"over {len(values)} of {len(rows)} pairs")
        else:
            print(f"{name}: no condensed structure in any pair")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--init-std", type=float, default=0.005)
    parser.add_argument("--epoch", type=int, default=40)
    args = parser.parse_args()
    main(args.init_std, args.epoch)
