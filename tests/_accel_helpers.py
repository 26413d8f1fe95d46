"""Objects the fast-path tests (test_accel.py, test_accel_parity.py) look fast paths up with."""

import torch

from condlab.phase import TwoLayer, scales


def two_layer(activation: str = "relu") -> TwoLayer:
    """One two-layer phase-diagram run of width 20 at its initialization."""
    alpha = torch.ones(1, dtype=torch.float64)
    return TwoLayer.start(20, [scales(0.5, 0.5, 20)], [0], asi=True, alpha=alpha, c=1.0,
                          activation=activation)
