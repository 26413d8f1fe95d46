"""The phase diagram of condensation for two-layer networks (Luo, Xu, Ma, Zhang, JMLR 2021).

    scales(gamma, gamma', m)      -> (alpha, beta1, beta2) of a grid point
    SCHEMES                       -> LeCun, He, Xavier, NTK, mean-field on the diagram
    train_to_convergence(...)     -> RD(theta_w), RD(theta_a), loss, steps of batched runs
    phase_diagram(spec, out=...)  -> the sweep (resumable, Ray), slope fits, regimes, claims, figures
"""

from ._diagram import DiagramSpec, PointFit, agreement, fit_points, preset_spec
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
from ._train import AUTHORS_X, AUTHORS_Y, PhaseBatch, PhaseRun, orientation_amplitude, train_to_convergence

__all__ = ["AUTHORS_X", "AUTHORS_Y", "BOUNDARY_MARGIN", "DiagramResult", "DiagramSpec", "PhaseBatch",
           "PhaseRun", "PointFit", "SCHEMES", "Scales", "Scheme", "agreement", "boundary_distance",
           "coordinates", "fit_points", "kernel_time", "orientation_amplitude", "phase_diagram",
           "phase_diagram_cli",
           "preset_spec", "rescaled_time", "scales", "theory_regime", "train_to_convergence"]
