"""Wide layers: thinned snapshots (train.snapshot_neurons) and analysis in bounded memory."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import condlab
from condlab.analysis import analyze_run
from condlab.records._snapshots import thinned_neurons

THIN = ["model.width=300", "train.epochs=60", "train.snapshots=every:10", "train.dtype=float64"]


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """The same run trained twice: every neuron recorded, and 20 of 300 recorded."""
    root = tmp_path_factory.mktemp("thin")
    cfg = condlab.preset("fig5").with_overrides(THIN)
    full = condlab.train(cfg, out=root / "full", progress=False)[0]
    thin = condlab.train(cfg.with_overrides(["train.snapshot_neurons=20"]), out=root / "thin",
                         progress=False)[0]
    return full, thin


def test_thinned_neurons_are_a_fixed_even_spread():
    np.testing.assert_array_equal(thinned_neurons(10, 4), [0, 3, 6, 9])
    assert thinned_neurons(300, 0) is None and thinned_neurons(300, 300) is None
    assert len(thinned_neurons(10**6, 1000)) == 1000


def test_thinned_record_holds_the_same_values_as_the_full_one(pair):
    full, thin = pair
    neurons = thinned_neurons(300, 20)
    for run in (thin, condlab.load_run(thin.path)):
        np.testing.assert_array_equal(run.neurons, neurons)
        np.testing.assert_array_equal(run.epochs, np.arange(0, 61, 10))
        np.testing.assert_array_equal(run.full_epochs, [0, 60])
        assert run.weights["layer1"].shape == (7, 20, 2) and run.weights["output"].shape == (7, 1, 301)
        assert run.full_weights["layer1"].shape == (2, 300, 2)
        for s, epoch in enumerate(run.epochs):
            np.testing.assert_array_equal(run.weights["layer1"][s], full.weights["layer1"][s][neurons])
            np.testing.assert_array_equal(run.layer("output", int(epoch)), full.layer("output", int(epoch)))
        np.testing.assert_array_equal(run.layer("layer1", 60), full.layer("layer1", 60))
        np.testing.assert_array_equal(run.layer("layer1", 30), full.layer("layer1", 30)[neurons])
        np.testing.assert_array_equal(run.rows("layer1", 30), neurons)
        np.testing.assert_array_equal(run.rows("layer1", 60), np.arange(300))
    files = sorted(p.name for p in (thin.path / "snapshots").iterdir())
    assert files == ["epochs.npy", "full", "layer1.npy", "neurons.npy", "output.npy"]


def test_the_network_of_a_thinned_epoch_is_refused_with_the_full_epochs(pair):
    thin = condlab.load_run(pair[1].path)
    with pytest.raises(ValueError, match="epoch 30 holds 20 of 300 neurons.*at epochs 0, 60"):
        thin.network(30)
    assert thin.network(60) is not None


def test_analysis_of_a_thinned_epoch_measures_the_recorded_neurons_and_says_so(pair):
    thin = condlab.load_run(pair[1].path)
    result = analyze_run(thin, 30, replay=True)
    report = result.layers[0]
    np.testing.assert_array_equal(report.rows, thin.neurons)
    assert report.orientations.params["m"] == 20 and "thinned snapshot: 20 of 300" in report.note
    assert "gradient@snapshot" not in report.predictions            # residual at 30 is unknown
    assert {"gradient@init", "sign@init", "replay"} <= set(report.predictions)
    assert result.polyfits == [] and "thinned snapshot" in result.notes[0]
    np.testing.assert_array_equal(result.arrays["traj_neurons"], thin.neurons)
    assert result.arrays["traj_theta"].shape == (7, 20)
    assert result.to_dict()["layers"][0]["measured_rows"] == thin.neurons.tolist()
    whole = analyze_run(thin, 60, replay=False)
    assert whole.layers[0].rows is None and whole.polyfits and not whole.notes
    assert "gradient@snapshot" in whole.layers[0].predictions


_PEAK = textwrap.dedent("""
    import resource, sys
    import condlab
    cfg = condlab.Config().with_overrides(["data.n=4", "data.d=5", "model.width=40000", "train.epochs=100",
                                           "train.snapshots=every:1", "train.dtype=float64",
                                           "train.snapshot_neurons=" + sys.argv[1]])
    condlab.train(cfg.with_overrides(["train.epochs=2"]), progress=False)  # warm up: allocator, kernels
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    condlab.train(cfg, progress=False)
    print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)
""")


def test_thinned_snapshots_are_thin_in_training_memory_too():
    """Claim: with train.snapshot_neurons = 10 the peak memory of training grows by well under half
    of what full snapshots would take (101 snapshots of 40,000 x 6 + 40,001 float64 values: 226 MB;
    thinned they are 32 MB, the output layer being kept whole), i.e. no full copy is held."""
    full_bytes = 101 * (40000 * 6 + 40001) * 8
    proc = subprocess.run([sys.executable, "-c", _PEAK, "10"], capture_output=True, text=True, check=True)
    grew = int(proc.stdout.strip().splitlines()[-1])
    assert grew < 0.4 * full_bytes, f"peak grew by {grew / 2**20:.0f} MiB"


def test_negative_snapshot_neurons_is_refused():
    with pytest.raises(condlab.ConfigError, match="train.snapshot_neurons=-1"):
        condlab.preset("fig5").with_overrides(["train.snapshot_neurons=-1"])


# --- analysis under a memory cap ----------------------------------------------------------------

_CAPPED = textwrap.dedent("""
    import resource, sys
    import condlab, condlab.analysis, condlab.plotting, condlab._cli
    from condlab._cli import main

    def status(key):
        return next(int(line.split()[1]) * 1024 for line in open("/proc/self/status")
                    if line.startswith(key))

    # RLIMIT_AS counts address space, of which torch and the imports reserve ~0.8 GiB before any
    # work: the cap is what the imports reserved plus the budget.
    budget = int(float(sys.argv[1]) * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (status("VmPeak:") + budget,) * 2)
    code = main(["analyze", sys.argv[2], "--out", sys.argv[3]])
    print("peak_rss", status("VmHWM:"))
    sys.exit(code)
""")


def _analyze_capped(run_dir, out, budget_gib: float) -> int:
    env = {"OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg", "PATH": "/usr/bin:/bin",
           "PYTHONPATH": ":".join(sys.path)}
    proc = subprocess.run([sys.executable, "-c", _CAPPED, str(budget_gib), str(run_dir), str(out)],
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return int(proc.stdout.split("peak_rss")[-1])


def _wide_run(tmp_path, width: int, epochs: int):
    cfg = condlab.preset("fig5").with_overrides([f"model.width={width}", f"train.epochs={epochs}",
                                                "train.snapshots=every:10"])
    return condlab.train(cfg, out=tmp_path / "b", progress=False)[0]


@pytest.mark.slow  # 17 s, a whole m = 20,000 analysis with figures: `make test-slow` (CI runs it)
def test_analyze_m20000_with_figures_fits_in_2_gib(tmp_path):
    """Claim: `condlab analyze` with figures at m = 2e4 runs under a 2 GiB address-space budget
    (the 0.1.0 heat map alone built a 2e4 x 2e4 float64 matrix: 3.2 GB)."""
    run = _wide_run(tmp_path, 20_000, 40)
    peak = _analyze_capped(run.path, tmp_path / "out", 2.0)
    assert peak < 2 * 2**30
    assert any((tmp_path / "out").rglob("cosine_layer1.png"))


@pytest.mark.slow
def test_analyze_m100000_with_figures_fits_in_2_gib(tmp_path):
    """Claim (issue 9): `condlab analyze` at m = 1e5 within 2 GiB."""
    run = _wide_run(tmp_path, 100_000, 60)
    assert _analyze_capped(run.path, tmp_path / "out", 2.0) < 2 * 2**30


def test_heat_map_of_many_neurons_draws_a_stated_even_sample_in_the_given_order():
    from condlab.analysis import cosine_matrix
    from condlab.plotting import cosine_heatmap

    rng = np.random.default_rng(0)
    W = rng.standard_normal((5000, 3))
    order = rng.permutation(5000)
    fig = cosine_heatmap(W, order, title="layer1")
    shown = np.asarray(fig.axes[0].get_images()[0].get_array())
    pick = order[np.linspace(0, 4999, 2000).round().astype(int)]     # every 2.5th in drawing order
    assert shown.shape == (2000, 2000)
    np.testing.assert_allclose(shown, cosine_matrix(W[pick]), rtol=0, atol=1e-15)
    assert fig.axes[0].get_title() == "layer1\n[sample: 2,000 of 5,000 neurons]"
    assert fig.axes[0].get_xlabel() == "sampled neuron"
