"""Suite-wide rules: whole experiments run only in `make test-slow`; the `reference` fixture.

A test that trains a whole experiment of the documents (`condlab.reproduce`'s experiments, in
any mode) is marked ``experiment``; the default suite deselects it (pyproject's addopts) and
`make test-slow` runs it. The guard below makes an unmarked test fail when an experiment gets
as far as saving its figure (every experiment that trained does; one refused for its inputs
does not), so the default suite cannot drift back over its time budget unnoticed.
"""

from __future__ import annotations

import pytest

_MARKED = ("experiment", "slow")


@pytest.fixture(autouse=True)
def _no_experiments_in_the_default_suite(request, monkeypatch):
    if any(request.node.get_closest_marker(m) for m in _MARKED):
        yield
        return
    from condlab.reproduce import Context

    def refuse(self, result, fig, name):
        pytest.fail(f"{request.node.nodeid} trained the whole experiment {name!r}: mark it "
                    "@pytest.mark.experiment (it then runs in `make test-slow`)")

    monkeypatch.setattr(Context, "save", refuse)
    yield


def pytest_collection_modifyitems(config, items):
    # The default selection (pyproject: -m 'not slow and not experiment') must leave whole
    # experiments out; a selection that does not name `experiment` and still collects one is
    # a suite that has left its budget.
    if "experiment" in (config.option.markexpr or ""):
        return
    collected = [item.nodeid for item in items if item.get_closest_marker("experiment")]
    if collected:
        raise pytest.UsageError(f"the default suite collected {len(collected)} whole experiment(s), "
                                f"e.g. {collected[0]}: they run in `make test-slow` (-m experiment)")


@pytest.fixture(scope="session")
def report_results(tmp_path_factory):
    """Small results of every kind `condlab report` reads, each built on first use
    (tests/_report_results.py; shared by test_report.py and test_report_browser.py)."""
    from _report_results import Built

    return Built(tmp_path_factory.mktemp("report-results"))


ENV_VAR = "CONDLAB_REFERENCE"   # condlab._accel.ENV_VAR (not imported here: conftest loads first)


@pytest.fixture
def reference(monkeypatch):
    """Every fast path off (condlab._accel): the reference computations run."""
    monkeypatch.setenv(ENV_VAR, "1")


@pytest.fixture
def accelerated(monkeypatch):
    """The fast paths on, also under ``CONDLAB_REFERENCE=1`` (for tests of the fast paths themselves)."""
    monkeypatch.delenv(ENV_VAR, raising=False)


@pytest.fixture
def late_signal(monkeypatch):
    """condlab.train's stop requests get a SIGINT that arrives as a batch ends, after the trainer's
    last look at it (the trainer never sees it in time)."""
    import signal

    from condlab.training import _api

    class LateSignal(_api.StopRequests):
        def __call__(self) -> bool:
            return False

        def __exit__(self, *exc) -> None:
            self.requested = signal.SIGINT
            super().__exit__(*exc)

    monkeypatch.setattr(_api, "StopRequests", LateSignal)
