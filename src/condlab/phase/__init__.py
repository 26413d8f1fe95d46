"""The phase diagram of condensation for two-layer networks (Luo, Xu, Ma, Zhang, JMLR 2021).

    scales(gamma, gamma', m)      -> (alpha, beta1, beta2) of a grid point
    SCHEMES                       -> LeCun, He, Xavier, NTK, mean-field on the diagram
    train_to_convergence(...)     -> RD(theta_w), RD(theta_a), loss, steps of batched runs
"""

from ._param import (
    BOUNDARY_MARGIN,
    SCHEMES,
    Scales,
    Scheme,
    boundary_distance,
    coordinates,
    rescaled_time,
    scales,
    theory_regime,
)
from ._train import AUTHORS_X, AUTHORS_Y, PhaseBatch, PhaseRun, orientation_amplitude, train_to_convergence

__all__ = ["AUTHORS_X", "AUTHORS_Y", "BOUNDARY_MARGIN", "PhaseBatch", "PhaseRun", "SCHEMES", "Scales",
           "Scheme", "boundary_distance", "coordinates", "orientation_amplitude", "rescaled_time",
           "scales", "theory_regime", "train_to_convergence"]
