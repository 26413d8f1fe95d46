"""The layer adapter: the one place that decides what a "layer" of an arbitrary PyTorch model is.

condlab's analysis works on a layer's input weights W of shape (m, k): one row per neuron,
the bias folded in as the last column (docs/conventions.md). This module turns a module or a
state_dict into such matrices, named by the module path a user knows:

* ``nn.Linear``                    -> ``fc1``: (out, in [+1])
* Hugging Face ``Conv1D`` (GPT-2)  -> as a Linear: its weight is stored (in, out), so it is read
                                      transposed (the neurons are its columns)
* ``nn.Conv1d/2d/3d``              -> ``conv1``: (out_channels, in/groups * prod(kernel) [+1]),
                                      each output channel's kernel flattened, then its bias
* ``nn.MultiheadAttention``        -> ``attn.q``, ``attn.k``, ``attn.v`` (split from the packed
                                      ``in_proj_weight`` or the separate ``q/k/v_proj_weight``)
                                      and ``attn.o`` (``out_proj``)
* Hugging Face attention (``condlab.models._hf``: BERT ``query/key/value``, GPT-2 ``c_attn``, LLaMA
  ``q_proj/k_proj/v_proj/o_proj``, ViT; timm's ``qkv/proj``) -> kinds attn_q/k/v/o under their own
  names; a packed ``c_attn`` (``qkv``) gives ``c_attn.q``, ``c_attn.k``, ``c_attn.v``
* per head (heads known): ``NAME.h0`` .. of Q/K/V = rows h*d .. (h+1)*d - 1 (K and V cut into
  the key/value heads of grouped-query attention); of O = the columns h*d .. (h+1)*d - 1 (what
  each output neuron reads from head h; the shared bias is left out)
* transformer feed-forward layers (``_hf.ffn_kind``): kind ``ffn_in`` / ``ffn_out``; other
  Linears are kind ``linear``.

Anything else that holds parameters (embeddings, normalization, transposed convolutions,
unknown modules) is listed in ``LayerSet.skipped`` with the reason; nothing is dropped silently,
and a weight the adapter cannot read becomes a skipped entry with the reason, never an error.

From a state_dict (no module types) the adapter infers from parameter names and shapes:
``in_proj_weight`` / ``q_proj_weight`` -> attention (and its ``out_proj`` -> ``o``); a 2-D
``weight`` -> linear (read (in, out) under GPT-2's Conv1D names, or when only its columns match
the bias), 3/4/5-D -> conv1d/2d/3d. It CANNOT infer: the number of heads (a ``save_pretrained``
folder's config.json has it, or pass ``heads=``; without it Q/K/V/O are whole matrices, and the
row's note says so), whether a bias-free 2-D weight is an ``nn.Linear`` or an ``nn.Embedding``
(names with a part starting "emb", "wte" or "wpe" are skipped as embeddings; others are treated
as linear), nor a transposed convolution (its weight looks like a conv).

Layer globs (``layers=``) select among the names before any matrix is built.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from ._hf import Block, Heads, attention_blocks, config_heads, ffn_kind, is_conv1d_name, module_heads

KINDS = ("linear", "conv1d", "conv2d", "conv3d", "attn_q", "attn_k", "attn_v", "attn_o",
         "ffn_in", "ffn_out")
_CONV = {nn.Conv1d: "conv1d", nn.Conv2d: "conv2d", nn.Conv3d: "conv3d"}
_CONV_BY_NDIM = {3: "conv1d", 4: "conv2d", 5: "conv3d"}
_EMBED_NAME = re.compile(r"(^|[._])(emb|wte|wpe)")  # embed*, emb, tok_emb, word_embeddings, wte
_CONV1D_NOTE = "Conv1D weight stored (in, out): read transposed"


@dataclass(frozen=True)
class LayerMatrix:
    """One layer's input weights: `weight` (m, k), bias (if any) as the last column."""

    name: str
    kind: str
    weight: Tensor
    has_bias: bool
    head: int | None = None  # attention head of a per-head slice, else None
    note: str = ""           # how it was read, or why it was not split per head

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


@dataclass(frozen=True)
class Part:
    """A weight as read, rows = neurons: `w` (out, ...) and `b` (out,) are views, not copies."""

    name: str
    kind: str
    w: Tensor
    b: Tensor | None
    note: str = ""


@dataclass(frozen=True)
class _Spec:
    """A layer named and kinded but not built: `make` builds its (m, k) matrix when chosen."""

    name: str
    kind: str
    make: Callable[[], Tensor]
    has_bias: bool
    head: int | None = None
    note: str = ""


GIVEN = "heads= as given"  # the source of a number of heads the user gave (--heads)


def _rows(weight: Tensor, bias: Tensor | None) -> Tensor:
    """(out, ...) weight + (out,) bias -> (out, prod(...) [+1]) detached rows.

    Refused (ValueError, the layer is skipped with the reason): a complex weight (its imaginary
    part would be dropped without a word), no rows or no columns, a bias of another length.
    """
    if weight.is_complex() or (bias is not None and bias.is_complex()):
        raise ValueError(f"complex {weight.dtype} weights are not accepted: condensation is measured on real "
                         "weights (pass their real and imaginary parts as separate layers)")
    if weight.dim() < 1 or weight.numel() == 0:
        raise ValueError(f"the weight {tuple(weight.shape)} has no rows or no columns")
    w = weight.detach().reshape(weight.shape[0], -1)
    if bias is None:
        return w
    if bias.numel() != w.shape[0]:
        raise ValueError(f"a bias of {bias.numel()} values does not match the weight's {w.shape[0]} rows")
    return torch.cat([w, bias.detach().reshape(-1, 1).to(w.dtype)], 1)


def _whole(p: Part, kind: str, note: str = "") -> _Spec:
    return _Spec(p.name, kind, lambda: _rows(p.w, p.b), p.b is not None, None,
                 "; ".join(n for n in (p.note, note) if n))


def _attention(q: Part, k: Part, v: Part, o: Part | None, heads: Heads) -> list[_Spec]:
    """Q, K, V and O of one attention block, whole and (heads known) per head."""
    split = heads.split(q.w.shape[0], k.w.shape[0])
    if isinstance(split, str) and heads.source == GIVEN:  # the user's number: say it, not a note
        raise ValueError(f"--heads {heads.q} (heads=) does not fit '{q.name}': {split}; give a number of "
                         f"heads that divides {q.w.shape[0]}")
    note = split if isinstance(split, str) else ""
    specs = []
    for c, p in (("q", q), ("k", k), ("v", v)):
        specs.append(_whole(p, f"attn_{c}", note))
        if isinstance(split, tuple) and split[0] > 1:
            n, d = (split[0] if c == "q" else split[1]), split[2]
            specs += [_Spec(f"{p.name}.h{h}", f"attn_{c}",
                            lambda p=p, h=h, d=d: _rows(p.w[h * d:(h + 1) * d],
                                                        None if p.b is None else p.b[h * d:(h + 1) * d]),
                            p.b is not None, h, p.note) for h in range(n)]
    if o is not None:
        specs.append(_whole(o, "attn_o", note))
        if isinstance(split, tuple) and split[0] > 1 and o.w.shape[1] == split[0] * split[2]:
            d = split[2]
            specs += [_Spec(f"{o.name}.h{h}", "attn_o", lambda h=h: _rows(o.w[:, h * d:(h + 1) * d], None),
                            False, h, "columns of this head; the shared bias left out")
                      for h in range(split[0])]
    return specs


def _mha_parts(name: str, p: Mapping[str, Any], out_w: Tensor | None,
               out_b: Tensor | None) -> tuple[Part, Part, Part, Part | None]:
    """Q, K, V, O parts of nn.MultiheadAttention's parameters (packed or separate)."""
    if p.get("in_proj_weight") is not None:
        w = p["in_proj_weight"]
        e = w.shape[0] // 3
        ws = [w[i * e:(i + 1) * e] for i in range(3)]
    else:
        ws = [p[f"{c}_proj_weight"] for c in "qkv"]
    b = p.get("in_proj_bias")
    e = ws[0].shape[0]
    bs = [None] * 3 if b is None else [b[i * e:(i + 1) * e] for i in range(3)]
    q, k, v = (Part(f"{name}.{c}", f"attn_{c}", wc, bc) for c, wc, bc in zip("qkv", ws, bs, strict=True))
    return q, k, v, None if out_w is None else Part(f"{name}.o", "attn_o", out_w, out_b)


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _roles(parts: dict[str, Part], heads_of: Callable[[Block], Heads],
           others: list[str]) -> dict[str, list[_Spec]]:
    """Specs of parts by name: attention blocks (split per head), FFN kinds, else linear.

    `others`: names of layers outside `parts` (nn.MultiheadAttention), for the FFN rules."""
    out: dict[str, list[_Spec]] = {}
    for blk in attention_blocks([n for n, p in parts.items() if p.w.ndim == 2]):
        if blk.packed:  # GPT-2 c_attn (transposed), timm qkv: (3E, E) rows, Q, K, V are its thirds
            p = parts[blk.q]
            e = p.w.shape[0] // 3
            if e * 3 != p.w.shape[0]:
                continue
            q, k, v = (Part(f"{p.name}.{c}", p.kind, p.w[i * e:(i + 1) * e],
                            None if p.b is None else p.b[i * e:(i + 1) * e], p.note)
                       for i, c in enumerate("qkv"))
        else:
            q, k, v = parts[blk.q], parts[blk.k], parts[blk.v]
        specs = _attention(q, k, v, None if blk.o is None else parts[blk.o], heads_of(blk))
        for name in {blk.q, blk.k, blk.v, blk.o} - {None}:
            out[name] = []  # placed at its Q (the first of the block in layer order)
        out[blk.q] = specs
    names = [*parts, *others]
    for name, p in parts.items():
        if name not in out:
            kind = p.kind if p.w.ndim != 2 else (ffn_kind(name, names) or "linear")
            out[name] = [_whole(p, kind)]
    return out


def _from_module(model: nn.Module, heads: int | None) -> tuple[list[_Spec], LayerSet]:
    found = LayerSet()
    parts: dict[str, Part] = {}
    order: list[str | list[_Spec]] = []  # names of parts, or the specs of an nn.MultiheadAttention
    inside: set[str] = set()
    root = config_heads(getattr(model, "config", None), "the model's config")
    given = Heads(heads, source=GIVEN) if heads else None
    for name, mod in model.named_modules():
        if any(name == a or name.startswith(a + ".") for a in inside):
            continue  # out_proj was taken with its attention module
        own = dict(mod.named_parameters(recurse=False))
        label = name or "(root)"
        if isinstance(mod, nn.MultiheadAttention):
            inside.add(name)
            order.append(_attention(*_mha_parts(label, own, mod.out_proj.weight, mod.out_proj.bias),
                                    Heads(heads or mod.num_heads, source="num_heads")))
        elif isinstance(mod, nn.Linear):
            parts[label] = Part(label, "linear", mod.weight, mod.bias)
        elif _is_conv1d(mod):
            parts[label] = Part(label, "linear", mod.weight.t(), mod.bias, _CONV1D_NOTE)
        elif type(mod) in _CONV:
            parts[label] = Part(label, _CONV[type(mod)], mod.weight, mod.bias)
        elif own:
            found.skipped.append(Skipped(label, _skip_reason(mod)))
            continue
        else:
            continue
        if label in parts:
            order.append(label)

    def heads_of(blk: Block) -> Heads:
        if given:
            return given
        parent = blk.q.rpartition(".")[0]
        try:
            return module_heads(model.get_submodule(parent), root)
        except AttributeError:
            return root

    by_name = _roles(parts, heads_of, sorted(inside))
    specs = [s for item in order for s in (item if isinstance(item, list) else by_name[item])]
    return specs, found


def _is_conv1d(mod: nn.Module) -> bool:
    """Hugging Face's Conv1D (GPT-2): a Linear whose weight is stored (in, out) = (nx, nf)."""
    w = getattr(mod, "weight", None)
    return (type(mod).__name__ == "Conv1D" and isinstance(w, Tensor) and w.ndim == 2
            and getattr(mod, "nf", None) == w.shape[1])


def _skip_reason(mod: nn.Module) -> str:
    kind = type(mod).__name__
    if isinstance(mod, nn.Embedding | nn.EmbeddingBag):
        return f"{kind}: rows are token vectors, not neurons' input weights"
    if isinstance(mod, nn.modules.batchnorm._NormBase | nn.LayerNorm | nn.GroupNorm | nn.RMSNorm):
        return f"{kind}: per-feature scale and shift, no input weights"
    if "norm" in kind.lower() and all(p.ndim <= 1 for p in mod.parameters(recurse=False)):
        return f"{kind}: per-feature scale (a normalization), no input weights"
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


def _state_part(prefix: str, g: Mapping[str, Tensor]) -> Part | str:
    """The Part of one state_dict prefix with a weight, or why it is skipped."""
    w, b = g["weight"], g.get("bias")
    label = prefix or "(root)"
    if w.ndim == 2:
        if b is None and _EMBED_NAME.search(prefix.lower()):
            return "2-D weight without bias named like an embedding"
        if is_conv1d_name(prefix):
            return Part(label, "linear", w.t(), b, _CONV1D_NOTE)
        if b is not None and b.numel() != w.shape[0]:
            if b.numel() == w.shape[1]:
                return Part(label, "linear", w.t(), b, "bias matches the columns: weight read as (in, out)")
            return f"bias of {b.numel()} fits neither axis of the weight {tuple(w.shape)}"
        return Part(label, "linear", w, b)
    if b is not None and b.numel() != w.shape[0]:
        return "bias length differs from the weight's first axis: a transposed convolution?"
    return Part(label, _CONV_BY_NDIM[w.ndim], w, b)


def _from_state_dict(state: Mapping[str, Tensor], heads: int | None,
                     config: Any = None) -> tuple[list[_Spec], LayerSet]:
    found = LayerSet()
    from_config = config_heads(config, "config.json")
    known = Heads(heads, source=GIVEN) if heads else from_config
    found.notes.append("from a state_dict: layer kinds inferred from parameter names and shapes "
                       "(see condlab.models._layers); heads " + (
                           f"= {known.q} ({known.source})" if known.q else
                           "unknown, so Q/K/V/O are whole matrices (give heads= / --heads)"))
    groups = _group(state)
    attention = {p for p, g in groups.items() if "in_proj_weight" in g or "q_proj_weight" in g}
    parts: dict[str, Part] = {}
    order: list[str | list[_Spec]] = []
    for prefix, g in groups.items():
        label = prefix or "(root)"
        parent, _, leaf = prefix.rpartition(".")
        if prefix in attention:
            out = groups.get(_join(prefix, "out_proj"), {})
            order.append(_attention(*_mha_parts(label, g, out.get("weight"), out.get("bias")), known))
        elif parent in attention and leaf == "out_proj":
            continue
        elif "running_mean" in g or ("weight" in g and g["weight"].ndim == 1):
            found.skipped.append(Skipped(label, "1-D weight: normalization or scale, no input weights"))
        elif "weight" in g and g["weight"].ndim in (2, *_CONV_BY_NDIM):
            got = _state_part(prefix, g)
            if isinstance(got, str):
                found.skipped.append(Skipped(label, got))
            else:
                parts[label] = got
                order.append(label)
        elif any(isinstance(v, Tensor) and (v.is_floating_point() or v.is_complex()) for v in g.values()):
            found.skipped.append(Skipped(label, f"parameters {', '.join(g)}: no rule for these names"))
    by_name = _roles(parts, lambda blk: known, sorted(attention))
    specs = [s for item in order for s in (item if isinstance(item, list) else by_name[item])]
    return specs, found


def is_state_dict(obj: object) -> bool:
    """True for a mapping of names to tensors (what `model.state_dict()` returns)."""
    return isinstance(obj, Mapping) and bool(obj) and all(
        isinstance(k, str) and isinstance(v, Tensor) for k, v in obj.items())


def _select(specs: list[_Spec], layers: str | list[str] | None) -> list[_Spec]:
    if layers is None:
        return specs
    patterns = [layers] if isinstance(layers, str) else list(layers)
    chosen = [s for s in specs if any(fnmatch.fnmatchcase(s.name, p) for p in patterns)]
    if not chosen:
        names = [s.name for s in specs]
        shown = ", ".join(names[:8]) + (" ..." if len(names) > 8 else "")
        raise ValueError(f"layers={patterns} matches no layer: give glob patterns over the layer "
                         f"names ({shown or 'this model has none'})")
    return chosen


def extract_layers(model: nn.Module | Mapping[str, Tensor], *, layers: str | list[str] | None = None,
                   heads: int | None = None, config: Any = None) -> LayerSet:
    """Input-weight matrices (m, k) of every layer of a module or state_dict, bias folded in.

    `layers`: shell-style glob(s) on the layer name (``"layers.*.self_attn.q*"``); a layer or
    skipped module is kept when any pattern matches, and only chosen layers are built.
    `heads`: split attention per head (a module knows its own; a state_dict needs it given
    or its `config`, a Hugging Face config.json as a dict).
    """
    if heads is not None and (type(heads) is not int or heads < 1):
        raise ValueError(f"--heads {heads} (heads=) is not accepted: give the number of attention heads, "
                         "an integer >= 1")
    if isinstance(model, nn.Module):
        specs, found = _from_module(model, heads)
    elif is_state_dict(model):
        specs, found = _from_state_dict(model, heads, config)
    else:
        raise ValueError(f"expected an nn.Module or a state_dict (a mapping of names to tensors), "
                         f"got {type(model).__name__}")
    chosen = _select(specs, layers)
    if layers is not None:
        patterns = [layers] if isinstance(layers, str) else list(layers)
        found.skipped = [s for s in found.skipped if any(fnmatch.fnmatchcase(s.name, p) for p in patterns)]
    for s in chosen:
        try:
            found.layers.append(LayerMatrix(s.name, s.kind, s.make(), s.has_bias, s.head, s.note))
        except (RuntimeError, ValueError, IndexError) as err:  # an unforeseen layout: say so, go on
            found.skipped.append(Skipped(s.name, f"could not be read as rows of neurons ({err})"))
    return found
