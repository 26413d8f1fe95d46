"""Weight snapshots: taken during training in the training dtype, thinned for wide layers.

``SnapshotRecorder`` copies each snapshot straight into one preallocated numpy array per layer,
laid out (R, S, rows, cols) so that each run's snapshots are one contiguous block (written to
disk with a single write, no copy); the trainer feeds it the copies it took and releases each.

Thinning (``train.snapshot_neurons = K > 0``, for wide layers): at epoch 0 and the last epoch
every weight is recorded in full; at every snapshot epoch (those two included) the hidden
layers keep only the rows of K fixed neurons, evenly spread over 0..m-1
(``thinned_neurons``; neurons are exchangeable at initialization, so an even spread is a
fair sample that needs no seed). The output layer, (d_out, m + 1), is kept whole at every
snapshot. The record (disk, and what analysis reads) then holds K x cols per hidden layer per
snapshot instead of m x cols, and so does training memory: the trainer hands each snapshot to
the recorder when it is taken, and its checkpoints (``_checkpoint.py``) save the recorder's
contents (``state_dict``), thinned as recorded.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch


def trim_heap() -> None:
    """Give freed heap memory back to the OS: glibc keeps many small freed blocks otherwise, so
    copies released while the record is assembled would still count as resident. No-op elsewhere."""
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


def thinned_neurons(width: int, keep: int) -> np.ndarray | None:
    """The `keep` hidden neurons recorded at every snapshot, evenly spread; None keeps them all."""
    if keep <= 0 or keep >= width:
        return None
    return np.unique(np.linspace(0, width - 1, keep).round().astype(np.int64))


@dataclass
class BatchSnapshots:
    """Snapshots of R runs: per layer (R, S, rows, cols) in the training dtype.

    ``layers`` hold every snapshot epoch; for thinned records the hidden layers there hold only
    the rows in ``neurons``, and ``full_layers`` hold every weight at ``full_epochs``.
    Without thinning, ``full_layers is layers`` and ``full_epochs is epochs``.
    """

    epochs: np.ndarray
    layers: list[np.ndarray]
    full_epochs: np.ndarray
    full_layers: list[np.ndarray]
    neurons: np.ndarray | None = None


class _Store:
    """Preallocated (R, S, rows, cols) numpy arrays, filled one snapshot at a time."""

    def __init__(self, slots: int):
        self.slots = slots
        self.epochs: list[int] = []
        self.layers: list[np.ndarray] = []

    def put(self, epoch: int, tensors: Sequence[torch.Tensor]) -> None:
        if not self.layers:  # pages of slots never filled (an interrupted run) are never touched
            dtype = torch.empty(0, dtype=tensors[0].dtype).numpy().dtype
            self.layers = [np.empty((t.shape[0], self.slots, *t.shape[1:]), dtype=dtype) for t in tensors]
        s = len(self.epochs)
        for layer, t in zip(self.layers, tensors, strict=True):
            torch.from_numpy(layer[:, s]).copy_(t)  # straight into the record: no torch copy kept
        self.epochs.append(epoch)

    def result(self, last_epoch: int) -> tuple[np.ndarray, list[np.ndarray]]:
        count = sum(e <= last_epoch for e in self.epochs)
        return np.array(self.epochs[:count], dtype=np.int64), [a[:, :count] for a in self.layers]

    def flats(self, width: int, dtype: torch.dtype) -> torch.Tensor:
        """(S, width): each snapshot's layers flattened (run-major, as in ``BatchedNet.flat``)
        and concatenated; (0, width) of `dtype` before the first snapshot."""
        if not self.epochs:
            return torch.zeros((0, width), dtype=dtype)
        return torch.stack([torch.cat([torch.from_numpy(a[:, s]).reshape(-1) for a in self.layers])
                            for s in range(len(self.epochs))])


def _split(flat: torch.Tensor, shapes: Sequence[tuple[int, ...]]) -> list[torch.Tensor]:
    """The inverse of one row of ``_Store.flats``: per-layer tensors of `shapes`."""
    parts, offset = [], 0
    for shape in shapes:
        size = int(np.prod(shape))
        parts.append(flat[offset:offset + size].view(shape))
        offset += size
    return parts


class SnapshotRecorder:
    """Copies a batch's weights at the snapshot epochs; call ``take`` from the training loop.

    Each snapshot is copied once, straight into preallocated numpy arrays in the training
    dtype: recording costs one copy of the snapshots, and nothing is stacked afterwards.
    """

    def __init__(self, at: Iterable[int], last: int, neurons: np.ndarray | None = None):
        self.wanted = set(at)
        self.last = last
        self.neurons = neurons
        full_slots = len(self.wanted) if neurons is None else len(self.wanted & {0, last})
        self._full = _Store(full_slots)
        self._thin = _Store(len(self.wanted)) if neurons is not None else None
        self._index: torch.Tensor | None = None

    def __contains__(self, epoch: int) -> bool:
        return epoch in self.wanted

    def take(self, epoch: int, weights: Sequence[torch.Tensor]) -> None:
        """Copy `weights` ([layer] -> (R, rows, cols), output layer last) as the snapshot at `epoch`."""
        if self._thin is None or epoch in (0, self.last):
            self._full.put(epoch, [w.detach() for w in weights])
        if self._thin is not None:
            if self._index is None or self._index.device != weights[0].device:
                self._index = torch.as_tensor(self.neurons, device=weights[0].device)
            kept = [w.detach().index_select(1, self._index) for w in weights[:-1]]
            self._thin.put(epoch, [*kept, weights[-1].detach()])

    def _thin_shapes(self, shapes: Sequence[tuple[int, ...]]) -> list[tuple[int, ...]]:
        """Shapes of a thinned snapshot: hidden layers (R, K, cols), the output layer whole."""
        k = len(self.neurons) if self.neurons is not None else 0
        return [*((r, k, c) for r, _, c in shapes[:-1]), tuple(shapes[-1])]

    def state_dict(self, shapes: Sequence[tuple[int, ...]], dtype: torch.dtype) -> dict[str, torch.Tensor]:
        """What a checkpoint saves (CPU tensors); `shapes`: the net's layers (R, rows, cols).

        ``snapshot_epochs`` (S,) and ``snapshots`` (S, P): the snapshots recorded in full, each
        laid out like ``BatchedNet.flat``; when thinned, also ``thin_epochs`` (T,) and
        ``thin_snapshots`` (T, Q): every snapshot's kept rows, layer by layer.
        """
        def size(of) -> int:
            return sum(int(np.prod(s)) for s in of)

        state = {"snapshot_epochs": torch.tensor(self._full.epochs, dtype=torch.int64),
                 "snapshots": self._full.flats(size(shapes), dtype)}
        if self._thin is not None:
            state["thin_epochs"] = torch.tensor(self._thin.epochs, dtype=torch.int64)
            state["thin_snapshots"] = self._thin.flats(size(self._thin_shapes(shapes)), dtype)
        return state

    def load_state_dict(self, saved: dict, shapes: Sequence[tuple[int, ...]]) -> None:
        """Refill from a checkpoint (see ``state_dict``; `shapes`: the net's layers).

        A checkpoint without ``thin_snapshots`` (written before thinned snapshots were kept thin
        in memory) holds every snapshot in full: each is recorded again, thinned as recorded.
        """
        thin = saved.get("thin_snapshots")
        for epoch, flat in zip(saved["snapshot_epochs"].tolist(), saved["snapshots"], strict=True):
            if thin is None:
                self.take(epoch, _split(flat, shapes))
            else:
                self._full.put(epoch, _split(flat, shapes))
        if thin is not None and self._thin is not None:
            for epoch, flat in zip(saved["thin_epochs"].tolist(), thin, strict=True):
                self._thin.put(epoch, _split(flat, self._thin_shapes(shapes)))

    def result(self, last_epoch: int) -> BatchSnapshots:
        """The snapshots up to `last_epoch` as numpy arrays (views of what was recorded)."""
        full_epochs, full = self._full.result(last_epoch)
        if self._thin is None:
            return BatchSnapshots(full_epochs, full, full_epochs, full)
        epochs, thin = self._thin.result(last_epoch)
        return BatchSnapshots(epochs, thin, full_epochs, full, self.neurons)
