"""The layer adapter on real architectures (Hugging Face GPT-2, BERT, LLaMA, ViT, ResNet), each
built from its config with random weights (nothing is downloaded), as a module, a safetensors
file and a save_pretrained folder.

Claim of the planted tests: rows of ONE attention head set onto two lines (random signs and
amplitudes, bias on the same lines) are found in that head's row (2 lines, every row condensed)
and in no other head's; read along the wrong axis (a Conv1D's rows instead of its columns) or
from the wrong rows, the head would show no line. Tolerance: exact counts (the planted lines are
exact, the other heads are Gaussian rows in 65 dimensions).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

import condlab
from condlab._cli import main
from condlab.models._layers import extract_layers

os.environ["HF_HUB_OFFLINE"] = "1"  # building from a config never needs the hub; make sure
transformers = pytest.importorskip("transformers")
safetensors_torch = pytest.importorskip("safetensors.torch")
transformers.logging.set_verbosity_error()

E, H, D = 64, 4, 16  # hidden size, heads, head size


def _gpt2():
    cfg = transformers.GPT2Config(n_embd=E, n_layer=2, n_head=H, vocab_size=50, n_positions=16,
                                  bos_token_id=0, eos_token_id=0)
    return transformers.GPT2Model(cfg)


def _bert():
    cfg = transformers.BertConfig(hidden_size=E, num_hidden_layers=2, num_attention_heads=H,
                                  intermediate_size=2 * E, vocab_size=50, max_position_embeddings=16)
    return transformers.BertModel(cfg)


def _llama():
    cfg = transformers.LlamaConfig(hidden_size=E, num_hidden_layers=2, num_attention_heads=H,
                                   num_key_value_heads=2, intermediate_size=2 * E, vocab_size=50,
                                   bos_token_id=0, eos_token_id=0)
    return transformers.LlamaForCausalLM(cfg)


def _lines(n: int, k: int, seed: int = 0) -> np.ndarray:
    """n rows on 2 lines in R^k: ±a·u_1 or ±a·u_2, a in [0.5, 1]."""
    g = np.random.default_rng(seed)
    u = g.standard_normal((2, k))
    return u[np.arange(n) % 2] * g.choice([-1, 1], (n, 1)) * g.uniform(0.5, 1, (n, 1))


def _plant(weight: torch.Tensor, bias: torch.Tensor | None, rows: slice, columns: bool = False) -> None:
    """Set the neurons `rows` of a layer (its columns for (in, out) weights) onto two lines."""
    k = weight.shape[0 if columns else 1] + (bias is not None)
    planted = torch.as_tensor(_lines(rows.stop - rows.start, k), dtype=weight.dtype)
    with torch.no_grad():
        w = weight.T if columns else weight
        w[rows] = planted[:, :w.shape[1]]
        if bias is not None:
            bias[rows] = planted[:, -1]


# model, where the planted head is, the layer-name prefix of the row we expect it in
CASES = {
    # GPT-2: Conv1D (in, out); Q of head 2 = output features 2·16.. of c_attn = its columns
    "gpt2": (_gpt2, lambda m: _plant(m.h[1].attn.c_attn.weight, m.h[1].attn.c_attn.bias, slice(32, 48), True),
             "h.1.attn.c_attn.q", 2),
    "bert": (_bert, lambda m: _plant(m.encoder.layer[0].attention.self.query.weight,
                                     m.encoder.layer[0].attention.self.query.bias, slice(16, 32)),
             "encoder.layer.0.attention.self.query", 1),
    # LLaMA: grouped-query attention, 2 key/value heads of 16 rows: key head 1 = rows 16..31
    "llama": (_llama, lambda m: _plant(m.model.layers[1].self_attn.k_proj.weight, None, slice(16, 32)),
              "model.layers.1.self_attn.k_proj", 1),
}


def _head_rows(table, base: str):
    rows = table[table["layer"].str.fullmatch(rf"{base}\.h\d+")].set_index("layer")
    return rows


def _check_planted(table, base: str, head: int, heads: int) -> None:
    rows = _head_rows(table, base)
    assert len(rows) == heads
    planted = rows.loc[f"{base}.h{head}"]
    assert planted["lines"] == 2 and planted["condensed_share"] == pytest.approx(1.0)
    others = rows.drop(index=f"{base}.h{head}")
    assert (others["lines"] == 0).all(), others[["lines", "condensed_share"]]


@pytest.mark.parametrize("name", list(CASES))
def test_a_planted_head_is_found_in_its_row_from_module_file_and_folder(name: str, tmp_path: Path) -> None:
    build, plant, base, head = CASES[name]
    torch.manual_seed(0)
    model = build()
    plant(model)
    heads = 2 if name == "llama" else H  # LLaMA's planted head is a key/value head: 2 of them
    _check_planted(condlab.inspect(model), base, head, heads)

    model.save_pretrained(tmp_path / "folder")
    assert (tmp_path / "folder" / "config.json").is_file()
    _check_planted(condlab.inspect(tmp_path / "folder"), base, head, heads)

    model.save_pretrained(tmp_path / "sharded", max_shard_size="20KB")
    assert list((tmp_path / "sharded").glob("model-0000*-of-*.safetensors"))
    assert main(["inspect", str(tmp_path / "sharded"), "--json", "--layer", f"{base}*"]) == 0

    bare = tmp_path / "bare" / "weights.safetensors"  # no config.json beside it: heads unknown
    bare.parent.mkdir()
    safetensors_torch.save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(bare))
    table = condlab.inspect(bare)
    whole = table.set_index("layer").loc[base]
    assert whole["lines"] == 2 and "heads unknown" in whole["note"]
    assert _head_rows(table, base).empty
    _check_planted(condlab.inspect(bare, heads=H), base, head, heads)


def test_gpt2_conv1d_is_read_along_its_columns_and_its_rows_match_the_module(tmp_path: Path, capsys) -> None:
    torch.manual_seed(0)
    model = _gpt2()
    found = {lay.name: lay for lay in extract_layers(model).layers}
    attn = model.h[0].attn
    w, b = attn.c_attn.weight.detach(), attn.c_attn.bias.detach()
    expected = torch.cat([w[:, E:2 * E].T, b[E:2 * E, None]], 1)  # K = output features E..2E-1
    torch.testing.assert_close(found["h.0.attn.c_attn.k"].weight, expected)
    assert found["h.0.attn.c_proj"].shape == (E, E + 1) and found["h.0.attn.c_proj"].kind == "attn_o"
    assert found["h.0.attn.c_proj.h3"].shape == (E, D)  # what each output neuron reads from head 3
    assert found["h.0.mlp.c_fc"].shape == (4 * E, E + 1) and found["h.0.mlp.c_fc"].kind == "ffn_in"
    assert found["h.0.mlp.c_proj"].shape == (E, 4 * E + 1) and found["h.0.mlp.c_proj"].kind == "ffn_out"

    safetensors_torch.save_file(model.state_dict(), str(tmp_path / "model.safetensors"))
    path = str(tmp_path / "model.safetensors")
    assert main(["inspect", path, "--layer", "h.0.attn.c_proj", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["layers"]
    assert [r["layer"] for r in rows] == ["h.0.attn.c_proj"] and rows[0]["cols"] == E + 1


def test_llama_grouped_heads_and_bert_kinds() -> None:
    torch.manual_seed(0)
    kinds = {lay.name: (lay.kind, lay.shape) for lay in extract_layers(_llama()).layers}
    assert kinds["model.layers.0.self_attn.q_proj.h3"] == ("attn_q", (D, E))
    assert kinds["model.layers.0.self_attn.v_proj.h1"] == ("attn_v", (D, E))
    assert "model.layers.0.self_attn.v_proj.h2" not in kinds  # 2 key/value heads
    assert kinds["model.layers.0.mlp.gate_proj"][0] == "ffn_in"
    assert kinds["model.layers.0.mlp.down_proj"][0] == "ffn_out"
    found = extract_layers(_bert())
    kinds = {lay.name: lay.kind for lay in found.layers}
    assert kinds["encoder.layer.1.attention.output.dense"] == "attn_o"
    assert kinds["encoder.layer.1.intermediate.dense"] == "ffn_in"
    assert kinds["encoder.layer.1.output.dense"] == "ffn_out"
    skipped = {s.name for s in found.skipped}
    assert skipped >= {"embeddings.word_embeddings", "encoder.layer.0.output.LayerNorm"}


def test_vit_and_resnet_from_their_configs() -> None:
    torch.manual_seed(0)
    vit = transformers.ViTModel(transformers.ViTConfig(
        hidden_size=E, num_hidden_layers=1, num_attention_heads=H, intermediate_size=2 * E, image_size=16,
        patch_size=8))
    table = condlab.inspect(vit).set_index("layer")
    q = next(n for n in table.index if n.endswith(".h0") and table.loc[n, "kind"] == "attn_q")
    assert table.loc[q, "rows"] == D
    assert table.loc["embeddings.patch_embeddings.projection", "kind"] == "conv2d"
    resnet = transformers.ResNetModel(transformers.ResNetConfig(embedding_size=8, hidden_sizes=[8, 16],
                                                                depths=[1, 1]))
    found = extract_layers(resnet)
    assert found.layers and all(lay.kind == "conv2d" for lay in found.layers)
    assert all("BatchNorm2d" in s.reason for s in found.skipped)


def test_a_layer_filter_selects_before_building_and_odd_weights_never_raise(tmp_path: Path, capsys) -> None:
    state = {"good.weight": torch.randn(6, 4), "good.bias": torch.randn(6),
             "odd.weight": torch.randn(5, 3), "odd.bias": torch.randn(7),       # fits neither axis
             "tr.weight": torch.randn(4, 9), "tr.bias": torch.randn(9)}         # stored (in, out)
    found = extract_layers(state)
    assert {lay.name: lay.shape for lay in found.layers} == {"good": (6, 5), "tr": (9, 5)}
    assert "fits neither axis" in {s.name: s.reason for s in found.skipped}["odd"]
    assert extract_layers(state, layers="good").names() == ["good"]
    safetensors_torch.save_file(state, str(tmp_path / "odd.safetensors"))
    odd = str(tmp_path / "odd.safetensors")
    assert main(["inspect", odd, "--out", str(tmp_path / "o"), "--no-figures"]) == 0
    assert "skipped odd" in capsys.readouterr().out
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    assert pd.read_parquet(tmp_path / "o" / "inspect.parquet")["layer"].tolist() == ["good", "tr"]
    (tmp_path / "empty").mkdir()
    assert main(["inspect", str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err.strip()
    assert "save_pretrained" in err and "\n" not in err


class _TimmAttention(torch.nn.Module):
    """timm's attention module as its names go (timm.layers.Attention): packed qkv (3E, E), proj."""

    def __init__(self) -> None:
        super().__init__()
        self.num_heads, self.head_dim = H, D
        self.qkv, self.proj = torch.nn.Linear(E, 3 * E), torch.nn.Linear(E, E)


class _TimmBlock(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm1, self.attn = torch.nn.LayerNorm(E), _TimmAttention()
        self.mlp = torch.nn.Module()
        self.mlp.fc1, self.mlp.fc2 = torch.nn.Linear(E, 2 * E), torch.nn.Linear(2 * E, E)


def _check_timm_vit(model: torch.nn.Module, tmp_path: Path) -> None:
    """K of head 1 in block 1 (rows E + 16 .. E + 31 of its qkv) planted: found in its row, from
    the module (heads from the attention module's num_heads) and from a safetensors file."""
    _plant(model.blocks[1].attn.qkv.weight, model.blocks[1].attn.qkv.bias, slice(E + 16, E + 32))
    _check_planted(condlab.inspect(model), "blocks.1.attn.qkv.k", 1, H)
    kinds = {lay.name: (lay.kind, lay.shape) for lay in extract_layers(model).layers}
    assert kinds["blocks.0.attn.qkv.q.h3"] == ("attn_q", (D, E + 1))
    assert kinds["blocks.0.attn.proj.h0"] == ("attn_o", (E, D))
    assert kinds["blocks.0.mlp.fc1"][0] == "ffn_in" and kinds["blocks.0.mlp.fc2"][0] == "ffn_out"
    safetensors_torch.save_file({k: v.contiguous() for k, v in model.state_dict().items()},
                                str(tmp_path / "vit.safetensors"))
    _check_planted(condlab.inspect(tmp_path / "vit.safetensors", heads=H), "blocks.1.attn.qkv.k", 1, H)


def test_a_timm_style_packed_qkv_is_split_into_heads(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = torch.nn.Module()
    model.blocks = torch.nn.Sequential(_TimmBlock(), _TimmBlock())
    _check_timm_vit(model, tmp_path)


def test_timm_vit_and_resnet(tmp_path: Path) -> None:
    """The real timm models (where timm imports: not beside the development set-up's CPU torch,
    whose torchvision fails to load; run on the GPU machine, docs/inspect.md)."""
    timm = pytest.importorskip("timm")
    from timm.models.vision_transformer import VisionTransformer

    torch.manual_seed(0)
    _check_timm_vit(VisionTransformer(img_size=16, patch_size=8, embed_dim=E, depth=2, num_heads=H,
                                      num_classes=10), tmp_path)
    resnet = timm.create_model("resnet18", pretrained=False, num_classes=10)
    found = extract_layers(resnet)
    kinds = {lay.name: lay.kind for lay in found.layers}
    assert kinds["conv1"] == "conv2d" and kinds["fc"] == "linear" and len(kinds) == 21
    assert found.skipped and all("BatchNorm2d" in s.reason for s in found.skipped)
    table = condlab.inspect(resnet, layers="layer4.*")
    assert len(table) == 5 and table["rows"].tolist() == [512] * 5
