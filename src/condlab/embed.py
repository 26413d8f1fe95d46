"""The embedding principle (public API): one-step splitting embedding and critical points.

    split(net, neuron, alpha, layer=0) -> FCNet   wider network, same output, same criticality
    newton_refine(net, x, y)           -> (FCNet, gradient norms)   a critical point to round-off
    gradient_norm(net, x, y)           -> float   ‖∇R_S(θ)‖ in float64

See ``condlab._embed`` for the statement and why it holds.
"""

from ._embed import flat_params, gradient_norm, loss_fn, newton_refine, split, with_params

__all__ = ["flat_params", "gradient_norm", "loss_fn", "newton_refine", "split", "with_params"]
