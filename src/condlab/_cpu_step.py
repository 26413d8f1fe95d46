"""The training step of a small one-hidden-layer network on CPU, as numpy calls on cached views.

``BatchedNet.loss_and_grad`` computes the loss and gradient of eq. (3) for R runs with the
architecture's forward and backward pass (``condlab._arch``): a few dozen torch operations per
step, each with microseconds of dispatch. For the networks most experiments train (one hidden
layer, Figs. 3-5 and the sweeps: R x 80 points x 50 neurons) that dispatch was a quarter of a
float32 step. This module makes the same computation as about fifteen numpy calls on numpy
views of the parameter, gradient and workspace buffers, made once per data set (the trainer
passes the same tensors every step): 130 -> ~40 us of fixed cost per step.

It applies to one hidden layer without a skip connection, on CPU in float32/float64, with or
without dropout (so a run with q = 0 trains bit for bit as in a batch without dropout), when
every per-run product is small enough for OpenBLAS to run on one thread
(``condlab._cpu.BLAS_SINGLE_MAX``); anything else keeps the architecture's pass. The math is
the architecture's (``Architecture.batched_forward``/``batched_backward``), so results agree
within rounding (tests/test_training.py holds both to torch.optim at 1e-9 in float64).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from . import _cpu

if TYPE_CHECKING:
    from ._dropout import Dropout
    from ._models import BatchedNet


class OneLayerStep:
    """loss_and_grad of a one-hidden-layer BatchedNet on fixed data, through numpy views."""

    def __init__(self, net: BatchedNet, x_aug: torch.Tensor, y: torch.Tensor, work: dict):
        arch = net.arch
        self.act, self.n, self.m = arch.activations[0], x_aug.shape[1], arch.width
        self.bias = arch.output_bias
        # the tensors keep their numpy views' memory alive; the data may be broadcast views
        self.tensors = (x_aug, y)
        self.z_t, self.h_t, self.s_t = work["z"][0], work["h"][0], work["slope"][0]
        view = _cpu.as_numpy
        self.x, self.y = view(x_aug), view(y)
        self.z, self.h, self.s, self.f = view(self.z_t), view(self.h_t), view(self.s_t), view(work["f"])
        self.w, self.a = view(net.weights[0]), view(net.weights[1])
        self.gw, self.ga = view(net.grads[0]), view(net.grads[1])
        self.xd = view(work["xd"])
        self.g = view(work["g"][0])
        self.fold = arch.d_out == 1 and self.n > x_aug.shape[2]   # as in Architecture.batched_backward

    @staticmethod
    def applies(net: BatchedNet, x_aug: torch.Tensor, y: torch.Tensor) -> bool:
        """Whether this step computes net.loss_and_grad(x_aug, y, dropout)."""
        arch = net.arch
        if arch.depth != 1 or arch.skip(0) or net.flat.device.type != "cpu":
            return False
        if any(_cpu.as_numpy(t) is None for t in (net.flat, net.grad, x_aug, y)):
            return False
        n, cols = x_aug.shape[1:]
        largest = max(n * arch.width * cols, n * arch.width * arch.d_out)
        return largest <= _cpu.BLAS_SINGLE_MAX and x_aug.dtype == y.dtype == net.flat.dtype

    def loss_and_grad(self, dropout: Dropout | None = None) -> torch.Tensor:
        """The loss per run (R,) (of the dropped-out network with `dropout`); writes dR/dtheta
        into the net's gradient buffer."""
        n, m = self.n, self.m
        with np.errstate(over="ignore", invalid="ignore"):   # a diverging run is caught by its loss
            _matmul(self.x, self.w.transpose(0, 2, 1), self.z)            # z = (x, 1) W^T
            self.act.value_and_grad(self.z_t, self.h_t, self.s_t)       # h = sigma(z), s = sigma'(z)
            if dropout is not None:
                dropout.apply(0, self.h_t, self.s_t)   # the mask scales sigma' too: backward unchanged
            np.matmul(self.h, self.a[:, :, :m].transpose(0, 2, 1), out=self.f)
            if self.bias:
                np.add(self.f, self.a[:, None, :, m], out=self.f)
            residual = np.subtract(self.f, self.y, out=self.f)
            loss = np.square(residual).sum(axis=(1, 2)) / (2 * n)
            delta = np.divide(residual, n, out=residual)                # dR/df (R, n, d_out)
            np.matmul(delta.transpose(0, 2, 1), self.h, out=self.ga[:, :, :m])
            if self.bias:
                np.sum(delta, axis=1, out=self.ga[:, :, m])
            a_bar = self.a[:, :, :m]
            if self.fold:   # dR/dW[j] = a_j sum_n s_nj (delta_n x_n)
                np.multiply(self.x, delta, out=self.xd)
                _matmul(self.s.transpose(0, 2, 1), self.xd, self.gw)
                np.multiply(self.gw, a_bar.transpose(0, 2, 1), out=self.gw)
            else:           # dR/dz = s * (delta a), then dR/dW = (dR/dz)^T (x, 1)
                np.matmul(delta, a_bar, out=self.g)
                np.multiply(self.s, self.g, out=self.g)
                _matmul(self.g.transpose(0, 2, 1), self.x, self.gw)
        return torch.from_numpy(loss)


def _matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """out <- a @ b, the runs split over torch's thread count when that pays (condlab._cpu)."""
    runs, i, k = a.shape
    threads = min(torch.get_num_threads(), runs, runs * i * k * b.shape[2] // _cpu.PARALLEL_MIN_FLOPS)
    if threads <= 1:
        np.matmul(a, b, out=out)
    else:
        _cpu._in_parallel([lambda part=part: np.matmul(a[part], b[part], out=out[part])
                          for part in _cpu._ranges(runs, threads)])
