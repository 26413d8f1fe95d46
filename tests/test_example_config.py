"""examples/train.yaml, the commented config the README uses, trains as written."""

import json
from pathlib import Path

from condlab import Config
from condlab._cli import main

EXAMPLE = Path(__file__).parents[1] / "examples" / "train.yaml"


def test_example_config_is_valid_and_documents_every_section():
    cfg = Config.from_file(EXAMPLE)
    assert cfg.name == "example"
    text = EXAMPLE.read_text()
    assert text.count("#") > 10  # a commented file, not a bare dump
    for section in ("data:", "model:", "train:"):
        assert section in text


def test_example_config_trains_as_the_readme_says(tmp_path, capsys):
    out = tmp_path / "ex"
    assert main(["train", str(EXAMPLE), "--out", str(out), "--no-progress"]) == 0
    batch = json.loads((out / "batch.json").read_text())
    assert [r["dir"] for r in batch["runs"]] == ["seed0", "seed1"]
    assert all(r["status"] == "complete" for r in batch["runs"])
    assert "2 runs trained as one batch" in capsys.readouterr().out
