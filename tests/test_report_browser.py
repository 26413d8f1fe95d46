"""`condlab report` pages in a real browser: the system's Chromium, headless, driven by Playwright.

Each page kind loads with no console error and no request beyond the page file itself; the
verdict table has one row per claim and clicking a claim shows its panel; the epoch slider
changes the heat map; clicking a header sorts the sweep table and the filter feeds the plot.
A screenshot of each page kind goes to runs/ci-screenshots/ (CONDLAB_SCREENSHOTS overrides).

Where Chromium (/usr/bin/chromium, or CONDLAB_CHROMIUM) or the playwright package is missing,
these tests skip and say which; with CONDLAB_REQUIRE_BROWSER=1 (CI) they fail instead.
Playwright launches the browser with a fresh temporary profile (its own --user-data-dir) and
never downloads one here: `executable_path` names the installed Chromium.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from condlab.report import write_report

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("CONDLAB_CHROMIUM", "/usr/bin/chromium")
SHOTS = Path(os.environ.get("CONDLAB_SCREENSHOTS", ROOT / "runs" / "ci-screenshots"))
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _missing() -> str | None:
    """Why no browser test can run here, or None."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install playwright==1.65.2)"
    if not (Path(CHROMIUM).is_file() or shutil.which(CHROMIUM)):
        return f"no Chromium at {CHROMIUM} (apt-get install chromium, or set CONDLAB_CHROMIUM)"
    return None


@pytest.fixture(scope="module")
def browser():
    reason = _missing()
    if reason is not None:
        if os.environ.get("CONDLAB_REQUIRE_BROWSER") == "1":
            pytest.fail(f"CONDLAB_REQUIRE_BROWSER=1, but {reason}")
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield chromium
        chromium.close()


class Pages:
    """kind -> the page of that result (tests/conftest.py's report_results), written on first use."""

    def __init__(self, results, out: Path):
        self.results, self.out, self.written = results, out, {}

    def __getitem__(self, kind: str) -> Path:
        if kind not in self.written:
            self.written[kind] = write_report(self.results[kind], self.out / f"{kind}.html")
        return self.written[kind]


@pytest.fixture(scope="module")
def pages(report_results, tmp_path_factory) -> Pages:
    return Pages(report_results, tmp_path_factory.mktemp("pages"))


class Opened:
    """A page opened in a fresh context, with its console errors and its requests recorded."""

    def __init__(self, browser, path: Path):
        self.path = path
        self.context = browser.new_context(viewport={"width": 1200, "height": 900})
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.goto(path.as_uri(), wait_until="load")

    @property
    def fetched(self) -> list[str]:
        """Requests other than the page itself and its inline data: URIs."""
        return [u for u in self.requests if u != self.path.as_uri() and not u.startswith("data:")]

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def opened(browser):
    made: list[Opened] = []

    def open_(path: Path) -> Opened:
        made.append(Opened(browser, path))
        return made[-1]

    yield open_
    for o in made:
        o.close()


KINDS = ["run", "batch", "experiment", "collection", "sweep", "phase", "inspect", "tracker"]


@pytest.mark.parametrize("kind", KINDS)
def test_page_loads_without_errors_or_requests_and_is_screenshotted(pages, opened, kind):
    o = opened(pages[kind])
    assert o.page.locator(".clr[data-ready]").count() == 1  # report.js ran to the end
    o.page.wait_for_timeout(100)
    assert o.errors == []
    assert o.fetched == []
    SHOTS.mkdir(parents=True, exist_ok=True)
    o.page.screenshot(path=str(SHOTS / f"{kind}.png"), full_page=True)
    assert (SHOTS / f"{kind}.png").stat().st_size > 1000


def test_verdict_table_has_a_row_per_claim_and_a_click_shows_its_panel(pages, opened):
    claims = json.loads((pages.results["experiment"] / "claims.json").read_text())["claims"]
    o = opened(pages["experiment"])
    rows = o.page.locator("table[id*='verdicts'] tbody tr")
    assert rows.count() == len(claims) == 4
    panels = o.page.locator(".clr-panel")
    assert panels.count() == 4 and all(not panels.nth(i).is_visible() for i in range(4))
    third = o.page.locator(".clr-claim").nth(2)
    assert third.inner_text() == claims[2]["id"]
    third.click()
    panel = o.page.locator(f"[id='{third.get_attribute('data-panel')}']")
    assert panel.is_visible() and claims[2]["id"] in panel.inner_text()
    assert sum(panels.nth(i).is_visible() for i in range(4)) == 1
    assert "clr-selected" in (rows.nth(2).get_attribute("class") or "")
    # the panel links to the heat maps of the claim's runs (runs/xtanh for fig3/xtanh/layer1)
    maps = panel.locator("a[href^='#']")
    assert maps.count() == 1 and maps.inner_text() == "xtanh/seed0"
    target = o.page.locator(f"[id='{maps.get_attribute('href')[1:]}']")
    assert target.locator(".clr-viewer").count() == 1
    # one row per claim and a NOT RUN row in the collection's table
    c = opened(pages["collection"])
    assert c.page.locator("table[id*='verdicts'] tbody tr").count() == 5


def test_epoch_slider_changes_the_heat_map(pages, opened):
    o = opened(pages["run"])
    viewer = o.page.locator(".clr-viewer").first
    shown = viewer.locator(".clr-frame:visible")
    assert shown.count() == 1
    before = (shown.get_attribute("data-epoch"), shown.locator("image").get_attribute("href"),
              viewer.locator(".clr-label").inner_text())
    viewer.locator(".clr-slider").fill("0")
    shown = viewer.locator(".clr-frame:visible")
    after = (shown.get_attribute("data-epoch"), shown.locator("image").get_attribute("href"),
             viewer.locator(".clr-label").inner_text())
    assert shown.count() == 1
    assert after[0] == "0" and before[0] != "0"
    assert after[1] != before[1] and after[2].startswith("epoch 0:") and after[2] != before[2]


def _column(page, table: str, name: str) -> list[float]:
    headers = page.locator(f"{table} thead th").all_inner_texts()
    k = headers.index(name) + 1
    cells = page.locator(f"{table} tbody tr:visible td:nth-child({k})")
    return [float(cells.nth(i).get_attribute("data-v")) for i in range(cells.count())]


def test_sorting_the_sweep_table_reorders_it_and_the_filter_feeds_the_plot(pages, opened):
    o = opened(pages["sweep"])
    table = "table[id*='results']"
    before = _column(o.page, table, "final_loss")
    assert before != sorted(before)  # plan order: the test would pass trivially otherwise
    o.page.locator(f"{table} thead th", has_text="final_loss").click()
    assert _column(o.page, table, "final_loss") == sorted(before)
    o.page.locator(f"{table} thead th", has_text="final_loss").click()
    assert _column(o.page, table, "final_loss") == sorted(before, reverse=True)
    plot = o.page.locator(".clr-tableplot svg circle")
    assert plot.count() == 4
    o.page.locator("input.clr-filter").fill("seed=0")
    assert o.page.locator(f"{table} tbody tr:visible").count() == 2
    assert plot.count() == 2
    assert o.page.locator(".clr-count").inner_text() == "2 of 4 rows"


def test_layer_select_shows_that_layers_heat_map(pages, opened):
    o = opened(pages["inspect"])
    select = o.page.locator("select.clr-switch")
    figures = o.page.locator("[data-choice]")
    assert figures.count() == 3 and figures.nth(0).is_visible() and not figures.nth(1).is_visible()
    select.select_option("1")
    assert figures.nth(1).is_visible() and not figures.nth(0).is_visible()
