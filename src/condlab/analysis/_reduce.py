"""Network reduction: merge each condensed group of a hidden layer into one neuron.

A condensed layer (NeurIPS 2022, Fig. 1: "a condensed wide network is a small network in
disguise") is reduced group by group. For hidden layer k with input weights W (m, q), bias
folded in, and the next layer's columns A_j (the output weights a_j of a two-layer net):

* groups are the condensed **lines** of ``count_orientations`` (default thresholds); a
  member's sign is s_j = sign(u_j · mean), its amplitude r_j = ‖w_j‖;
* the merged neuron has input weight ``r̄ · u`` and output weight
  ``Ā = Σ_j A_j (w_j·u / r̄)^p``  (p: the activation's multiplicity), which preserves the
  group's leading-order term ``σ^(p)(0)/p! · Σ_j A_j (w_j·x)^p`` projected on u (for
  members exactly on the line: Σ_j a_j s_j^p r_j^p is invariant). u is the top right
  singular vector of Σ_j A_j (s_j r_j)^(p−1) w_j^T (for p = 1, one output: Σ_j a_j w_j
  normalized, so the linear term is kept exactly despite the angular spread of a line),
  r̄ the contribution-weighted mean amplitude ``Σ c_j r_j / Σ c_j``, c_j = ‖A_j‖ r_j^p.
  The constant term σ(0) Σ_j A_j is kept by adding ``σ(0)(Σ_j A_j − Ā)`` to the next layer's bias;
* **exact** when the sign-aligned rows coincide (relative spread ≤ `exact_tol`) and either
  all signs agree or σ(−z) = (−1)^p σ(z) (tanh, xtanh, x2tanh): then r̄ = r_j and
  Ā = Σ_j A_j s_j^p, the same function;
* ``amplitude_tol=t`` first splits each line into amplitude bands (r_max ≤ (1 + t) r_min)
  and merges each band: more neurons, but merges that stay accurate once amplitudes have
  grown out of the small-weight regime (the leading-order merge assumes r_j σ-small);
* scattered neurons, and the members of arcs (spread along a great circle: no one direction to
  merge them into), are kept as they are. Negligible ones (below the amplitude cutoff), while
  in the small-weight regime, contribute only their leading term:
  ``negligible="merge"`` (default) merges them all into one neuron by the same rule (for
  p = 1 that keeps Σ_j a_j σ'(0) w_j·x exactly: a sum of linear terms is one linear term);
  ``"drop"`` removes them (their constant σ(0) A_j moved to the bias); ``"keep"`` keeps them.

Residual layers are refused (the skip connection fixes the width).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..training import FCNet
from ._orientations import count_orientations
from ._rank import model_rank

EXACT_TOL = 1e-9
NEGLIGIBLE = ("merge", "drop", "keep")
TEST_POINTS_1D, TEST_POINTS = 200, 1000


@dataclass
class Reduction:
    """A reduced network and how well it stands in for the original."""

    net: FCNet
    layer: int                               # 0-based hidden layer that was reduced
    width: int                               # original width of that layer
    reduced_width: int
    n_lines: int                             # condensed lines (each merged into one or more neurons)
    groups: list[list[int]]                  # members of each merged group (rows of W); lines first
    exact: list[bool]                        # per merged group
    kept: list[int]                          # scattered neurons kept unchanged
    dropped: list[int]                       # negligible neurons dropped
    errors: dict[str, float] = field(default_factory=dict)   # relative output errors, losses
    epoch: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"layer": f"layer{self.layer + 1}", "epoch": self.epoch, "width": self.width,
                "reduced_width": self.reduced_width, "n_lines": self.n_lines,
                "groups": self.groups, "exact": self.exact, "kept": self.kept,
                "dropped": self.dropped, **self.errors}


def _parity_matches(act: Any, p: int) -> bool:
    """Whether σ(−z) = (−1)^p σ(z) on a grid (merging opposite rows is then exact)."""
    z = torch.linspace(-5, 5, 101, dtype=torch.float64)
    return bool(torch.allclose(act.fn(-z), (-1) ** p * act.fn(z), atol=1e-12, rtol=1e-12))


def _merge_direction(rows: np.ndarray, cols: np.ndarray, r: np.ndarray, s: np.ndarray, p: int,
                     mean: np.ndarray) -> np.ndarray:
    """Unit direction of the merged row: top right singular vector of Σ_j A_j (s_j r_j)^(p-1) w_j^T.

    For p = 1 and one output this is Σ_j a_j w_j normalized, which makes the merged neuron's
    linear term Σ_j a_j w_j · x exact even when the members spread around the line.
    """
    M = cols @ (((s * r) ** (p - 1))[:, None] * rows)
    if not np.any(M):
        return mean
    direction = np.linalg.svd(M, full_matrices=False)[2][0]
    return direction if direction @ mean >= 0 else -direction


def _merge_group(W: np.ndarray, A: np.ndarray, members: np.ndarray, mean: np.ndarray, p: int,
                 parity: bool) -> tuple[np.ndarray, np.ndarray, bool]:
    """(merged row (q,), merged column (d_next,), exact?) of one group of a condensed line."""
    rows, cols = W[members], A[:, members]
    if not np.any(rows):  # silent neurons output sigma(0): the next bias takes it (the caller's shift)
        return np.zeros(W.shape[1]), np.zeros(A.shape[0]), True
    r = np.linalg.norm(rows, axis=1)
    s = np.sign(rows @ mean)
    c = np.linalg.norm(cols, axis=0) * r ** p
    r_bar = float((c * r).sum() / c.sum()) if c.sum() > 0 else float(r.mean())
    aligned = rows * s[:, None]
    spread = float(np.abs(aligned - aligned.mean(0)).max() / max(r.max(), 1e-300))
    exact = spread <= EXACT_TOL and (bool(np.all(s == s[0])) or parity)
    direction = _merge_direction(rows, cols, r, s, p, mean)
    # each member's leading term A_j (w_j·x)^p, projected on the merged direction: A_j (w_j·u)^p (u·x)^p
    col = (cols * ((rows @ direction) / r_bar) ** p).sum(axis=1)
    row = aligned.mean(0) if exact else r_bar * direction
    if exact:
        col = (cols * s ** p).sum(axis=1)
    return row, col, exact


def _unit(v: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    norm = np.linalg.norm(v)
    return v / norm if norm > 0 else fallback / max(np.linalg.norm(fallback), 1e-300)


def _bands(W: np.ndarray, members: np.ndarray, amplitude_tol: float | None) -> list[np.ndarray]:
    """Members of a line split into amplitude bands r_max <= (1 + amplitude_tol) r_min (None: one)."""
    if amplitude_tol is None:
        return [members]
    r = np.linalg.norm(W[members], axis=1)
    order = members[np.argsort(r, kind="stable")]
    bands, start = [[order[0]]], np.linalg.norm(W[order[0]])
    for i in order[1:]:
        if np.linalg.norm(W[i]) <= (1 + amplitude_tol) * start:
            bands[-1].append(i)
        else:
            bands.append([i])
            start = np.linalg.norm(W[i])
    return [np.array(b) for b in bands]


def reduce_layer(net: FCNet, layer: int = 0, *, count_kwargs: dict | None = None,
                 negligible: str = "merge", amplitude_tol: float | None = None) -> Reduction:
    """Merge the condensed lines of hidden layer `layer` (0-based) of `net`; see module docstring."""
    if amplitude_tol is not None and not 0 <= amplitude_tol < float("inf"):
        raise ValueError(f"amplitude_tol={amplitude_tol} is not accepted: it must be a finite number >= 0")
    arch = net.arch
    if not 0 <= layer < arch.depth:
        raise ValueError(f"layer {layer + 1} does not exist: this network has layers 1..{arch.depth}")
    if arch.skip(layer) or (layer + 1 < arch.depth and arch.skip(layer + 1)):
        raise ValueError("reduce: residual layers keep their width (skip connections); use arch=fc")
    weights = [w.detach().to(torch.float64).numpy().copy() for w in net.layers]
    W, nxt = weights[layer], weights[layer + 1]
    m = W.shape[0]
    act = arch.activations[layer]
    p = act.multiplicity or 1
    sigma0 = float(act.fn(torch.zeros(1, dtype=torch.float64))[0])
    has_bias = nxt.shape[1] == m + 1
    o = count_orientations(W, **(count_kwargs or {}))
    parity = _parity_matches(act, p)
    rows, cols, groups, exact, shift = [], [], [], [], np.zeros(nxt.shape[0])
    for line in o.lines:
        for band in _bands(W, line.members, amplitude_tol):
            row, col, ok = _merge_group(W, nxt, band, line.mean, p, parity)
            rows.append(row)
            cols.append(col)
            groups.append([int(i) for i in band])
            exact.append(ok)
            shift += sigma0 * (nxt[:, band].sum(1) - col)
    if negligible not in NEGLIGIBLE:
        raise ValueError(f"negligible='{negligible}' is not accepted: use one of {', '.join(NEGLIGIBLE)}")
    small = sorted(int(i) for i in o.negligible)
    if negligible == "merge" and small:
        members = np.array(small)
        row, col, _ = _merge_group(W, nxt, members, _unit(W[members].sum(0), W[members[0]]), p, parity)
        rows.append(row)
        cols.append(col)
        groups.append(small)
        exact.append(len(small) == 1)
        shift += sigma0 * (nxt[:, members].sum(1) - col)
    dropped = small if negligible == "drop" else []
    on_arcs = [int(i) for arc in o.arcs for i in arc.members]  # not one line: kept, never dropped
    kept = sorted([int(i) for i in o.scattered] + on_arcs + (small if negligible == "keep" else []))
    rows += [W[i] for i in kept]
    cols += [nxt[:, i] for i in kept]
    shift += sigma0 * nxt[:, dropped].sum(1) if dropped else 0.0
    new_W = np.stack(rows) if rows else np.zeros((0, W.shape[1]))
    new_next = np.stack(cols, axis=1) if cols else np.zeros((nxt.shape[0], 0))
    if has_bias:
        new_next = np.concatenate([new_next, (nxt[:, -1] + shift)[:, None]], axis=1)
    elif np.any(shift != 0):
        raise ValueError("reduce: sigma(0) != 0 and the next layer has no bias to absorb the constant")
    weights[layer], weights[layer + 1] = new_W, new_next
    new_arch = dataclasses.replace(arch, width=new_W.shape[0]) if arch.depth == 1 else arch
    reduced = FCNet(new_arch, [torch.as_tensor(w) for w in weights])
    return Reduction(reduced, layer, m, new_W.shape[0], o.n_lines, groups, exact, kept, dropped)


def _relative_error(a: torch.Tensor, b: torch.Tensor) -> float:
    scale = float(torch.linalg.norm(b))
    return float(torch.linalg.norm(a - b)) / scale if scale > 0 else float(torch.linalg.norm(a - b))


def _loss(net: FCNet, x: torch.Tensor, y: torch.Tensor) -> float:
    return float(((net(x) - y) ** 2).sum() / (2 * x.shape[0]))


def grid_inputs(run: Any, seed: int = 0) -> np.ndarray:
    """A test set spanning the run's training inputs: a grid (d = 1) or uniform points (d > 1)."""
    d = run.x.shape[1]
    if d == 1:
        return np.linspace(float(run.x.min()), float(run.x.max()), TEST_POINTS_1D)[:, None]
    low, high = run.x.min(0), run.x.max(0)
    return np.random.default_rng(seed).uniform(low, high, (TEST_POINTS, d))


def reduce(net_or_run: Any, *, epoch: int | None = None, layer: int = 0, x: Any = None, y: Any = None,
           x_test: Any = None, count_kwargs: dict | None = None, negligible: str = "merge",
           amplitude_tol: float | None = None, rank: bool = True) -> Reduction:
    """Reduce a network (FCNet or Run at `epoch`, default: the last snapshot of the initial stage).

    Reports, in ``Reduction.errors``: relative output error ‖f_red − f‖/‖f‖ on the training
    inputs (``train_error``) and on a test set (``test_error``), the loss of both networks,
    and (``rank=True``) the model rank of both on the training inputs.
    """
    from . import default_epoch

    if isinstance(net_or_run, FCNet):
        net = net_or_run
    else:
        epoch = default_epoch(net_or_run) if epoch is None else int(epoch)
        net = net_or_run.network(epoch)
        x = net_or_run.x if x is None else x
        y = net_or_run.y if y is None else y
        x_test = grid_inputs(net_or_run) if x_test is None else x_test
    # a float64 copy: the user's network is never cast in place
    net = FCNet(net.arch, [w.detach().to(torch.float64) for w in net.layers])
    result = reduce_layer(net, layer, count_kwargs=count_kwargs, negligible=negligible,
                          amplitude_tol=amplitude_tol)
    result.epoch = epoch
    with torch.no_grad():
        for key, inputs in (("train", x), ("test", x_test)):
            if inputs is None:
                continue
            xt = torch.as_tensor(np.asarray(inputs), dtype=torch.float64)
            result.errors[f"{key}_error"] = _relative_error(result.net(xt), net(xt))
        if x is not None and y is not None:
            xt, yt = (torch.as_tensor(np.asarray(v), dtype=torch.float64) for v in (x, y))
            result.errors["loss"] = _loss(net, xt, yt)
            result.errors["reduced_loss"] = _loss(result.net, xt, yt)
    if rank and x is not None:
        result.errors["rank"] = float(model_rank(net, x).rank)
        result.errors["reduced_rank"] = float(model_rank(result.net, x).rank)
    return result


def effective_rank(net_or_run: Any, x: Any = None, *, epoch: int | None = None, layer: int = 0,
                   count_kwargs: dict | None = None) -> dict[str, int]:
    """Effective rank from the condensation structure of a two-layer-like layer.

    ``structure`` = condensed lines × (q + d_next) (q: input-weight length, bias included;
    d_next: rows of the next layer), the talk's k(d+1) counting; ``reduced`` = the model rank
    of the reduced network (which also keeps the scattered neurons); ``raw`` = the model rank.
    """
    red = reduce(net_or_run, epoch=epoch, layer=layer, x=x, count_kwargs=count_kwargs, rank=False)
    if x is None:
        x = net_or_run.x
    original = net_or_run if isinstance(net_or_run, FCNet) else net_or_run.network(red.epoch)
    q, d_next = red.net.layers[layer].shape[1], red.net.layers[layer + 1].shape[0]
    return {"structure": red.n_lines * (q + d_next), "reduced": model_rank(red.net, x).rank,
            "raw": model_rank(original, x).rank, "lines": red.n_lines, "reduced_width": red.reduced_width}
