"""Measure: where do Fig. 6's xtanh lines sit, if not on the stable lines of the epoch-200 field?

Pre-registered: the fig5-xtanh preset (Fig. 5/6 settings, p = 2), data seeds 0-2 x init seeds
0-2, 200 epochs, lines counted at epoch 200. Prints, per pair and measured line, its angle to
the nearest stable line of the field with the residual at epoch 200 (what `reproduce fig6`
holds the neurons to), and to the nearest root of the Case-2 polynomial with the residual at
initialization (every fixed line of the initial-residual field, attracting or not); then the
range of both over the lines that are more than 10° from the epoch-200 field. Nothing here
is asserted.

Usage: python benchmarks/fig6_xtanh_probe.py
"""

import numpy as np

import condlab
from condlab.analysis import count_orientations, line_angles
from condlab.analysis._fields import stable_lines_2d
from condlab.analysis._leading import effective_residual
from condlab.analysis._report import run_history
from condlab.analysis._theory import roots_1d

EPOCH = 200


def main() -> None:
    off_snapshot, off_init = [], []
    print("data init line  deg-to-epoch200-stable  deg-to-initial-root")
    for data_seed in range(3):
        cfg = condlab.preset("fig5-xtanh").with_overrides([
            f"train.epochs={EPOCH}", "train.snapshots=every:10", f"data.seed={data_seed}",
            "train.seeds=[0,1,2]"])
        for run in condlab.train(cfg, progress=False):
            act = run.architecture.activations[0]
            h = run_history(run, EPOCH)[0]
            X = h.inputs[-1]
            W = run.layer("layer1", EPOCH)
            lim = 1.2 * float(np.abs(W).max())
            stable = stable_lines_2d(X, effective_residual(X, h.residuals[-1]), act.grad,
                                     radius=1e-3 * lim, output_sign=None)
            roots = roots_1d(h.inputs[0], h.residuals[0], act.multiplicity)
            lines = np.array([c.mean for c in count_orientations(W).lines]).reshape(-1, 2)
            for i, line in enumerate(lines):
                a = float(line_angles(line[None], stable)[0]) if len(stable) else float("nan")
                b = float(line_angles(line[None], roots)[0]) if len(roots) else float("nan")
                print(data_seed, run.spec.seed, i, round(a, 1), round(b, 1))
                if a > 10:
                    off_snapshot.append(a)
                    off_init.append(b)
    if off_snapshot:
        print(f"{len(off_snapshot)} line(s) more than 10 deg from the epoch-{EPOCH} field's stable lines: "
              f"{min(off_snapshot):.1f}-{max(off_snapshot):.1f} deg from them, "
              f"{np.nanmin(off_init):.1f}-{np.nanmax(off_init):.1f} deg from a root of the "
              "initial-residual field")
    else:
        print(f"every line within 10 deg of the epoch-{EPOCH} field's stable lines")


if __name__ == "__main__":
    main()
