"""One self-contained HTML page per condlab result (``condlab report PATH [--out FILE.html]``).

    write_report(path, out=None) -> Path   the page of the result in folder `path` (default
                                           PATH/report.html); an earlier report there is replaced
    render_page(path)            -> str    the same page as text
    html_body(result)            -> str    the page body of a result object or folder: what
                                           Run, RunResult, SweepResult, ExperimentResult and
                                           DiagramResult show in Jupyter (``_repr_html_``)
    detect(path)                 -> str    which kind of result a folder holds (KINDS)

A page only reads results (run records, claims.json, results.csv, analysis.json, figures);
it trains and re-analyses nothing, except the per-snapshot count that orders and outlines each
cosine heat map. Images are inlined, the CSS and JavaScript are inlined, and the page fetches
nothing (docs/report.md).
"""

from .._lazy import exports

# name -> the private module that defines it; imported on first use (no import cost, no cycles)
_EXPORTS = {
    "KINDS": "._page",
    "NAMES": "._page",
    "detect": "._page",
    "html_body": "._page",
    "render_page": "._page",
    "write_report": "._page",
}

__all__ = ["KINDS", "detect", "html_body", "render_page", "write_report"]

__getattr__, __dir__ = exports(__name__, _EXPORTS)
