"""What the layer adapter knows of Hugging Face (and similar) model layouts: names, heads, Conv1D.

The adapter (``condlab.models._layers``) reads every 2-D weight as one row per neuron. These rules then
say which of those matrices are an attention block's Q, K, V and O, which are feed-forward
layers, and how many heads to cut them into. They work on layer names (module paths or
state_dict prefixes), so a module, a safetensors file and a ``save_pretrained`` folder of the
same model give the same rows.

Attention layouts (``ATTENTION``; a block is found when all of its Q, K, V names exist):

* BERT / RoBERTa / ViT (transformers < 5): ``B.self.query``, ``.key``, ``.value`` (or
  ``B.attention.query`` ...), output ``B.output.dense``;
* LLaMA / Mistral / Qwen / ViT (transformers >= 5) / BART / OPT: ``B.q_proj``, ``B.k_proj``,
  ``B.v_proj``, output ``B.o_proj`` or ``B.out_proj``; K and V may have fewer heads
  (grouped-query attention, ``num_key_value_heads``);
* GPT-2: one packed ``B.c_attn`` holding Q, K, V (thirds of its output features), output
  ``B.c_proj``. GPT-2's ``Conv1D`` stores its weight as (in, out), so its rows are columns
  (``CONV1D_LEAVES``: names under which a state_dict holds such weights);
* timm (ViT, DeiT, Swin, ...): one packed ``nn.Linear`` ``B.qkv`` holding Q, K, V (thirds of its
  output features, its rows), output ``B.proj``; heads from the attention module's ``num_heads``.

Head counts come from the model's config (``config_heads``: ``num_attention_heads`` / ``n_head``,
``num_key_value_heads``, ``head_dim``), an attention module's own attributes, or ``heads=``.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

CONV1D_LEAVES = ("c_attn", "c_proj", "c_fc", "q_attn")  # GPT-2 family: weights stored (in, out)
_FFN_IN = re.compile(r"(^|\.)(intermediate\.dense|(mlp|feed_forward|ffn)\.(c_fc|fc1|fc_in|gate_proj|up_proj|"
                     r"w1|w3|dense_h_to_4h))$")
_FFN_OUT = re.compile(r"(^|\.)((mlp|feed_forward|ffn)\.(c_proj|fc2|fc_out|down_proj|w2|dense_4h_to_h))$")


@dataclass(frozen=True)
class Layout:
    """One attention naming scheme: regex on the Q name (group `b` = block), K/V/O templates."""

    family: str
    query: str            # regex matched against a layer name; group "b" is the block path
    key: str              # templates filled with the block path
    value: str
    outputs: tuple[str, ...]
    packed: bool = False  # Q, K, V are thirds of one matrix (GPT-2 c_attn)


ATTENTION = (
    Layout("bert", r"(?P<b>.*)\.(?P<s>self|attention)\.query", "{b}.{s}.key", "{b}.{s}.value",
           ("{b}.output.dense",)),
    Layout("llama", r"(?P<b>.*)\.q_proj", "{b}.k_proj", "{b}.v_proj", ("{b}.o_proj", "{b}.out_proj")),
    Layout("gpt2", r"(?P<b>.*)\.c_attn", "{b}.c_attn", "{b}.c_attn", ("{b}.c_proj",), packed=True),
    Layout("timm", r"(?P<b>.*)\.qkv", "{b}.qkv", "{b}.qkv", ("{b}.proj",), packed=True),
)


@dataclass(frozen=True)
class Block:
    """Where one attention block's matrices are: names of Q, K, V (equal when packed) and O."""

    family: str
    path: str
    q: str
    k: str
    v: str
    o: str | None
    packed: bool = False


def attention_blocks(names: Collection[str]) -> list[Block]:
    """Every attention block whose Q, K and V matrices are all among `names` (layer order)."""
    have, blocks = set(names), []
    for name in names:
        for lay in ATTENTION:
            hit = re.fullmatch(lay.query, name)
            if hit is None:
                continue
            parts = hit.groupdict()
            k, v = lay.key.format(**parts), lay.value.format(**parts)
            if k in have and v in have:
                o = next((t.format(**parts) for t in lay.outputs if t.format(**parts) in have), None)
                blocks.append(Block(lay.family, parts["b"], name, k, v, o, lay.packed))
            break
    return blocks


def ffn_kind(name: str, names: Collection[str]) -> str | None:
    """"ffn_in" / "ffn_out" for a transformer's feed-forward matrices, else None."""
    if _FFN_IN.search(name):
        return "ffn_in"
    if _FFN_OUT.search(name):
        return "ffn_out"
    if name.endswith(".output.dense") and name[: -len("output.dense")] + "intermediate.dense" in names:
        return "ffn_out"  # BERT/ViT: layer.N.output.dense beside layer.N.intermediate.dense
    parent, _, leaf = name.rpartition(".")
    if leaf in ("linear1", "linear2") and any(n.startswith(f"{parent}.self_attn") for n in names):
        return "ffn_in" if leaf == "linear1" else "ffn_out"  # nn.TransformerEncoderLayer
    return None


def is_conv1d_name(prefix: str) -> bool:
    """A state_dict prefix under which GPT-2-style models keep (in, out) Conv1D weights."""
    return prefix.rpartition(".")[2] in CONV1D_LEAVES


@dataclass(frozen=True)
class Heads:
    """Attention heads: query heads, key/value heads (grouped-query), head size; where from."""

    q: int | None = None
    kv: int | None = None
    dim: int | None = None
    source: str = ""

    def split(self, q_rows: int, kv_rows: int) -> tuple[int, int, int] | str:
        """(query heads, key/value heads, head size), or why the rows cannot be split."""
        if not self.q:
            return "heads unknown (no model config): give heads= (--heads) to split per head"
        d = self.dim or q_rows // self.q
        if d < 1 or d * self.q != q_rows:
            return f"heads not split: {q_rows} query rows are not {self.q} heads ({self.source})"
        kv = self.kv or kv_rows // d
        if kv < 1 or kv * d != kv_rows:
            return f"heads not split: {kv_rows} key/value rows are not {self.kv or '?'} heads of {d}"
        return self.q, kv, d


_Q_KEYS = ("num_attention_heads", "n_head", "num_heads", "encoder_attention_heads", "n_heads")
_KV_KEYS = ("num_key_value_heads", "n_kv_heads", "num_kv_heads", "multi_query_group_num")
_DIM_KEYS = ("head_dim", "attention_head_size", "kv_channels")


def _first_int(cfg: Any, keys: tuple[str, ...]) -> int | None:
    for key in keys:
        value = cfg.get(key) if isinstance(cfg, Mapping) else getattr(cfg, key, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def config_heads(cfg: Any, source: str) -> Heads:
    """Heads from a Hugging Face config (a PretrainedConfig, or config.json as a dict)."""
    if cfg is None:
        return Heads()
    text = getattr(cfg, "text_config", None) if not isinstance(cfg, Mapping) else cfg.get("text_config")
    q = _first_int(cfg, _Q_KEYS)
    if q is None and text is not None:  # multimodal configs keep the language model's inside
        return config_heads(text, source)
    return Heads(q, _first_int(cfg, _KV_KEYS), _first_int(cfg, _DIM_KEYS), source)


def module_heads(block: Any, fallback: Heads) -> Heads:
    """Heads of one attention module from its own attributes or config, else `fallback`."""
    own = config_heads(block, "the attention module")
    if own.q is None and getattr(block, "config", None) is not None:
        own = config_heads(block.config, "the attention module's config")
    if own.q is None:
        return fallback
    return Heads(own.q, own.kv or fallback.kv, own.dim or fallback.dim, own.source)
