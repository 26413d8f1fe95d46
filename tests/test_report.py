"""`condlab report`: one self-contained page per result kind, kept light, and _repr_html_ on results.

What a page does in a browser (clicks, slider, sorting) is tested in tests/test_report_browser.py;
here: every kind is recognised and written, the page references nothing outside itself, pages of
a width-10^5 run and a 256-run sweep stay under 20 MB, results display themselves in Jupyter,
and the CLI's errors are one line with exit 2. Generation time against compute is measured by
benchmarks/bench_report.py, not here.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import condlab
from _report_results import sweep256
from condlab._cli import main
from condlab.report import detect, html_body, render_page, write_report

MAX_BYTES = 20_000_000  # issue 21: a page stays <= 20 MB for a 256-run sweep and a width-10^5 run


@pytest.fixture
def results(report_results):
    return report_results  # tests/conftest.py: built once per session, on first use


KINDS = ["run", "batch", "experiment", "collection", "sweep", "phase", "inspect", "tracker"]
# a src/href/url() that leaves the page: a scheme other than data:, or a protocol-relative //
EXTERNAL = re.compile(r"""(?:\b(?:src|href|action|poster)\s*=\s*["']?|url\(\s*["']?)\s*(?!data:|#)"""
                      r"""(?:[a-z][a-z0-9+.-]*:|//)""", re.I)


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_is_recognised_and_its_page_is_self_contained(results, kind, tmp_path):
    path = results[kind]
    assert detect(path) == kind
    out = write_report(path, tmp_path / "page.html")
    text = out.read_text()
    assert text.startswith("<!DOCTYPE html>") and "</html>" in text
    assert "default-src 'none'" in text  # the page's CSP forbids every fetch
    assert not EXTERNAL.findall(text), EXTERNAL.findall(text)[:3]
    assert "http://" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "").replace(
        "http://www.w3.org/2000/svg", "")  # SVG's namespace is a name, not a request
    assert "https://" not in text


def test_the_external_pattern_catches_what_it_should():
    # The check above is only as good as this pattern: it must flag each way a page could fetch.
    for bad in ['<img src="https://x.org/a.png">', "<script src='//cdn.x/a.js'>", '<a href="http://x">',
                "background: url(https://x/a.png)", '<img src=file:///etc/passwd>']:
        assert EXTERNAL.search(bad), bad
    for good in ['<img src="data:image/png;base64,AAAA">', '<a href="#claim-1">',
                 "url(data:image/png;base64,A)"]:
        assert not EXTERNAL.search(good), good


def test_verdict_table_has_one_row_per_claim_and_a_panel_each(results):
    import json

    claims = json.loads((results["experiment"] / "claims.json").read_text())["claims"]
    text = render_page(results["experiment"])
    links = re.findall(r"class='clr-claim' data-panel='([^']+)'", text)
    assert len(links) == len(claims) == 4
    for panel in links:
        assert f"<section class='clr-panel' id='{panel}' hidden>" in text
    # the collection: fig3's 4 claims and one NOT RUN row for fig2
    text = render_page(results["collection"])
    assert len(re.findall(r"class='clr-claim'", text)) == 4
    assert text.count("<span class='v-notrun'>NOT RUN</span>") == 1


def test_run_page_has_a_slider_frame_per_snapshot_and_the_stored_analysis(results):
    run = condlab.load_run(results["run"])
    text = render_page(results["run"])
    assert len(re.findall(r'class="clr-frame" data-epoch=', text)) == len(run.epochs)
    assert 'class="clr-slider"' in text
    assert "gradient@snapshot" in text  # the angles table, read from RUN/analysis/epoch10*/analysis.json
    assert "initial stage" in text


def test_a_second_report_replaces_the_first_but_no_other_file(results, tmp_path):
    out = tmp_path / "r.html"
    write_report(results["sweep"], out)
    first = out.read_text()
    write_report(results["sweep"], out)
    assert out.read_text() != first  # rewritten (fresh element ids)
    mine = tmp_path / "mine.html"
    mine.write_text("<html>my notes</html>")
    with pytest.raises(ValueError, match="not a condlab report"):
        write_report(results["sweep"], mine)
    assert mine.read_text() == "<html>my notes</html>"


def test_repr_html_of_run_sweep_and_reproduction(results):
    run_html = condlab.load_run(results["run"])._repr_html_()
    assert run_html.startswith('<div class="clr"') and "<script>" in run_html and "clr-frame" in run_html
    sweep_result = results["sweep_result"]
    sweep_html = sweep_result._repr_html_()
    table = sweep_html[sweep_html.index("<tbody>"):sweep_html.index("</tbody>")]
    assert table.count("<tr") == len(sweep_result.rows) == 4
    exp_html = results["experiment_result"]._repr_html_()
    assert len(re.findall(r"class='clr-claim'", exp_html)) == len(results["experiment_result"].claims)
    assert "data:image/png;base64," in exp_html  # its figure, from the folder it was written to
    assert html_body(results["phase"]).count('class="clr-tableplot"') == 1


def test_page_bodies_in_one_notebook_have_distinct_ids(results):
    ids = [set(re.findall(r'id="(clr[0-9a-f]{8})', html_body(results["run"]))) for _ in range(2)]
    assert ids[0] and ids[1] and not ids[0] & ids[1]


def test_wide_run_page_samples_rows_and_stays_light(tmp_path):
    # m = 10^5 neurons, 4 snapshots: each map shows at most 256 rows; the page <= 20 MB.
    cfg = condlab.preset("fig3").with_overrides(["model.width=100000", "data.n=8", "data.d=1",
                                                 "train.epochs=3", "train.snapshots=every:1"])
    condlab.train(cfg, out=tmp_path / "wide", progress=False)
    out = write_report(tmp_path / "wide" / "seed0", tmp_path / "wide.html")
    text = out.read_text()
    assert out.stat().st_size <= MAX_BYTES
    sizes = [int(n) for n in re.findall(r'<svg class="clr-hm" viewBox="0 0 (\d+) ', text)]
    assert sizes == [256] * 4
    assert "in a sample of 256 of 100000 rows" in text


def test_sweep_of_256_runs_stays_light(tmp_path):
    folder = sweep256(tmp_path)
    out = write_report(folder, tmp_path / "s.html")
    assert out.stat().st_size <= MAX_BYTES
    text = out.read_text()
    table = text[text.index("<tbody>"):text.index("</tbody>")]
    assert table.count("<tr") == 256


@pytest.mark.parametrize("kind", ["experiment", "run"])
def test_a_page_with_heat_maps_imports_neither_torch_nor_matplotlib(results, kind):
    # Records are read with numpy (records, training._shapes, analysis._stage, models._sample) and
    # the maps are palette PNGs in condlab's cosine colours (plotting._colors): the seconds of
    # importing torch and matplotlib are no part of a page of a run or a reproduction.
    import json
    import subprocess
    import sys

    script = ("import json, sys; from condlab.report import render_page; render_page(sys.argv[1]); "
              "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'matplotlib'})))")
    done = subprocess.run([sys.executable, "-c", script, str(results[kind])], capture_output=True,
                          text=True, check=True)
    assert json.loads(done.stdout.splitlines()[-1]) == []


def test_a_page_shows_at_most_page_frames_maps_evenly_spaced_with_the_ends_and_the_opening_epoch():
    from condlab.report._heatmap import MAX_FRAMES, MIN_FRAMES, PAGE_FRAMES, frame_epochs, frames_per_slider

    assert frames_per_slider(1) == MAX_FRAMES == 32 and PAGE_FRAMES == 48
    assert frames_per_slider(10) == 4 and frames_per_slider(16) == frames_per_slider(500) == MIN_FRAMES == 3
    quick = range(0, 101, 10)  # reproduce fig3 --quick: 11 snapshots, 10 runs on the page
    assert frame_epochs(quick, (100,), frames_per_slider(10)) == [0, 30, 70, 100]
    assert frame_epochs(quick, (40,), 4) == [0, 40, 50, 100]  # the opening epoch is always shown
    long = frame_epochs(range(1000), (123,), MAX_FRAMES)
    assert len(long) == MAX_FRAMES and {0, 123, 999} <= set(long)
    assert frame_epochs(range(5), (2,), MAX_FRAMES) == [0, 1, 2, 3, 4]


def test_heat_map_png_maps_cosines_to_the_palette():
    # The map's pixels are D(u, v) in [-1, 1] at LEVELS levels; NaN (a zero row) gets the last colour.
    import io

    from PIL import Image

    from condlab.report._heatmap import LEVELS, png

    D = np.array([[1.0, -1.0], [0.0, np.nan]])
    image = Image.open(io.BytesIO(png(D)))
    assert image.mode == "P" and image.size == (2, 2)
    assert np.array(image).tolist() == [[LEVELS - 1, 0], [(LEVELS - 1) // 2, LEVELS]]


def test_a_long_loss_curve_is_drawn_at_most_800_epochs_with_its_marker_kept():
    from condlab.report._run import LOSS_POINTS, loss_series

    loss = np.linspace(2.0, 1.0, 5001)
    for keep, marked in (((None,), None), ((1234,), 1234)):  # a run that never left the initial stage
        series = loss_series(loss, keep=keep)
        assert len(series["x"]) <= LOSS_POINTS + 1 and series["x"][0] == 0 and series["x"][-1] == 5000
        assert marked is None or marked in series["x"]
        assert series["y"] == [float(loss[i]) for i in series["x"]]


def test_cli_writes_the_page_and_prints_its_path(results, tmp_path, capsys):
    assert main(["report", str(results["inspect"]), "--out", str(tmp_path / "i.html")]) == 0
    assert capsys.readouterr().out.strip().endswith(str(tmp_path / "i.html"))
    assert main(["report", str(results["tracker"])]) == 0
    assert (results["tracker"] / "report.html").is_file()


@pytest.mark.parametrize("args, says", [
    (["report", "{tmp}/missing"], "does not exist"),
    (["report", "{tmp}"], "holds no condlab result"),
    (["report", "{tmp}/file.txt"], "is a file"),
    (["report", "{sweep}", "--out", "{tmp}"], "is a folder"),
    (["report", "{sweep}", "--out", "{tmp}/file.txt"], "is not a condlab report"),
])
def test_cli_errors_are_one_line_and_exit_2(results, tmp_path, capsys, args, says):
    (tmp_path / "file.txt").write_text("mine")
    argv = [a.format(tmp=tmp_path, sweep=results["sweep"]) for a in args]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1
    assert (tmp_path / "file.txt").read_text() == "mine"
