"""The layer adapter: the one place that decides what a "layer" of an arbitrary PyTorch model is.

condlab's analysis works on a layer's input weights W of shape (m, k): one row per neuron,
the bias folded in as the last column (docs/conventions.md). This module turns a module or a
state_dict into such matrices, named by the module path a user knows:

* ``nn.Linear``                    -> ``fc1``: (out, in [+1])
* ``nn.Conv1d/2d/3d``              -> ``conv1``: (out_channels, in/groups * prod(kernel) [+1]),
                                      each output channel's kernel flattened, then its bias
* ``nn.MultiheadAttention``        -> ``attn.q``, ``attn.k``, ``attn.v`` (split from the packed
                                      ``in_proj_weight`` or the separate ``q/k/v_proj_weight``),
                                      per head ``attn.q.h0`` .. (rows h*d .. (h+1)*d - 1,
                                      d = embed_dim / num_heads), and ``attn.o`` (``out_proj``)
* feed-forward of ``nn.TransformerEncoderLayer`` / ``DecoderLayer``: ``layers.0.linear1``
  (kind ``ffn_in``) and ``linear2`` (``ffn_out``); other Linears are kind ``linear``.

Anything else that holds parameters (embeddings, normalization, transposed convolutions,
unknown modules) is listed in ``LayerSet.skipped`` with the reason; nothing is dropped silently.

From a state_dict (no module types) the adapter infers from parameter names and shapes:
``in_proj_weight`` / ``q_proj_weight`` -> attention (and its ``out_proj`` -> ``o``); a 2-D
``weight`` -> linear, 3/4/5-D -> conv1d/2d/3d; ``linear1`` / ``linear2`` beside a
``self_attn`` -> ffn_in / ffn_out. It CANNOT infer: the number of heads (pass ``heads=``; without
it only whole Q/K/V matrices are given), whether a bias-free 2-D weight is an ``nn.Linear`` or an
``nn.Embedding`` (names with a part starting "emb", "wte" or "wpe", e.g. ``tok_emb``, are skipped as
embeddings; others are treated as linear), nor a transposed convolution (its weight looks like a conv).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

KINDS = ("linear", "conv1d", "conv2d", "conv3d", "attn_q", "attn_k", "attn_v", "attn_o",
         "ffn_in", "ffn_out")
_CONV = {nn.Conv1d: "conv1d", nn.Conv2d: "conv2d", nn.Conv3d: "conv3d"}
_CONV_BY_NDIM = {3: "conv1d", 4: "conv2d", 5: "conv3d"}
_EMBED_NAME = re.compile(r"(^|[._])(emb|wte|wpe)")  # embed*, emb, tok_emb, word_embeddings, wte
_BLOCKS = (nn.TransformerEncoderLayer, nn.TransformerDecoderLayer)


@dataclass(frozen=True)
class LayerMatrix:
    """One layer's input weights: `weight` (m, k), bias (if any) as the last column."""

    name: str
    kind: str
    weight: Tensor
    has_bias: bool
    head: int | None = None  # attention head of a per-head slice, else None

    @property
    def shape(self) -> tuple[int, int]:
        return (int(self.weight.shape[0]), int(self.weight.shape[1]))


@dataclass(frozen=True)
class Skipped:
    """A parameter-holding module (or state_dict prefix) the adapter does not treat as a layer."""

    name: str
    reason: str


@dataclass
class LayerSet:
    """What the adapter found: layers in module order, the skipped ones, notes on inference."""

    layers: list[LayerMatrix] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def names(self) -> list[str]:
        return [lay.name for lay in self.layers]


def _rows(weight: Tensor, bias: Tensor | None) -> Tensor:
    """(out, ...) weight + (out,) bias -> (out, prod(...) [+1]) detached rows."""
    w = weight.detach().reshape(weight.shape[0], -1)
    if bias is None:
        return w
    return torch.cat([w, bias.detach().reshape(-1, 1).to(w.dtype)], 1)


def _attention(name: str, p: Mapping[str, Tensor | None], out_w: Tensor | None, out_b: Tensor | None,
               heads: int | None) -> list[LayerMatrix]:
    """Q, K, V (whole and per head) and the output projection of one attention module."""
    if p.get("in_proj_weight") is not None:
        w = p["in_proj_weight"]
        e = w.shape[0] // 3
        ws = [w[i * e:(i + 1) * e] for i in range(3)]
    else:
        ws = [p[f"{c}_proj_weight"] for c in "qkv"]  # type: ignore[misc]
    b = p.get("in_proj_bias")
    bs = [None] * 3 if b is None else [b[i * ws[0].shape[0]:(i + 1) * ws[0].shape[0]] for i in range(3)]
    found = []
    for c, wc, bc in zip("qkv", ws, bs, strict=True):
        whole = _rows(wc, bc)
        found.append(LayerMatrix(f"{name}.{c}", f"attn_{c}", whole, bc is not None))
        if heads and heads > 1 and whole.shape[0] % heads == 0:
            d = whole.shape[0] // heads
            found += [LayerMatrix(f"{name}.{c}.h{h}", f"attn_{c}", whole[h * d:(h + 1) * d],
                                  bc is not None, h) for h in range(heads)]
    if out_w is not None:
        found.append(LayerMatrix(f"{name}.o", "attn_o", _rows(out_w, out_b), out_b is not None))
    return found


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _from_module(model: nn.Module, heads: int | None) -> LayerSet:
    found = LayerSet()
    inside_attention: set[str] = set()
    ffn_kind: dict[str, str] = {}
    for name, mod in model.named_modules():
        if isinstance(mod, _BLOCKS):
            ffn_kind[_join(name, "linear1")] = "ffn_in"
            ffn_kind[_join(name, "linear2")] = "ffn_out"
        if any(name == a or name.startswith(a + ".") for a in inside_attention):
            continue  # out_proj was taken with its attention module
        own = dict(mod.named_parameters(recurse=False))
        label = name or "(root)"
        if isinstance(mod, nn.MultiheadAttention):
            inside_attention.add(name)
            found.layers += _attention(label, own, mod.out_proj.weight, mod.out_proj.bias,
                                       heads or mod.num_heads)
        elif isinstance(mod, nn.Linear):
            found.layers.append(LayerMatrix(label, ffn_kind.get(name, "linear"),
                                            _rows(mod.weight, mod.bias), mod.bias is not None))
        elif type(mod) in _CONV:
            found.layers.append(LayerMatrix(label, _CONV[type(mod)], _rows(mod.weight, mod.bias),
                                            mod.bias is not None))
        elif own:
            found.skipped.append(Skipped(label, _skip_reason(mod)))
    return found


def _skip_reason(mod: nn.Module) -> str:
    kind = type(mod).__name__
    if isinstance(mod, nn.Embedding | nn.EmbeddingBag):
        return f"{kind}: rows are token vectors, not neurons' input weights"
    if isinstance(mod, nn.modules.batchnorm._NormBase | nn.LayerNorm | nn.GroupNorm | nn.RMSNorm):
        return f"{kind}: per-feature scale and shift, no input weights"
    if isinstance(mod, nn.modules.conv._ConvTransposeNd):
        return f"{kind}: weights are (in, out, ...), not one row per output neuron"
    return f"{kind}: not a layer type the adapter knows (parameters: {', '.join(mod._parameters)})"


def _group(state: Mapping[str, Tensor]) -> dict[str, dict[str, Tensor]]:
    """{module prefix: {parameter name: tensor}} in key order."""
    groups: dict[str, dict[str, Tensor]] = {}
    for key, value in state.items():
        prefix, _, leaf = key.rpartition(".")
        groups.setdefault(prefix, {})[leaf] = value
    return groups


def _from_state_dict(state: Mapping[str, Tensor], heads: int | None) -> LayerSet:
    found = LayerSet()
    found.notes.append("from a state_dict: layer kinds inferred from parameter names and shapes "
                       "(see condlab.models._layers); heads " + (f"= {heads} as given" if heads else
                                                           "unknown, so Q/K/V are whole matrices"))
    groups = _group(state)
    attention = {p for p, g in groups.items() if "in_proj_weight" in g or "q_proj_weight" in g}
    for prefix, g in groups.items():
        label = prefix or "(root)"
        parent, _, leaf = prefix.rpartition(".")
        if prefix in attention:
            out = groups.get(_join(prefix, "out_proj"), {})
            found.layers += _attention(label, g, out.get("weight"), out.get("bias"), heads)
        elif parent in attention and leaf == "out_proj":
            continue
        elif "running_mean" in g or ("weight" in g and g["weight"].ndim == 1):
            found.skipped.append(Skipped(label, "1-D weight: normalization or scale, no input weights"))
        elif "weight" in g and g["weight"].ndim == 2:
            w, b = g["weight"], g.get("bias")
            if b is None and _EMBED_NAME.search(prefix.lower()):
                found.skipped.append(Skipped(label, "2-D weight without bias named like an embedding"))
                continue
            kind = "linear"
            if leaf in ("linear1", "linear2") and _join(parent, "self_attn") in attention:
                kind = "ffn_in" if leaf == "linear1" else "ffn_out"
            found.layers.append(LayerMatrix(label, kind, _rows(w, b), b is not None))
        elif "weight" in g and g["weight"].ndim in _CONV_BY_NDIM:
            b = g.get("bias")
            if b is not None and b.numel() != g["weight"].shape[0]:
                found.skipped.append(Skipped(label, "bias length differs from the weight's first axis: "
                                                    "a transposed convolution?"))
                continue
            found.layers.append(LayerMatrix(label, _CONV_BY_NDIM[g["weight"].ndim],
                                            _rows(g["weight"], b), b is not None))
        elif any(isinstance(v, Tensor) and v.is_floating_point() for v in g.values()):
            found.skipped.append(Skipped(label, f"parameters {', '.join(g)}: no rule for these names"))
    return found


def is_state_dict(obj: object) -> bool:
    """True for a mapping of names to tensors (what `model.state_dict()` returns)."""
    return isinstance(obj, Mapping) and bool(obj) and all(
        isinstance(k, str) and isinstance(v, Tensor) for k, v in obj.items())


def extract_layers(model: nn.Module | Mapping[str, Tensor], *, layers: str | list[str] | None = None,
                   heads: int | None = None) -> LayerSet:
    """Input-weight matrices (m, k) of every layer of a module or state_dict, bias folded in.

    `layers`: shell-style glob(s) on the layer name (``"layers.*.self_attn.q*"``); a layer or
    skipped module is kept when any pattern matches. `heads`: split attention Q/K/V per head
    (a module knows its own ``num_heads``; a state_dict needs it given).
    """
    if isinstance(model, nn.Module):
        found = _from_module(model, heads)
    elif is_state_dict(model):
        found = _from_state_dict(model, heads)
    else:
        raise ValueError(f"expected an nn.Module or a state_dict (a mapping of names to tensors), "
                         f"got {type(model).__name__}")
    if layers is not None:
        patterns = [layers] if isinstance(layers, str) else list(layers)
        keep = lambda n: any(fnmatch.fnmatchcase(n, p) for p in patterns)  # noqa: E731
        names = found.names()
        found.layers = [lay for lay in found.layers if keep(lay.name)]
        found.skipped = [s for s in found.skipped if keep(s.name)]
        if not found.layers:
            shown = ", ".join(names[:8]) + (" ..." if len(names) > 8 else "")
            raise ValueError(f"layers={patterns} matches no layer: give glob patterns over the layer "
                             f"names ({shown or 'this model has none'})")
    return found
