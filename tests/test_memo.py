"""The memo of simulated values (analysis._memo) behind the arc test's null (`flat_bound`).

The claims: a value read back from the memo file is exactly the simulated one; a file that is
damaged, of other settings, or cannot be written is ignored (the value is simulated again);
an empty ``$CONDLAB_CACHE`` writes no file.
"""

from __future__ import annotations

import json

import pytest

from condlab.analysis import _arcs
from condlab.analysis._memo import CACHE_ENV, cache_dir


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    _arcs.flat_bound.cache_clear()  # the in-process memo: each test reads the file
    yield tmp_path / "cache"
    _arcs.flat_bound.cache_clear()


def _never(n: int) -> float:
    raise AssertionError(f"simulated n = {n} again")


def test_a_value_read_back_is_the_simulated_one(cache, monkeypatch):
    simulated = _arcs._simulate_flat_bound(37)
    assert _arcs.flat_bound(37) == simulated and not list(cache.glob(".*.tmp"))
    (stored,) = cache.glob("flat_bound-*.json")
    assert json.loads(stored.read_text())["values"] == {"37": simulated}
    _arcs.flat_bound.cache_clear()
    monkeypatch.setattr(_arcs, "_simulate_flat_bound", _never)
    assert _arcs.flat_bound(37) == simulated  # from the file, bit for bit


def test_damaged_or_foreign_files_are_ignored_and_replaced(cache):
    simulated = _arcs._simulate_flat_bound(23)
    assert _arcs.flat_bound(23) == simulated
    (stored,) = cache.glob("flat_bound-*.json")
    for text in ("{not json", json.dumps({"key": "other settings", "values": {"23": 1.0}}),
                 json.dumps({"key": json.loads(stored.read_text())["key"], "values": {"23": "1.0"}})):
        stored.write_text(text)
        _arcs.flat_bound.cache_clear()
        assert _arcs.flat_bound(23) == simulated
        assert json.loads(stored.read_text())["values"] == {"23": simulated}


def test_no_file_where_the_cache_is_off_or_cannot_be_written(tmp_path, monkeypatch):
    simulated = _arcs._simulate_flat_bound(21)
    monkeypatch.setenv(CACHE_ENV, "")
    assert cache_dir() is None
    _arcs.flat_bound.cache_clear()
    assert _arcs.flat_bound(21) == simulated and not list(tmp_path.iterdir())
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv(CACHE_ENV, str(blocker / "cache"))  # its parent is a file: mkdir fails
    _arcs.flat_bound.cache_clear()
    assert _arcs.flat_bound(21) == simulated
    _arcs.flat_bound.cache_clear()


def test_the_cache_folder_follows_the_environment(tmp_path, monkeypatch):
    from pathlib import Path

    monkeypatch.delenv(CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path / "condlab"
    monkeypatch.delenv("XDG_CACHE_HOME")

    def homeless():
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(Path, "home", homeless)
    assert cache_dir() is None
