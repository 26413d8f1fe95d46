"""The phase diagram of condensation for two-layer networks (Luo, Xu, Ma, Zhang, JMLR 2021).

    scales(gamma, gamma', m)      -> (alpha, beta1, beta2) of a grid point
    SCHEMES                       -> LeCun, He, Xavier, NTK, mean-field on the diagram
    train_to_convergence(...)     -> RD(theta_w), RD(theta_a), loss, steps of batched runs
    phase_diagram(spec, out=...)  -> the sweep (resumable, Ray), slope fits, regimes, claims, figures
    scales3 / train3_to_convergence / phase_diagram3   -> the same for three layers (per-layer RD)
"""

from ._diagram import DiagramSpec, PointFit, agreement, fit_points, preset_spec
from ._diagram3 import DiagramSpec3, LayerFit, preset_spec3
from ._param import (
    BOUNDARY_MARGIN,
    SCHEMES,
    Scales,
    Scheme,
    boundary_distance,
    coordinates,
    kernel_time,
    rescaled_time,
    scales,
    theory_regime,
)
from ._report import DiagramResult, phase_diagram, phase_diagram_cli
from ._report3 import Diagram3Result, phase_diagram3
from ._three import SCHEMES3, Scales3, coordinates3, lazy_exponents, scales3
from ._train import AUTHORS_X, AUTHORS_Y, PhaseBatch, PhaseRun, orientation_amplitude, train_to_convergence
from ._train3 import Phase3Batch, Phase3Run, train3_to_convergence

__all__ = ["AUTHORS_X", "AUTHORS_Y", "BOUNDARY_MARGIN", "DiagramResult", "DiagramSpec", "PhaseBatch",
           "PhaseRun", "PointFit", "SCHEMES", "Scales", "Scheme", "agreement", "boundary_distance",
           "coordinates", "fit_points", "kernel_time", "orientation_amplitude", "phase_diagram",
           "phase_diagram_cli",
           "preset_spec", "rescaled_time", "scales", "theory_regime", "train_to_convergence",
           # three layers (NeurIPS 2022, empirical; docs/phase_diagram.md "Three layers")
           "Diagram3Result", "DiagramSpec3", "LayerFit", "Phase3Batch", "Phase3Run", "SCHEMES3", "Scales3",
           "coordinates3", "lazy_exponents", "phase_diagram3", "preset_spec3", "scales3",
           "train3_to_convergence"]
