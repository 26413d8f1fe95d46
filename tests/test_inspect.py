"""The layer adapter, condlab.inspect, safe checkpoint loading and `condlab inspect`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import condlab
from condlab._cli import main
from condlab.analysis import count_orientations
from condlab.models._inspect import effective_neurons, heatmap_matrix, heatmap_rows, inspect_model
from condlab.models._layers import extract_layers
from condlab.records._safe_load import CheckpointError, load_checkpoint
from condlab.training._cnn import make_cifar_net

torch.manual_seed(0)


def _encoder(layer_norm: bool = True) -> nn.TransformerEncoder:
    layer = nn.TransformerEncoderLayer(16, 4, 32, batch_first=True, dropout=0.0)
    return nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)


def _by_name(model) -> dict[str, torch.Tensor]:
    return {lay.name: lay.weight for lay in extract_layers(model).layers}


def test_linear_and_conv_rows_fold_the_bias() -> None:
    model = nn.Sequential(nn.Conv2d(3, 5, 3), nn.Conv1d(2, 4, 3, bias=False), nn.Linear(7, 6))
    got = _by_name(model)
    conv = model[0]
    expected = torch.cat([conv.weight.reshape(5, -1), conv.bias[:, None]], 1)
    torch.testing.assert_close(got["0"], expected.detach())
    assert got["1"].shape == (4, 6)  # no bias: no extra column
    torch.testing.assert_close(got["2"], torch.cat([model[2].weight, model[2].bias[:, None]], 1).detach())
    kinds = {lay.name: lay.kind for lay in extract_layers(model).layers}
    assert kinds == {"0": "conv2d", "1": "conv1d", "2": "linear"}


def test_attention_split_per_head_and_ffn_kinds() -> None:
    enc = _encoder()
    found = extract_layers(enc)
    got = {lay.name: lay for lay in found.layers}
    attn = enc.layers[0].self_attn
    w, b = attn.in_proj_weight.detach(), attn.in_proj_bias.detach()
    for i, c in enumerate("qkv"):
        whole = torch.cat([w[16 * i:16 * (i + 1)], b[16 * i:16 * (i + 1), None]], 1)
        torch.testing.assert_close(got[f"layers.0.self_attn.{c}"].weight, whole)
        torch.testing.assert_close(got[f"layers.0.self_attn.{c}.h2"].weight, whole[8:12])
    assert got["layers.0.self_attn.o"].kind == "attn_o"
    assert got["layers.1.linear1"].kind == "ffn_in" and got["layers.1.linear2"].kind == "ffn_out"
    assert "layers.0.self_attn.out_proj" not in got  # taken once, as .o
    skipped = {s.name: s.reason for s in found.skipped}
    assert set(skipped) == {f"layers.{i}.norm{j}" for i in (0, 1) for j in (1, 2)}
    assert all("LayerNorm" in r for r in skipped.values())


def test_state_dict_gives_the_same_whole_matrices() -> None:
    enc = _encoder()
    from_module = {n: w for n, w in _by_name(enc).items() if ".h" not in n.rsplit(".", 1)[-1]}
    found = extract_layers(enc.state_dict())
    assert {lay.name: lay.kind for lay in found.layers} == {
        lay.name: lay.kind for lay in extract_layers(enc).layers if lay.head is None}
    for lay in found.layers:
        torch.testing.assert_close(lay.weight, from_module[lay.name])
    assert any("heads unknown" in n for n in found.notes)
    per_head = extract_layers(enc.state_dict(), heads=4)
    assert "layers.1.self_attn.k.h3" in per_head.names()


def test_separate_qkv_embedding_and_unknown_modules_are_reported() -> None:
    class Odd(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.scale = nn.Parameter(torch.ones(3))

    model = nn.ModuleDict({"emb": nn.Embedding(10, 8), "attn": nn.MultiheadAttention(8, 2, kdim=5, vdim=6),
                           "odd": Odd(), "up": nn.ConvTranspose2d(2, 3, 3)})
    found = extract_layers(model)
    shapes = {lay.name: lay.shape for lay in found.layers}
    assert shapes["attn.k"] == (8, 6) and shapes["attn.v"] == (8, 7) and shapes["attn.k.h1"] == (4, 6)
    reasons = {s.name: s.reason for s in found.skipped}
    assert set(reasons) == {"emb", "odd", "up"}
    assert "Embedding" in reasons["emb"] and "scale" in reasons["odd"] and "ConvTranspose2d" in reasons["up"]
    sd = extract_layers(model.state_dict())
    assert {s.name for s in sd.skipped} >= {"emb", "odd"} and "attn.v" in sd.names()


def test_layer_pattern_selects_and_a_bad_one_names_the_layers() -> None:
    enc = _encoder()
    assert extract_layers(enc, layers="layers.1.self_attn.[qk]").names() == [
        "layers.1.self_attn.q", "layers.1.self_attn.k"]
    with pytest.raises(ValueError, match="layers.0.self_attn.q"):
        extract_layers(enc, layers="nothing*")
    with pytest.raises(ValueError, match="nn.Module or a state_dict"):
        extract_layers([1, 2])


def _planted(m: int, k: int, lines: int, seed: int = 0) -> torch.Tensor:
    """m rows on `lines` orthogonal lines (random signs, 1 degree of noise)."""
    g = np.random.default_rng(seed)
    axes = np.eye(k)[:lines]
    rows = axes[np.arange(m) % lines] * g.choice([-1, 1], size=(m, 1)) + 0.01 * g.standard_normal((m, k))
    return torch.as_tensor(rows * g.uniform(0.5, 1.0, size=(m, 1)))


def test_inspect_table_counts_planted_lines_and_effective_neurons() -> None:
    # Claim: a layer on one line has 1 line holding every row and effective_neurons = 1;
    # two equal lines give 2; isotropic rows give no line and effective_neurons = m.
    lin1, lin2, iso = nn.Linear(9, 60, bias=False), nn.Linear(9, 60, bias=False), nn.Linear(9, 60, bias=False)
    with torch.no_grad():
        lin1.weight.copy_(_planted(60, 9, 1))
        lin2.weight.copy_(_planted(60, 9, 2))
        iso.weight.copy_(torch.randn(60, 9, generator=torch.Generator().manual_seed(1)))
    table = condlab.inspect(nn.Sequential(lin1, lin2, iso)).set_index("layer")
    assert table.loc["0", "lines"] == 1 and table.loc["0", "share_1"] == pytest.approx(1.0)
    assert table.loc["0", "effective_neurons"] == pytest.approx(1.0)
    assert table.loc["1", "lines"] == 2 and table.loc["1", "effective_neurons"] == pytest.approx(2.0)
    assert table.loc["2", "lines"] == 0 and table.loc["2", "effective_neurons"] == pytest.approx(60.0)
    assert list(table.columns[:5]) == ["kind", "rows", "cols", "lines", "directions"]


def test_effective_neurons_counts_scattered_rows_as_singletons() -> None:
    W = np.vstack([_planted(30, 6, 1).numpy(), np.random.default_rng(3).standard_normal((10, 6))])
    o = count_orientations(W)
    assert o.n_lines == 1 and len(o.scattered) == 10
    p = np.array([30] + [1] * 10) / 40
    assert effective_neurons(o) == pytest.approx(np.exp(-np.sum(p * np.log(p))))


def test_large_layer_without_square_memory_and_a_reproducible_heatmap_sample() -> None:
    W = _planted(20_000, 8, 2).numpy()
    found = extract_layers({"big.weight": torch.as_tensor(W)})
    report = inspect_model({"big.weight": torch.as_tensor(W)})
    assert report.table.loc[0, "lines"] == 2 and found.layers[0].shape == (20_000, 8)
    shown, sub = heatmap_matrix(W, report.orientations["big"])
    assert sub.shape == (512, 8) and set(shown) == set(heatmap_rows(20_000))
    np.testing.assert_array_equal(heatmap_rows(20_000), heatmap_rows(20_000))


class _Evil:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.makedirs, (str(self.marker),))


def test_a_checkpoint_whose_unpickling_runs_code_is_refused_and_the_code_does_not_run(
        tmp_path: Path, capsys) -> None:
    marker = tmp_path / "code-ran"
    path = tmp_path / "evil.pt"
    torch.save({"fc.weight": torch.zeros(2, 2), "payload": _Evil(marker)}, path)
    with pytest.raises(CheckpointError, match="--unsafe-pickle"):
        load_checkpoint(path)
    assert main(["inspect", str(path)]) == 2
    assert "unpickling runs code" in capsys.readouterr().err
    assert not marker.exists()


def test_corrupt_truncated_and_foreign_files_give_one_message(tmp_path: Path, capsys) -> None:
    good = tmp_path / "good.pt"
    torch.save(nn.Linear(3, 2).state_dict(), good)
    data = good.read_bytes()
    (tmp_path / "trunc.pt").write_bytes(data[: len(data) // 2])
    (tmp_path / "text.pt").write_text("not a checkpoint\n")
    torch.save([1, 2, 3], tmp_path / "list.pt")
    for name in ("trunc.pt", "text.pt", "list.pt", "missing.pt"):
        assert main(["inspect", str(tmp_path / name)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("condlab: error:") and name in err and "\n" not in err


def test_nested_training_checkpoint_is_unwrapped(tmp_path: Path) -> None:
    lin = nn.Linear(3, 2)
    torch.save({"epoch": 4, "model_state_dict": lin.state_dict(), "optimizer": {}}, tmp_path / "c.pt")
    assert set(load_checkpoint(tmp_path / "c.pt")) == {"weight", "bias"}


def test_cli_on_a_cnn_state_dict_and_a_pickled_transformer(tmp_path: Path, capsys) -> None:
    net = make_cifar_net("tanh", width=32, channels=(4, 4, 8, 8), seed=0)
    torch.save(net.state_dict(), tmp_path / "cnn.pt")
    assert main(["inspect", str(tmp_path / "cnn.pt"), "--out", str(tmp_path / "o")]) == 0
    text = capsys.readouterr().out
    assert "head.fc1" in text and "conv.blocks.7.conv2" in text and "skipped conv.stem.1" in text
    saved = json.loads((tmp_path / "o" / "inspect.json").read_text())
    assert len(saved["layers"]) == 23 and (tmp_path / "o" / "cosine_head.fc1.png").is_file()
    assert (tmp_path / "o" / "inspect.csv").read_text().startswith("layer,kind,rows,cols,lines")
    assert main(["inspect", str(tmp_path / "cnn.pt"), "--out", str(tmp_path / "o")]) == 0  # same: again
    assert main(["inspect", str(tmp_path / "cnn.pt"), "--heads", "2", "--out", str(tmp_path / "o")]) == 2

    torch.save(net, tmp_path / "cnn_module.pt")  # a pickled whole module: only with the flag
    assert main(["inspect", str(tmp_path / "cnn_module.pt")]) == 2
    assert main(["inspect", str(tmp_path / "cnn_module.pt"), "--unsafe-pickle", "--layer", "head.*"]) == 0
    assert "head.fc2" in capsys.readouterr().out

    torch.save(_encoder().state_dict(), tmp_path / "enc_sd.pt")
    assert main(["inspect", str(tmp_path / "enc_sd.pt"), "--heads", "4"]) == 0
    assert "layers.1.self_attn.v.h3" in capsys.readouterr().out
    torch.save(_encoder(), tmp_path / "enc.pt")
    assert main(["inspect", str(tmp_path / "enc.pt")]) == 2
    capsys.readouterr()
    assert main(["inspect", str(tmp_path / "enc.pt"), "--unsafe-pickle", "--json",
                 "--layer", "layers.0.self_attn.*"]) == 0
    rows = json.loads(capsys.readouterr().out)["layers"]
    assert [r["layer"] for r in rows][:2] == ["layers.0.self_attn.q", "layers.0.self_attn.q.h0"]


@pytest.mark.experiment
def test_fig2_counts_through_the_adapter_match_inspect_on_its_checkpoint(tmp_path: Path, capsys) -> None:
    from condlab.reproduce import reproduce
    from condlab.training._datasets import write_cifar10

    g = np.random.default_rng(0)
    images = g.integers(0, 256, (12, 3, 32, 32), dtype=np.uint8)
    write_cifar10(tmp_path / "data", images, g.integers(0, 10, 12))
    result = reproduce("fig2", seeds=[0], quick=True, out=tmp_path / "out", data_dir=tmp_path / "data")
    measured = {c.id.split("/")[1]: c.measured["lines"][0] for c in result.claims}
    assert len(measured) == 4
    for act, lines in measured.items():
        path = tmp_path / "out" / "fig2" / "checkpoints" / f"head_{act}_seed0.pt"
        assert main(["inspect", str(path), "--layer", "fc1", "--json"]) == 0
        (row,) = json.loads(capsys.readouterr().out)["layers"]
        assert row["layer"] == "fc1" and row["lines"] == lines
