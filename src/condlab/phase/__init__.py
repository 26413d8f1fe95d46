"""The phase diagram of condensation: two layers (Luo, Xu, Ma, Zhang, JMLR 2021) and three layers
(after Zhou et al., NeurIPS 2022; empirical), one implementation parameterized by depth (_depth.py).

    scales(gamma, gamma', m)      -> (alpha, beta1, beta2) of a grid point
    SCHEMES                       -> LeCun, He, Xavier, NTK, mean-field on the diagram
    train_to_convergence(...)     -> RD(theta_w), RD(theta_a), loss, steps of batched runs
    phase_diagram(spec, out=...)  -> the sweep (resumable, Ray), slope fits, regimes, claims, figures
    scales3 / train3_to_convergence / DiagramSpec3 -> the same for three layers (per-layer RD);
                                     phase_diagram(DiagramSpec3(...)) runs a three-layer diagram
"""

from .._lazy import exports

# name -> the private module that defines it; imported on first use (no import cost, no cycles)
_EXPORTS = {
    "AUTHORS_X": "._train",
    "AUTHORS_Y": "._train",
    "BOUNDARY_MARGIN": "._param",
    "Diagram3Result": "._report",
    "DiagramResult": "._report",
    "DiagramSpec": "._diagram",
    "DiagramSpec3": "._diagram",
    "LayerFit": "._regimes",
    "Phase3Batch": "._runs",
    "Phase3Run": "._runs",
    "PhaseBatch": "._runs",
    "PhaseRun": "._runs",
    "PointFit": "._regimes",
    "SCHEMES": "._param",
    "SCHEMES3": "._param",
    "TwoLayer": "._net2",
    "Scales": "._param",
    "Scales3": "._param",
    "Scheme": "._param",
    "agreement": "._regimes",
    "boundary_distance": "._param",
    "coordinates": "._param",
    "coordinates3": "._param",
    "fit_points": "._regimes",
    "kernel_time": "._param",
    "lazy_exponents": "._param",
    "orientation_amplitude": "._net2",
    "phase_diagram": "._report",
    "phase_diagram3": "._report",
    "phase_diagram_cli": "._report",
    "phase_diagram_command": "._precount",
    "preset_spec": "._diagram",
    "preset_spec3": "._diagram",
    "rescaled_time": "._param",
    "scales": "._param",
    "scales3": "._param",
    "theory_regime": "._param",
    "train3_to_convergence": "._train",
    "train_to_convergence": "._train",
}

__all__ = ["AUTHORS_X", "AUTHORS_Y", "BOUNDARY_MARGIN", "DiagramResult", "DiagramSpec", "PhaseBatch",
           "PhaseRun", "PointFit", "SCHEMES", "Scales", "Scheme", "agreement", "boundary_distance",
           "coordinates", "fit_points", "kernel_time", "orientation_amplitude", "phase_diagram",
           "phase_diagram_cli",
           "preset_spec", "rescaled_time", "scales", "theory_regime", "train_to_convergence",
           # three layers (NeurIPS 2022, empirical; docs/phase_diagram.md "Three layers")
           "Diagram3Result", "DiagramSpec3", "LayerFit", "Phase3Batch", "Phase3Run", "SCHEMES3", "Scales3",
           "coordinates3", "lazy_exponents", "phase_diagram3", "preset_spec3", "scales3",
           "train3_to_convergence"]

__getattr__, __dir__ = exports(__name__, _EXPORTS)
