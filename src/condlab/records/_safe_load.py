"""Read a checkpoint someone else wrote, treating it as untrusted input.

* ``.safetensors`` files are read with the optional ``safetensors`` package (tensors only).
* Anything else goes through ``torch.load(weights_only=True)``: tensors, dicts, lists and
  numbers only; a pickle that would build other objects (or run code) is refused before any
  of it runs. A training checkpoint that nests the weights (``{"state_dict": {...}}``,
  ``{"model": {...}}``, ...) is unwrapped to the first mapping of names to tensors.
* A pickled whole ``nn.Module`` needs ``unsafe_pickle=True`` (``--unsafe-pickle``):
  unpickling imports and runs code named in the file, so only use it on files you trust.

Every failure is one ``CheckpointError`` (a ValueError: exit 2 in the CLI) naming the file.
"""

from __future__ import annotations

import pickle
from collections.abc import Mapping
from pathlib import Path

import torch
from torch import nn

from ..models import is_state_dict

NESTED_KEYS = ("state_dict", "model_state_dict", "model", "module", "net", "weights", "params")


class CheckpointError(ValueError):
    """A checkpoint that cannot be read safely; the message is one line."""


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}".rstrip(": ")


def _unwrap(obj: object, path: Path) -> Mapping[str, torch.Tensor]:
    if is_state_dict(obj):
        return obj  # type: ignore[return-value]
    if isinstance(obj, Mapping):
        for key in (*NESTED_KEYS, *obj):
            value = obj.get(key)
            if is_state_dict(value):
                return value  # type: ignore[return-value]
    raise CheckpointError(f"'{path}' holds no state_dict (a mapping of parameter names to tensors): "
                          f"found {type(obj).__name__}"
                          + (f" with keys {', '.join(map(str, list(obj)[:6]))}" if isinstance(obj, Mapping)
                             else ""))


def _safetensors(path: Path) -> Mapping[str, torch.Tensor]:
    try:
        from safetensors.torch import load_file
    except ImportError:
        raise CheckpointError(f"'{path}' is a safetensors file: install the optional package "
                              "`safetensors` (pip install safetensors) to read it") from None
    try:
        return load_file(str(path))
    except Exception as err:  # noqa: BLE001 - any parse failure is one message
        raise CheckpointError(f"'{path}' is not a readable safetensors file ({_first_line(err)})") from None


def load_checkpoint(path: str | Path, *,
                    unsafe_pickle: bool = False) -> nn.Module | Mapping[str, torch.Tensor]:
    """A state_dict (or, with unsafe_pickle, a pickled nn.Module) read from `path` on the CPU."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint '{path}' does not exist or is not a file")
    if path.suffix == ".safetensors":
        return _safetensors(path)
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        if "weights only" not in str(err).lower():  # a broken pickle, not a refused one
            raise CheckpointError(f"'{path}' is not a readable PyTorch checkpoint (corrupt or "
                                  f"truncated?): {_first_line(err)[:200]}") from None
        if not unsafe_pickle:
            raise CheckpointError(
                f"'{path}' holds pickled objects that safe loading refuses "
                f"({_refused_global(err)}); "
                "if it is a whole model from a source you trust, rerun with --unsafe-pickle "
                "(unpickling runs code from the file)") from None
        obj = _load_unsafe(path)
    except Exception as err:  # noqa: BLE001 - corrupt, truncated, not a torch file: one message
        raise CheckpointError(f"'{path}' is not a readable PyTorch checkpoint (corrupt, truncated or "
                              f"another format?): {_first_line(err)[:200]}") from None
    if isinstance(obj, nn.Module):
        return obj
    return _unwrap(obj, path)


def _refused_global(err: BaseException) -> str:
    """The global torch named in its refusal ('Unsupported global: GLOBAL x.Y'), or a short text."""
    for line in str(err).splitlines():
        if "GLOBAL" in line or "Unsupported" in line:
            return line.split(" Please")[0].strip()[:160]
    return _first_line(err)[:160]


def _load_unsafe(path: Path) -> object:
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except Exception as err:  # noqa: BLE001
        raise CheckpointError(f"'{path}' could not be unpickled ({_first_line(err)[:200]})") from None
