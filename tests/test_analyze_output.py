"""Where `condlab analyze` writes: keyed by its options, nothing with --json --no-figures,
and a run it cannot write to is analysed all the same."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import condlab
from condlab._cli import main


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    cfg = condlab.preset("fig3").with_overrides(["train.epochs=30", "train.snapshots=every:10"])
    return condlab.train(cfg, out=tmp_path_factory.mktemp("a") / "b", progress=False)[0].path


def _tree(path: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(path)): (p.stat().st_size, p.stat().st_mtime_ns) for p in path.rglob("*")}


def test_analyses_with_other_options_never_replace_each_other(run_dir, capsys):
    base = ["analyze", str(run_dir), "--epoch", "30", "--no-figures", "--no-replay"]
    assert main(base) == 0
    first = run_dir / "analysis" / "epoch30-noreplay" / "analysis.json"
    kept = first.read_bytes()
    assert main([*base, "--penalty", "2", "--min-share", "0.1", "--layer", "1"]) == 0
    other = run_dir / "analysis" / "epoch30-share0.1-pen2-layers1-noreplay" / "analysis.json"
    assert first.read_bytes() == kept
    options = json.loads(other.read_text())["options"]
    assert options["count_kwargs"] == {"penalty": 2.0, "min_share": 0.1} and options["layers"] == [0]
    assert main([*base, "--penalty", "1.5"]) == 0       # the default value: the same analysis
    assert sorted(p.name for p in (run_dir / "analysis").iterdir()) == [
        "epoch30-noreplay", "epoch30-share0.1-pen2-layers1-noreplay"]
    assert "written: " + str(first) in capsys.readouterr().out


def test_json_without_figures_writes_nothing(run_dir, capsys):
    before = _tree(run_dir)
    assert main(["analyze", str(run_dir), "--epoch", "20", "--json", "--no-figures", "--no-replay"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["out"] is None and printed["epoch"] == 20 and printed["layers"][0]["lines"] >= 0
    assert _tree(run_dir) == before


def test_figures_are_png_unless_svg_is_asked_for(run_dir, tmp_path, capsys):
    assert main(["analyze", str(run_dir), "--epoch", "30", "--no-replay", "--out", str(tmp_path / "o")]) == 0
    out = tmp_path / "o" / run_dir.name / "epoch30-noreplay"
    assert {p.suffix for p in out.iterdir()} == {".png", ".json", ".npz"}
    assert main(["analyze", str(run_dir), "--epoch", "30", "--no-replay", "--svg", "--no-replay",
                 "--out", str(tmp_path / "o")]) == 0
    assert {p.suffix for p in out.iterdir()} == {".png", ".svg", ".json", ".npz"}


def test_a_run_that_cannot_be_written_is_analysed_into_the_current_folder(run_dir, tmp_path, monkeypatch,
                                                                          capsys):
    """The decision, made observable in-process (root writes through chmod): when the run folder
    refuses files, the analysis goes to ./condlab-analysis/BATCH/RUN/NAME and stderr says so."""
    import condlab._cli_records as cli

    real = cli._can_write
    monkeypatch.setattr(cli, "_can_write", lambda d: False if run_dir in d.parents else real(d))
    monkeypatch.chdir(tmp_path)
    before = _tree(run_dir)
    assert main(["analyze", str(run_dir), "--epoch", "10", "--no-figures", "--no-replay"]) == 0
    expected = Path("condlab-analysis") / run_dir.parent.name / run_dir.name / "epoch10-noreplay"
    assert f"is not writable; the analysis goes to '{expected}'" in capsys.readouterr().err
    assert (tmp_path / expected / "analysis.json").is_file() and _tree(run_dir) == before


def _nobody() -> list[str]:
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to run the CLI as user nobody (a run it cannot write to)")
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def test_a_read_only_run_analysed_as_another_user(run_dir):
    """For real: user nobody analyses a run owned by root (mode 755), as a lab member would."""
    prefix = _nobody()
    root = Path(tempfile.mkdtemp(prefix="condlab-ro-"))
    try:
        os.chmod(root, 0o755)
        run = root / "b" / "seed0"
        shutil.copytree(run_dir, run, ignore=shutil.ignore_patterns("analysis"))
        work = root / "work"
        work.mkdir()
        os.chmod(work, 0o777)
        env = {**os.environ, "HOME": str(work), "MPLCONFIGDIR": str(work / "mpl"),
               "PYTHONPATH": os.pathsep.join(sys.path), "OMP_NUM_THREADS": "1"}
        before = _tree(run)
        # one interpreter for both commands (importing torch twice as nobody doubles the cost)
        script = ("import sys; from condlab._cli import main; a = sys.argv[1:]; "
                  "print('rc', main(a + ['--json', '--no-figures']), flush=True); "
                  "print('==', flush=True); print('rc', main(a + ['--no-figures']))")
        cmd = [*prefix, sys.executable, "-c", script, "analyze", str(run), "--epoch", "30", "--no-replay"]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=work, timeout=300)
        quiet, loud = proc.stdout.split("\n==\n")
        assert proc.returncode == 0 and "rc 0" in quiet and "rc 0" in loud, proc.stderr
        assert json.loads(quiet.rsplit("rc", 1)[0])["out"] is None
        where = "condlab-analysis/b/seed0/epoch30-noreplay"
        assert f"is not writable; the analysis goes to '{where}'" in proc.stderr
        assert (work / where / "analysis.json").is_file()
        assert _tree(run) == before
    finally:
        shutil.rmtree(root, ignore_errors=True)
