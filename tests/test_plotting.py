"""Tests for condlab.plotting: paper figures built from arrays, saved atomically, no pyplot state."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import numpy as np
import pytest
from matplotlib import _pylab_helpers
from matplotlib.figure import Figure
from matplotlib.image import AxesImage

import condlab.plotting as cp
from condlab.analysis._cosine import cosine_matrix
from condlab.plotting import (
    cosine_heatmap,
    cosine_panels,
    direction_field_plot,
    loss_plot,
    polyfit_plot,
    save_figure,
    trajectories_plot,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


@pytest.fixture
def W(rng: np.random.Generator) -> np.ndarray:
    """12 neurons, 3 inputs + bias, condensed on two lines, neurons 3 and 7 all zero."""
    dirs = rng.normal(size=(2, 4))
    W = dirs[np.arange(12) % 2] * rng.choice([-1.0, 1.0], size=(12, 1)) + 0.05 * rng.normal(size=(12, 4))
    W[[3, 7]] = 0.0
    return W


def _close(fig: Figure) -> None:
    """Figures are not pyplot-managed: clearing them and dropping the reference frees them."""
    fig.clear()


def _image(fig: Figure) -> AxesImage:
    images = [im for ax in fig.axes for im in ax.get_images()]
    assert len(images) == 1
    return images[0]


def _check_saved(paths: list[Path]) -> None:
    assert [p.suffix for p in paths] == [".png", ".svg"]
    png, svg = paths
    assert png.read_bytes()[:8] == PNG_MAGIC
    text = svg.read_text()
    assert text.lstrip().startswith("<?xml") and "<svg" in text


def _all_figures(rng: np.random.Generator, W: np.ndarray) -> dict[str, Figure]:
    s = np.linspace(-1, 1, 9)
    Wg, Bg = np.meshgrid(s, s)
    x = np.linspace(-1, 1.5, 50)
    theta = rng.uniform(-np.pi, np.pi, size=(20, 5))
    return {
        "heatmap": cosine_heatmap(W, title="tanh(x)"),
        "panels": cosine_panels([("tanh(x)", W, None), ("x tanh(x)", W, np.arange(12)[::-1])]),
        "field": direction_field_plot(
            Wg, Bg, -Bg, Wg, weights=rng.normal(size=(6, 2)) * 0.5,
            velocities=rng.normal(size=(6, 2)), stable_lines=np.array([[1.0, 0.0]]), title="x tanh(x)",
        ),
        "polyfit": polyfit_plot(x, x**2, [(2, np.array([0.0, 0.0, 1.0]), 1.0)], x_train=x, y_train=x**2),
        "loss": loss_plot(np.linspace(1, 0.1, 30), initial_stage_epoch=5, snapshot_epoch=10),
        "trajectories": trajectories_plot(np.arange(20), theta, np.exp(rng.normal(size=(20, 5)))),
    }


def test_public_api() -> None:
    assert sorted(cp.__all__) == sorted(
        ["analysis_figures", "cosine_heatmap", "cosine_panels", "direction_field_plot", "polyfit_plot",
         "loss_plot", "panel_row",
         "trajectories_plot", "save_figure"]
    )


def test_every_figure_is_saved_as_png_and_svg(tmp_path: Path, rng, W) -> None:
    for name, fig in _all_figures(rng, W).items():
        assert isinstance(fig, Figure)
        paths = save_figure(fig, tmp_path / name)
        assert paths == [tmp_path / f"{name}.png", tmp_path / f"{name}.svg"]
        _check_saved(paths)
        _close(fig)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        f"{n}.{ext}" for n in ("heatmap", "panels", "field", "polyfit", "loss", "trajectories")
        for ext in ("png", "svg")
    )


def test_no_pyplot_figures_and_figures_are_freed(rng, W) -> None:
    before = _pylab_helpers.Gcf.get_num_fig_managers()
    refs = [weakref.ref(fig) for fig in _all_figures(rng, W).values()]
    assert _pylab_helpers.Gcf.get_num_fig_managers() == before
    gc.collect()
    assert all(r() is None for r in refs), "a figure is kept alive by global state"


def test_heatmap_shows_the_permuted_cosine_matrix(W) -> None:
    order = np.array([5, 0, 11, 3, 1, 2, 4, 6, 7, 8, 9, 10])
    fig = cosine_heatmap(W, order)
    im = _image(fig)
    shown = np.ma.filled(np.ma.asarray(im.get_array(), dtype=float), np.nan)
    # rows are gathered before the product, so BLAS may round the last bit differently
    np.testing.assert_allclose(shown, cosine_matrix(W)[np.ix_(order, order)], rtol=0, atol=1e-15)
    assert im.get_clim() == (-1.0, 1.0)
    assert fig.axes[0].get_xlabel() == "neuron index" and fig.axes[0].get_ylabel() == "neuron index"
    assert len(fig.axes) == 2  # the heat map and its colour bar
    _close(fig)


def test_heatmap_zero_neurons_are_nan_rows_and_columns(W) -> None:
    fig = cosine_heatmap(W)  # identity order
    shown = np.ma.filled(np.ma.asarray(_image(fig).get_array(), dtype=float), np.nan)
    nan_rows = np.flatnonzero(np.all(np.isnan(shown), axis=1))
    np.testing.assert_array_equal(nan_rows, [3, 7])
    np.testing.assert_array_equal(np.flatnonzero(np.all(np.isnan(shown), axis=0)), [3, 7])
    assert not np.isnan(np.delete(np.delete(shown, [3, 7], 0), [3, 7], 1)).any()
    _close(fig)


def test_heatmap_colour_range_is_fixed_even_for_one_direction(rng) -> None:
    W = np.outer(rng.uniform(1, 2, 6), [1.0, 2.0, -0.5])  # all D = +1
    fig = cosine_heatmap(W)
    assert _image(fig).get_clim() == (-1.0, 1.0)
    cmap = _image(fig).get_cmap()
    assert np.linalg.norm(np.subtract(cmap(1.0), cmap(0.0))) > 0.5  # +1 and -1 clearly distinct
    _close(fig)


def test_heatmap_draws_into_given_axes(W) -> None:
    fig = Figure()
    ax = fig.add_subplot(1, 2, 2)
    assert cosine_heatmap(W, ax=ax, title="layer 1") is fig
    assert ax.get_title() == "layer 1" and ax.get_images()
    _close(fig)


@pytest.mark.parametrize("order", [np.arange(11), np.array([0] * 12), np.arange(12) + 0.0])
def test_heatmap_rejects_bad_orders(W, order) -> None:
    with pytest.raises(ValueError, match="order"):
        cosine_heatmap(W, order)


def test_panels_subcaptions_and_one_colourbar(W) -> None:
    panels = [(name, W, None) for name in ("tanh(x)", "x tanh(x)", "sigmoid(x)")]
    fig = cosine_panels(panels, suptitle="epoch 100")
    images = [ax for ax in fig.axes if ax.get_images()]
    assert [ax.get_title() for ax in images] == ["(a) tanh(x)", "(b) x tanh(x)", "(c) sigmoid(x)"]
    assert len(fig.axes) == 4  # three panels + one shared colour bar
    assert all(ax.get_images()[0].get_clim() == (-1.0, 1.0) for ax in images)
    _close(fig)


def test_panels_wrap_into_rows(W) -> None:
    fig = cosine_panels([(str(i), W, None) for i in range(5)], ncols=3)
    visible = [ax for ax in fig.axes if ax.get_visible() and ax.get_images()]
    assert len(visible) == 5
    _close(fig)
    with pytest.raises(ValueError):
        cosine_panels([])


def test_direction_field_arrows_are_normalized(rng) -> None:
    s = np.linspace(-1, 1, 7)
    Wg, Bg = np.meshgrid(s, s)
    dW, dB = 5 * Wg, 0.1 * Bg  # very different magnitudes, a zero at the origin
    fig = direction_field_plot(Wg, Bg, dW, dB, stable_lines=np.array([[0.0, 2.0]]))
    ax = fig.axes[0]
    q = ax.collections[0]
    assert np.flatnonzero(q.Umask).tolist() == [24]  # the zero vector at the origin is left out
    np.testing.assert_allclose(np.hypot(q.U, q.V)[~q.Umask], 1.0)
    assert ax.get_xlabel() == "w" and ax.get_ylabel() == "b"
    assert ax.get_aspect() == 1.0
    line = ax.get_lines()[0].get_xydata()
    assert np.allclose(line[:, 0], 0.0) and line[0, 1] < -1 and line[1, 1] > 1  # spans the view
    _close(fig)


def test_direction_field_neurons_and_velocity_arrows(rng) -> None:
    s = np.linspace(-1, 1, 5)
    Wg, Bg = np.meshgrid(s, s)
    weights = rng.normal(size=(4, 2)) * 0.3
    fig = direction_field_plot(Wg, Bg, Wg, Bg, weights=weights, velocities=3 * rng.normal(size=(4, 2)))
    ax = fig.axes[0]
    dots = [ln for ln in ax.get_lines() if ln.get_label() == "neuron (w, b)"]
    np.testing.assert_allclose(dots[0].get_xydata(), weights)
    arrows = ax.collections[1]
    np.testing.assert_allclose(np.hypot(arrows.U, arrows.V), 1.0)
    legend_texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend_texts == ["neuron (w, b)", "velocity direction"]
    _close(fig)
    with pytest.raises(ValueError):
        direction_field_plot(Wg, Bg, Wg[:-1], Bg)


def test_polyfit_legend_shows_r2() -> None:
    x = np.linspace(-1, 1.5, 40)
    y = 0.3 * x**2 + 0.1
    fits = [(1, np.array([0.2, 0.05]), 0.41234), (2, np.array([0.1, 0.0, 0.3]), 0.99999996)]
    y_col = y[::-1].reshape(-1, 1)  # unsorted, one column: both accepted
    fig = polyfit_plot(x[::-1], y_col, fits, x_train=x[::4], y_train=y[::4], title="x tanh(x)")
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert texts == ["network output", "training data", "degree 1, R² = 0.4123", "degree 2, R² > 0.9999"]
    ax = fig.axes[0]
    net, data, fit1, fit2 = ax.get_lines()
    assert np.all(np.diff(net.get_xdata()) > 0)  # sorted for drawing
    np.testing.assert_allclose(fit2.get_ydata(), 0.1 + 0.3 * np.sort(x) ** 2)
    assert fit1.get_linestyle() == "--" and fit1.get_color() == "tab:red"
    _close(fig)


def test_polyfit_accepts_polyfit_objects() -> None:
    from condlab.analysis._fields import polynomial_fits

    x = np.linspace(-1, 1, 30)
    fig = polyfit_plot(x, x**3 - x, polynomial_fits(x, x**3 - x, 3))
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert texts[-1] == "degree 3, R² = 1.0000"
    _close(fig)


def test_loss_plot_with_nan_tail(tmp_path: Path) -> None:
    loss = np.linspace(2.0, 0.5, 50)
    loss[30:] = np.nan
    loss[20] = np.inf
    fig = loss_plot(loss, initial_stage_epoch=12, snapshot_epoch=40, title="tanh")
    ax = fig.axes[0]
    assert ax.get_yscale() == "log"
    curve = ax.get_lines()[0].get_ydata()
    assert np.isnan(curve[30:]).all() and np.isnan(curve[20])
    hline, vline = ax.get_lines()[1:3]
    assert hline.get_ydata()[0] == pytest.approx(0.7 * 2.0) and hline.get_linestyle() == ":"
    assert vline.get_xdata()[0] == 12
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "initial stage end (loss = 70% of initial)" in texts and "snapshot (epoch 40)" in texts
    _check_saved(save_figure(fig, tmp_path / "loss"))
    _close(fig)


def test_loss_plot_all_nan_and_minimal() -> None:
    for loss in (np.full(5, np.nan), np.array([1.0])):
        fig = loss_plot(loss)
        fig.canvas.draw()  # rendering must not warn either
        _close(fig)


def test_trajectories_break_at_wraps_and_label_amplitude() -> None:
    t = np.arange(4)
    theta = np.array([[3.0, 0.1], [-3.0, 0.2], [-2.9, 0.3], [-2.8, 0.4]])  # neuron 0 wraps past π
    amp = np.array([[1e-3, 1e-3], [1e-2, 2e-3], [1e-1, 0.0], [1.0, 4e-3]])
    fig = trajectories_plot(t, theta, amp, title="tanh")
    ax_t, ax_a = fig.axes[:2]
    paths = {len(p.vertices): p for p in ax_t.collections[0].get_paths()}
    assert sorted(paths) == [4, 5]  # one NaN gap inserted for the wrapping neuron
    assert np.isnan(paths[5].vertices[1]).all()
    assert ax_a.get_yscale() == "log" and ax_a.get_ylabel() == "amplitude ‖(w, b)‖"
    assert ax_t.get_ylim()[0] < -np.pi and ax_t.get_ylim()[1] > np.pi
    fig.canvas.draw()
    _close(fig)
    with pytest.raises(ValueError):
        trajectories_plot(np.arange(3), theta, amp)


def test_save_figure_is_atomic_and_tidy(tmp_path: Path, W, monkeypatch) -> None:
    fig = cosine_heatmap(W)
    out = tmp_path / "sub" / "dir"
    paths = save_figure(fig, out / "fig3.v2", formats=("png",))
    assert paths == [out / "fig3.v2.png"]
    assert save_figure(fig, out / "again.png") == [out / "again.png", out / "again.svg"]
    assert sorted(p.name for p in out.iterdir()) == ["again.png", "again.svg", "fig3.v2.png"]

    old = (out / "again.png").read_bytes()

    def boom(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(fig, "savefig", boom)
    with pytest.raises(RuntimeError):
        save_figure(fig, out / "again")
    assert (out / "again.png").read_bytes() == old  # the old file is untouched
    assert sorted(p.name for p in out.iterdir()) == ["again.png", "again.svg", "fig3.v2.png"]
    _close(fig)


def test_svg_is_reproducible(tmp_path: Path, W) -> None:
    """The same data give the same SVG bytes: no date, fixed element ids."""
    contents = []
    for name in ("a", "b"):
        fig = cosine_heatmap(W, title="tanh(x)")
        contents.append(save_figure(fig, tmp_path / name, formats=("svg",))[0].read_bytes())
        _close(fig)
    assert contents[0] == contents[1]


def test_rcparams_are_restored(W) -> None:
    import matplotlib as mpl

    before = dict(mpl.rcParams)
    _close(cosine_heatmap(W))
    assert dict(mpl.rcParams) == before


def _two_lines(m: int = 40, k: int = 6, seed: int = 0) -> np.ndarray:
    """m rows alternating between two lines (random signs and amplitudes, 1 % noise, as trained
    weights have): index order mixes them."""
    g = np.random.default_rng(seed)
    u = g.standard_normal((2, k))
    rows = u[np.arange(m) % 2] * g.choice([-1, 1], (m, 1)) * g.uniform(0.5, 1, (m, 1))
    return rows + 0.01 * g.standard_normal((m, k))


def test_condlab_plot_orders_rows_by_the_count_and_frames_each_line() -> None:
    from matplotlib.patches import Rectangle

    import condlab

    W = _two_lines()
    fig = condlab.plot(W)
    assert isinstance(fig, Figure) and "2 lines" in fig.axes[0].get_title()
    D = fig.axes[0].images[0].get_array()
    # ordered: each line is one block of |D| = 1 (index order alternates the two lines)
    assert (np.abs(D[:20, :20]) > 0.99).all() and (np.abs(D[20:, 20:]) > 0.99).all()
    frames = [p for p in fig.axes[0].patches if isinstance(p, Rectangle)]
    assert [(f.get_x(), f.get_width()) for f in frames] == [(-0.5, 20), (19.5, 20)]
    with pytest.raises(ValueError, match="epoch= is for a run"):
        condlab.plot(W, epoch=3)


def test_condlab_plot_of_a_model_and_of_a_run(tmp_path: Path) -> None:
    import torch
    from torch import nn

    import condlab

    model = nn.Sequential(nn.Linear(5, 40), nn.Tanh(), nn.Linear(40, 3))
    with torch.no_grad():
        model[0].weight.copy_(torch.as_tensor(_two_lines()[:, :5]))
        model[0].bias.copy_(torch.as_tensor(_two_lines()[:, 5]))
    fig = condlab.plot(model)
    assert "0: 2 lines" in fig.axes[0].get_title() and fig.axes[1].get_title().startswith("(b) 2:")
    tracker = condlab.Tracker(model, every=1, out=tmp_path / "run", snapshots=True)
    tracker.step(0, 1.0)
    tracker.close()
    fig = condlab.plot(tmp_path / "run", epoch=1, layers="0")
    assert "2 lines" in fig.axes[0].get_title() and "step 1" in fig._suptitle.get_text()
