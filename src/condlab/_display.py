"""Results that Jupyter shows as their `condlab report` page (``_repr_html_``)."""

from __future__ import annotations


class ShownAsPage:
    """Mixin of the result classes (Run, RunResult, SweepResult, ExperimentResult, DiagramResult):
    in a notebook the result displays as the body of its `condlab report` page."""

    def _repr_html_(self) -> str:
        import condlab  # its lazy `report` attribute: report reads these results, so they do not import it

        return condlab.report.html_body(self)
