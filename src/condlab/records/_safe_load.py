"""Read a checkpoint someone else wrote, treating it as untrusted input.

* ``.safetensors`` files are read with the optional ``safetensors`` package (tensors only).
* A Hugging Face ``save_pretrained`` folder (``load_source``): config.json (for the head counts)
  and model.safetensors, or the shards its ``model.safetensors.index.json`` lists (also
  ``pytorch_model.bin`` and its index). A safetensors file with a config.json beside it gets
  that config too.
* Anything else goes through ``torch.load(weights_only=True)``: tensors, dicts, lists and
  numbers only; a pickle that would build other objects (or run code) is refused before any
  of it runs. A training checkpoint that nests the weights (``{"state_dict": {...}}``,
  ``{"model": {...}}``, ...) is unwrapped to the first mapping of names to tensors.
* A pickled whole ``nn.Module`` needs ``unsafe_pickle=True`` (``--unsafe-pickle``):
  unpickling imports and runs code named in the file, so only use it on files you trust.

Every failure is one ``CheckpointError`` (a ValueError: exit 2 in the CLI) naming the file.
"""

from __future__ import annotations

import json
import pickle
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

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


def _natural(key: str) -> list:
    """Sort key putting h.2 before h.10: files and shard indexes list names alphabetically."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", key)]


def _config(folder: Path) -> dict[str, Any] | None:
    path = folder / "config.json"
    if not path.is_file():
        return None
    try:
        raw = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CheckpointError(f"'{path}' is not valid JSON ({_first_line(err)[:120]})") from None
    return raw if isinstance(raw, dict) else None


_WEIGHTS = ("model.safetensors", "pytorch_model.bin")


def _sharded(index: Path) -> dict[str, torch.Tensor]:
    """Every tensor of the shards a *.index.json weight_map names (all must be there)."""
    try:
        weight_map = json.loads(index.read_text())["weight_map"]
        shards = list(dict.fromkeys(weight_map.values()))
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, AttributeError):
        raise CheckpointError(f"'{index}' is not a shard index (a JSON object with a weight_map)") from None
    state: dict[str, torch.Tensor] = {}
    for shard in shards:
        part = load_checkpoint(index.parent / shard)
        if not is_state_dict(part):
            raise CheckpointError(f"'{index.parent / shard}' holds no tensors")
        state.update(part)  # type: ignore[arg-type]
    missing = [k for k in weight_map if k not in state]
    if missing:
        raise CheckpointError(f"'{index}' names {len(missing)} tensors its shards lack (first: {missing[0]})")
    return state


def _folder(folder: Path) -> Mapping[str, torch.Tensor]:
    for name in _WEIGHTS:
        if (folder / name).is_file():
            return load_checkpoint(folder / name)  # type: ignore[return-value]
        if (folder / f"{name}.index.json").is_file():
            return _sharded(folder / f"{name}.index.json")
    raise CheckpointError(f"folder '{folder}' holds no model.safetensors, pytorch_model.bin nor a shard "
                          "index (*.index.json): give a checkpoint file or a save_pretrained folder")


def load_source(path: str | Path, *, unsafe_pickle: bool = False
                ) -> tuple[nn.Module | Mapping[str, torch.Tensor], dict[str, Any] | None]:
    """(model or state_dict, Hugging Face config.json or None) from a file or save_pretrained folder."""
    path = Path(path)
    if path.is_dir():
        state = _folder(path)
        return {k: state[k] for k in sorted(state, key=_natural)}, _config(path)
    model = load_checkpoint(path, unsafe_pickle=unsafe_pickle)
    if path.suffix == ".safetensors" and is_state_dict(model):
        model = {k: model[k] for k in sorted(model, key=_natural)}
        return model, _config(path.parent)
    return model, None


def load_checkpoint(path: str | Path, *,
                    unsafe_pickle: bool = False) -> nn.Module | Mapping[str, torch.Tensor]:
    """A state_dict (or, with unsafe_pickle, a pickled nn.Module) read from `path` on the CPU."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint '{path}' does not exist or is not a file"
                              + (" (a folder: `condlab inspect` reads save_pretrained folders)"
                                 if path.is_dir() else ""))
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
