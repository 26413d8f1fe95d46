"""Fig. 2 of Zhou et al. (NeurIPS 2022): a ResNet18-like network on CIFAR-10 whose FC layers condense.

The paper's network is "the convolution part of resnet18 and fully-connected (FC) layers with
size 1024-1024-10 and softmax"; conv part ReLU + Glorot normal; FC layers N(0, 1/m_out^3);
Adam, cross-entropy, batch 128, learning rates 1e-8 .. 5e-6. The paper leaves room for reading,
so here is what this module does (each choice is one place in the code):

* Conv part (`ConvFeatures`): the CIFAR variant of ResNet18 for 32x32 inputs: a 3x3 stride-1
  stem conv (no 7x7 conv, no max-pool), 4 stages of 2 BasicBlocks with `channels`
  (64, 128, 256, 512; stages 2-4 downsample by stride 2, with 1x1 conv + BN shortcuts),
  BatchNorm after every conv, ReLU, global average pooling -> F = channels[-1] = 512 features.
  Convs have no bias (BN follows each). Conv weights are Glorot (Xavier) normal, untruncated:
  std = sqrt(2 / (fan_in + fan_out)) with fan = channels * k * k (PyTorch's convention);
  BN at its defaults (weight 1, bias 0, running mean 0, var 1).
* FC head (`FCHead`): features F -> width -> width -> classes, i.e. "1024-1024-10" read as two
  hidden FC layers of width 1024 with the chosen activation, then a *linear* output layer of
  10 logits; the softmax lives in the cross-entropy loss. `width` is configurable.
* FC init N(0, 1/m_out^3) is read as VARIANCE 1/m_out^3, m_out = the layer's number of output
  units: std = m_out^-1.5 (fc1, fc2: 1024^-1.5 ~ 3.1e-5; output: 10^-1.5 ~ 0.032). Biases are
  drawn from the same distribution as their layer's weights (Sec. 4.1: "All parameters are
  initialized by a Gaussian distribution").
* Input weights follow condlab's convention: per FC layer a (m, fan_in + 1) float64 matrix with
  the bias folded in as the last column (`FCHead.input_weights`).
* Seeds: one integer seeds three independent streams (conv init, head init, batch shuffling)
  through numpy's SeedSequence, so `train_head` and `train_full` with the same seed start from
  the *same* head and see the *same* batches.
* Optimizer: torch.optim.Adam with its defaults (betas 0.9/0.999, eps 1e-8), batch 128
  (last partial batch kept), reshuffled every epoch.

The fast path (`train_head`): at Fig. 2's learning rates the conv part barely moves (Adam moves
a weight by at most ~lr per step: ~1e-4 after 30 CIFAR epochs, against conv weights ~4e-2; in
float32 an update of 1e-8 on a BN weight of 1.0 is lost altogether), while the FC weights start
at ~3e-5 and move by their own size. So the conv part is frozen at its init, the features are
computed once and only the head is trained. One subtlety: full training runs BN in train mode
(batch statistics), while a frozen conv part evaluated with BN's default running statistics
(mean 0, var 1) would not normalize at all. `calibrate_batchnorm` therefore sets the running
statistics to averages of batch statistics over the data first; then
`extract_features` (eval mode) gives what train-mode BN gives, up to batch-to-batch noise.
Recipe: `net = make_cifar_net(...)`; `calibrate_batchnorm(net.conv, x)`;
`f = extract_features(net.conv, x)`; `train_head(f, y, ...)`. `fast_path_gap` measures how far
this ends from full training (`train_full`) for the same seed.

Both training functions are deterministic on CPU for a fixed seed; on CUDA cuDNN may not be.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..activations import Activation, get_activation

DEFAULT_CHANNELS = (64, 128, 256, 512)
HEAD_LAYERS = ("fc1", "fc2", "output")
ArrayLike = np.ndarray | Tensor


def _streams(seed: int) -> dict[str, int]:
    """Independent seeds for conv init, head init and batch shuffling, derived from one seed."""
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    children = np.random.SeedSequence(int(seed)).spawn(3)
    return {
        name: int(c.generate_state(1)[0])
        for name, c in zip(("conv", "head", "shuffle"), children, strict=True)
    }


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# -----------------------------------------------------------------------------
# modules


class BasicBlock(nn.Module):
    """ResNet's two-conv residual block; a 1x1 conv + BN shortcut where the shape changes."""

    def __init__(self, c_in: int, c_out: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.shortcut = nn.Sequential()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(
                nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out)
            )

    def forward(self, x: Tensor) -> Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ConvFeatures(nn.Module):
    """ResNet18's conv part, CIFAR variant: (B, 3, 32, 32) -> (B, channels[-1])."""

    def __init__(self, channels: Sequence[int] = DEFAULT_CHANNELS, generator: torch.Generator | None = None):
        super().__init__()
        if len(channels) != 4 or any(int(c) < 1 for c in channels):
            raise ValueError(f"channels must be 4 positive ints, got {channels!r}")
        channels = tuple(int(c) for c in channels)
        with torch.random.fork_rng(devices=[]):  # PyTorch's default init must not touch the global RNG
            self.stem = nn.Sequential(
                nn.Conv2d(3, channels[0], 3, 1, 1, bias=False), nn.BatchNorm2d(channels[0])
            )
            blocks, c_in = [], channels[0]
            for i, c in enumerate(channels):
                stride = 1 if i == 0 else 2
                blocks += [BasicBlock(c_in, c, stride), BasicBlock(c, c, 1)]
                c_in = c
            self.blocks = nn.Sequential(*blocks)
        self.out_features = channels[-1]
        self.reset_parameters(generator)

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Glorot normal conv weights; BatchNorm at its defaults."""
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.xavier_normal_(m.weight, generator=generator)
            elif isinstance(m, nn.BatchNorm2d):
                m.reset_parameters()

    def forward(self, x: Tensor) -> Tensor:
        h = self.blocks(F.relu(self.stem(x)))
        return h.mean(dim=(2, 3))  # global average pooling


class FCHead(nn.Module):
    """F -> width -> width -> classes; the activation after fc1 and fc2, linear logits out."""

    def __init__(
        self,
        in_features: int,
        activation: str | Activation,
        width: int = 1024,
        classes: int = 10,
        generator: torch.Generator | None = None,
    ):
        super().__init__()
        self.activation = get_activation(activation)
        with torch.random.fork_rng(devices=[]):
            self.fc1 = nn.Linear(in_features, width)
            self.fc2 = nn.Linear(width, width)
            self.output = nn.Linear(width, classes)
        self.reset_parameters(generator)

    def layers(self) -> dict[str, nn.Linear]:
        return {name: getattr(self, name) for name in HEAD_LAYERS}

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Weights and biases ~ N(0, 1/m_out^3): std = m_out^-1.5, m_out = the layer's outputs."""
        for layer in self.layers().values():
            std = layer.out_features**-1.5
            nn.init.normal_(layer.weight, 0.0, std, generator=generator)
            nn.init.normal_(layer.bias, 0.0, std, generator=generator)

    def forward(self, x: Tensor) -> Tensor:
        sigma = self.activation.fn
        return self.output(sigma(self.fc2(sigma(self.fc1(x)))))

    def input_weights(self) -> dict[str, np.ndarray]:
        """{name: (m, fan_in + 1) float64}, the bias folded in as the last column."""
        return {
            name: torch.cat([lin.weight, lin.bias[:, None]], 1).detach().cpu().double().numpy()
            for name, lin in self.layers().items()
        }


class CifarNet(nn.Module):
    """ConvFeatures followed by FCHead: (B, 3, 32, 32) -> (B, classes) logits."""

    def __init__(self, conv: ConvFeatures, head: FCHead):
        super().__init__()
        self.conv, self.head = conv, head

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.conv(x))


def _make_head(in_features: int, activation: str | Activation, width: int, classes: int, seed: int) -> FCHead:
    return FCHead(in_features, activation, width, classes, _generator(_streams(seed)["head"]))


def make_cifar_net(
    activation: str | Activation,
    *,
    width: int = 1024,
    classes: int = 10,
    seed: int = 0,
    channels: Sequence[int] = DEFAULT_CHANNELS,
) -> CifarNet:
    """The Fig. 2 network with a deterministic init for `seed` (global RNG untouched)."""
    conv = ConvFeatures(channels, _generator(_streams(seed)["conv"]))
    return CifarNet(conv, _make_head(conv.out_features, activation, width, classes, seed))


# -----------------------------------------------------------------------------
# features of the frozen conv part


def _as_tensor(a: ArrayLike, dtype: torch.dtype) -> Tensor:
    return (a if isinstance(a, Tensor) else torch.from_numpy(np.asarray(a))).to(dtype)


@torch.no_grad()
def calibrate_batchnorm(conv: nn.Module, x: ArrayLike, *, batch: int = 128, device: str = "cpu") -> None:
    """Set every BN's running statistics to the average of its batch statistics over x (in place)."""
    x = _as_tensor(x, torch.float32)
    bns = [m for m in conv.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    momenta, was_training = [bn.momentum for bn in bns], conv.training
    conv.to(device).train()
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None  # cumulative average over the batches seen
    for start in range(0, len(x), batch):
        conv(x[start : start + batch].to(device))
    for bn, momentum in zip(bns, momenta, strict=True):
        bn.momentum = momentum
    conv.train(was_training)


@torch.no_grad()
def extract_features(conv: nn.Module, x: ArrayLike, *, batch: int = 256, device: str = "cpu") -> np.ndarray:
    """conv's eval-mode output on x, in batches: (n, F) float32. Moves conv to `device`."""
    x = _as_tensor(x, torch.float32)
    was_training = conv.training
    conv.to(device).eval()
    out = [conv(x[start : start + batch].to(device)).cpu() for start in range(0, len(x), batch)]
    conv.train(was_training)
    return torch.cat(out).numpy() if out else np.zeros((0, conv.out_features), np.float32)


# -----------------------------------------------------------------------------
# training


@dataclass
class HeadHistory:
    """Head input weights at snapshot epochs and per-epoch training statistics."""

    epochs: np.ndarray  # (S,) snapshot epochs, 0 = init
    weights: dict[str, np.ndarray]  # fc1/fc2/output -> (S, rows, cols) float64, bias last column
    loss: np.ndarray  # (E,) mean training cross-entropy over epoch 1..E's batches
    accuracy: np.ndarray  # (E,) training accuracy over the same batches


def _snapshot_list(snapshot_epochs: Iterable[int] | None, epochs: int) -> list[int]:
    """Sorted unique snapshot epochs, always with 0; None -> [0, epochs]."""
    wanted = {0, epochs} if snapshot_epochs is None else {0, *(int(e) for e in snapshot_epochs)}
    bad = [e for e in wanted if not 0 <= e <= epochs]
    if bad:
        raise ValueError(f"snapshot epochs must lie in [0, {epochs}], got {sorted(bad)}")
    return sorted(wanted)


def _check_args(x: Tensor, y: Tensor, lr: float, epochs: int, batch: int, classes: int) -> None:
    if len(x) != len(y) or y.ndim != 1:
        raise ValueError(f"need one label per sample: inputs {tuple(x.shape)}, labels {tuple(y.shape)}")
    if len(y) and not 0 <= int(y.min()) <= int(y.max()) < classes:
        raise ValueError(f"labels must lie in [0, {classes})")
    if not (lr > 0 and math.isfinite(lr)) or epochs < 0 or batch < 1:
        raise ValueError(f"need lr > 0, epochs >= 0, batch >= 1; got {lr}, {epochs}, {batch}")


def _epoch(
    model: nn.Module, opt: torch.optim.Optimizer, x: Tensor, y: Tensor, batch: int, gen: torch.Generator
) -> tuple[float, float]:
    """One shuffled pass of Adam steps; returns (mean loss, accuracy) over the pass."""
    model.train()
    perm = torch.randperm(len(x), generator=gen).to(x.device)
    total, correct = torch.zeros((), device=x.device), torch.zeros((), device=x.device)
    for start in range(0, len(x), batch):
        idx = perm[start : start + batch]
        logits = model(x[idx])
        loss = F.cross_entropy(logits, y[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        total += loss.detach() * len(idx)
        correct += (logits.argmax(1) == y[idx]).sum()
    return total.item() / len(x), correct.item() / len(x)


def _fit(model: nn.Module, head: FCHead, x: Tensor, y: Tensor, *, lr: float, epochs: int, batch: int,
         seed: int, snapshot_epochs: Iterable[int] | None, progress) -> HeadHistory:
    """Adam + cross-entropy on (x, y) already on the model's device, recording head snapshots."""
    snaps = _snapshot_list(snapshot_epochs, epochs)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    gen = _generator(_streams(seed)["shuffle"])
    record: dict[str, list[np.ndarray]] = {name: [] for name in HEAD_LAYERS}
    loss, accuracy = np.full(epochs, np.nan), np.full(epochs, np.nan)
    for epoch in range(epochs + 1):
        if epoch > 0:
            loss[epoch - 1], accuracy[epoch - 1] = _epoch(model, opt, x, y, batch, gen)
            if progress is not None:
                progress.update(1)
        if epoch in snaps:
            for name, w in head.input_weights().items():
                record[name].append(w)
    weights = {name: np.stack(ws) for name, ws in record.items()}
    return HeadHistory(np.array(snaps), weights, loss, accuracy)


def train_head(features: ArrayLike, labels: ArrayLike, activation: str | Activation, *, lr: float,
               epochs: int, batch: int = 128, width: int = 1024, seed: int = 0, classes: int = 10,
               snapshot_epochs: Iterable[int] | None = None, device: str = "cpu",
               progress=None) -> HeadHistory:
    """The fast path: train only the FC head on fixed conv features (n, F).

    The head starts exactly as `make_cifar_net(..., seed=seed).head` and the batches are those
    of `train_full` with the same seed. `progress`: anything with .update(1) (tqdm), per epoch.
    """
    x, y = _as_tensor(features, torch.float32), _as_tensor(labels, torch.long)
    if x.ndim != 2:
        raise ValueError(f"features must be (n, F), got {tuple(x.shape)}")
    _check_args(x, y, lr, epochs, batch, classes)
    head = _make_head(x.shape[1], activation, width, classes, seed).to(device)
    return _fit(head, head, x.to(device), y.to(device), lr=lr, epochs=epochs, batch=batch, seed=seed,
                snapshot_epochs=snapshot_epochs, progress=progress)


def _train_net(net: CifarNet, x: ArrayLike, labels: ArrayLike, *, lr: float, epochs: int, batch: int,
               seed: int, snapshot_epochs: Iterable[int] | None, device: str, progress) -> HeadHistory:
    x, y = _as_tensor(x, torch.float32), _as_tensor(labels, torch.long)
    if x.ndim != 4 or x.shape[1] != 3:
        raise ValueError(f"images must be (n, 3, H, W), got {tuple(x.shape)}")
    _check_args(x, y, lr, epochs, batch, net.head.output.out_features)
    net.to(device)
    return _fit(net, net.head, x.to(device), y.to(device), lr=lr, epochs=epochs, batch=batch, seed=seed,
                snapshot_epochs=snapshot_epochs, progress=progress)


def train_full(x: ArrayLike, labels: ArrayLike, activation: str | Activation, *, lr: float, epochs: int,
               batch: int = 128, width: int = 1024, seed: int = 0, classes: int = 10,
               channels: Sequence[int] = DEFAULT_CHANNELS, snapshot_epochs: Iterable[int] | None = None,
               device: str = "cpu", progress=None) -> HeadHistory:
    """Train the whole CifarNet (conv part in BN train mode + head); snapshots of the head."""
    net = make_cifar_net(activation, width=width, classes=classes, seed=seed, channels=channels)
    return _train_net(net, x, labels, lr=lr, epochs=epochs, batch=batch, seed=seed,
                      snapshot_epochs=snapshot_epochs, device=device, progress=progress)


# -----------------------------------------------------------------------------
# how far the fast path ends from full training


def _unit_rows(w: np.ndarray) -> np.ndarray:
    return w / np.maximum(np.linalg.norm(w, axis=1, keepdims=True), 1e-300)


def _conv_weights(net: CifarNet) -> Tensor:
    convs = [m.weight.detach().flatten() for m in net.conv.modules() if isinstance(m, nn.Conv2d)]
    return torch.cat(convs).double().cpu()


def fast_path_gap(x: ArrayLike, labels: ArrayLike, activation: str | Activation, *, lr: float, epochs: int,
                  n_subset: int, width: int, seed: int = 0, device: str = "cpu", batch: int = 128,
                  classes: int = 10, channels: Sequence[int] = DEFAULT_CHANNELS) -> dict[str, float]:
    """Train one seed both ways on the first n_subset samples; compare where fc1 ends.

    Keys: conv_weight_relative_change (‖ΔW_conv‖/‖W_conv‖ under full training),
    fc1_cosine_max_abs_diff (max |cos_fast - cos_full| over fc1 neuron pairs),
    fc1_row_angle_max_deg / _mean_deg (angle between corresponding fc1 rows),
    fc1_relative_difference (‖W_fast - W_full‖/‖W_full‖), fc1_relative_movement
    (‖W_full - W_init‖/‖W_init‖, the scale the gap should be small against), final losses.
    """
    if epochs < 1 or n_subset < 1:
        raise ValueError("need epochs >= 1 and n_subset >= 1")
    xs, ys = x[:n_subset], labels[:n_subset]
    net = make_cifar_net(activation, width=width, classes=classes, seed=seed, channels=channels)
    conv0, frozen = _conv_weights(net), copy.deepcopy(net.conv)
    calibrate_batchnorm(frozen, xs, batch=batch, device=device)
    feats = extract_features(frozen, xs, device=device)
    common = dict(lr=lr, epochs=epochs, batch=batch, seed=seed, snapshot_epochs=None)
    fast = train_head(feats, ys, activation, width=width, classes=classes, device=device, **common)
    full = _train_net(net, xs, ys, device=device, progress=None, **common)
    w0, wf, wn = full.weights["fc1"][0], fast.weights["fc1"][-1], full.weights["fc1"][-1]
    uf, un = _unit_rows(wf), _unit_rows(wn)
    angles = np.degrees(np.arccos(np.clip(np.sum(uf * un, axis=1), -1.0, 1.0)))
    conv_change = torch.linalg.norm(_conv_weights(net) - conv0) / torch.linalg.norm(conv0)
    return {
        "conv_weight_relative_change": float(conv_change),
        "fc1_cosine_max_abs_diff": float(np.max(np.abs(uf @ uf.T - un @ un.T))),
        "fc1_row_angle_max_deg": float(angles.max()),
        "fc1_row_angle_mean_deg": float(angles.mean()),
        "fc1_relative_difference": float(np.linalg.norm(wf - wn) / np.linalg.norm(wn)),
        "fc1_relative_movement": float(np.linalg.norm(wn - w0) / np.linalg.norm(w0)),
        "final_loss_fast": float(fast.loss[-1]),
        "final_loss_full": float(full.loss[-1]),
    }
