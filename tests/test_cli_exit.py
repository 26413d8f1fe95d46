"""How the `condlab` command ends (``_cli.exit_now``): atexit handlers, then no interpreter teardown.

The claims: the exit status is main's; what was printed and what atexit handlers write is
there; the teardown (objects freed at finalization) is skipped, except under a profiler or
tracer and while a non-daemon thread runs, where the ordinary exit keeps what they need.
Each case runs in a fresh interpreter: exit_now ends the process that calls it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import condlab

SRC = str(Path(condlab.__file__).resolve().parent.parent)

# a module-global whose __del__ runs only at teardown; an atexit handler; unflushed output
SCRIPT = """
import atexit, sys, threading, time
from pathlib import Path
from condlab._cli import exit_now
out = Path(sys.argv[1])

class FreedAtTeardown:
    def __init__(self, path):
        self.path = path

    def __del__(self, open=open):  # builtins may be gone by then
        with open(self.path, "w"):
            pass

kept = FreedAtTeardown(str(out / "teardown"))
atexit.register((out / "atexit").touch)
sys.stdout.write("printed, no newline")
{before}
exit_now(3)
"""


def _run(tmp_path: Path, before: str = "") -> tuple[int, str, set[str]]:
    """(exit status, stdout, files the process left in tmp_path) of SCRIPT with `before` inserted."""
    done = subprocess.run([sys.executable, "-c", SCRIPT.format(before=before), str(tmp_path)],
                          capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"})
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stdout, {p.name for p in tmp_path.iterdir()}


def test_exit_now_keeps_status_output_and_atexit_and_skips_teardown(tmp_path):
    assert _run(tmp_path) == (3, "printed, no newline", {"atexit"})


def test_exit_now_under_a_profiler_exits_the_ordinary_way(tmp_path):
    # cProfile and coverage write their data at teardown: it must happen
    assert _run(tmp_path, "sys.setprofile(lambda *args: None)") == (3, "printed, no newline",
                                                                     {"atexit", "teardown"})


def test_exit_now_waits_for_a_running_non_daemon_thread(tmp_path):
    late = ("worker = threading.Thread(target=lambda: (time.sleep(0.5), (out / 'thread').touch()))\n"
            "worker.start()")
    code, printed, left = _run(tmp_path, late)
    assert (code, printed) == (3, "printed, no newline") and {"atexit", "thread"} <= left


def test_the_console_entry_point_exits_with_mains_status(tmp_path):
    ok = subprocess.run([sys.executable, "-m", "condlab", "presets"], capture_output=True, text=True,
                        cwd=tmp_path, timeout=120)
    bad = subprocess.run([sys.executable, "-m", "condlab", "config", "--preset", "no-such-preset"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert ok.returncode == 0 and "fig3-xtanh" in ok.stdout
    assert bad.returncode == 2 and "no-such-preset" in bad.stderr
