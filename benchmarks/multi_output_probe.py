"""Measure: how close do trained d_out = 2 GD networks condense to the top singular vector of G?

Pre-registered: data seeds 0-2 x init seeds 0-2, Fig. 3's network (d = 5, m = 50, tanh,
init std 0.005) with two outputs (targets sin(2 x1 + 1) + x2 and cos(x3) - x4 / 2), GD at
lr 0.05, lines counted at epoch 40. Prints, per pair, the angle from each measured line or
arc (largest first) to the p = 1 prediction with the residual at initialization (top right
singular vector of G = EᵀX/n), the angle to the old "summed residual" prediction, and σ₂/σ₁ of G; then the
spread. Nothing here is asserted: the residual moves during training and the second singular
value competes, so the leading-order theory is only approximate here (issue 8).

Usage: python benchmarks/multi_output_probe.py
"""

import numpy as np

import condlab
from condlab.analysis import count_orientations, line_angles
from condlab.analysis._report import run_history
from condlab.analysis._theory import p1_line

TARGETS = "[sin(2*x1 + 1) + x2, cos(x3) - x4/2]"


def main() -> None:
    rows = []
    for data_seed in range(3):
        cfg = condlab.preset("fig3").with_overrides([
            f"data.target={TARGETS}", "model.d_out=2", "train.optimizer=gd", "train.lr=0.05",
            "train.epochs=40", "train.snapshots=every:10", f"data.seed={data_seed}", "train.seeds=[0,1,2]"])
        for run in condlab.train(cfg, progress=False):
            h = run_history(run, 40)[0]
            X, E = h.inputs[0], h.residuals[0]
            s = np.linalg.svd(E.T @ X / len(X), compute_uv=False)
            o = count_orientations(run.layer("layer1", 40))
            # lines and arcs, largest first: with sigma_2 competing, neurons can spread between
            # the two singular vectors (an arc) instead of sitting on one line
            found = sorted(o.lines + o.arcs, key=lambda c: -c.share)
            lines = np.array([c.mean for c in found]).reshape(-1, X.shape[1])
            new = line_angles(lines, p1_line(X, E)[None]) if len(lines) else []
            old = line_angles(lines, p1_line(X, E.sum(1))[None]) if len(lines) else []
            rows.append((data_seed, run.spec.seed, o.n_lines, o.n_arcs, [round(float(a), 1) for a in new],
                         [round(float(a), 1) for a in old], round(float(s[1] / s[0]), 3)))
            print(*rows[-1])
    first = [r[4][0] for r in rows if r[4]]
    if not first:
        print("no condensed structure in any pair")
        return
    print(f"angle of the largest line or arc to the singular-vector prediction over {len(first)} pairs: "
          f"median {np.median(first):.1f} deg, range {min(first):.1f}-{max(first):.1f} deg")


if __name__ == "__main__":
    main()
