"""The README's Python example runs as written (docs that drift from the code fail here)."""

import re
from pathlib import Path


def test_readme_python_example_runs(tmp_path, monkeypatch):
    text = (Path(__file__).parents[1] / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "README has no python example"
    monkeypatch.chdir(tmp_path)
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})
    assert (tmp_path / "runs" / "fig3" / "seed0" / "meta.json").is_file()
