"""CI: check the verdicts of `condlab reproduce ... --quick` against the recorded ones.

Usage: python .ci/check_verdicts.py OUT_DIR .ci/expected_verdicts.json
Fails when a claims.json is missing or malformed, or when a verdict differs from the one
recorded (seeds are fixed, so a change means the science or the code changed).
"""

import json
import sys
from pathlib import Path


def main(out: str, expected_file: str) -> int:
    expected = json.loads(Path(expected_file).read_text())
    failures = []
    for experiment, verdicts in expected.items():
        path = Path(out) / experiment / "claims.json"
        if not path.is_file():
            failures.append(f"{path} is missing")
            continue
        data = json.loads(path.read_text())
        got = {c["id"]: c["holds"] for c in data["claims"]}
        for claim, holds in verdicts.items():
            status = "ok" if got.get(claim) == holds else "CHANGED"
            print(f"{status:<8} {claim:<28} expected {'holds' if holds else 'fails'}, "
                  f"got {got.get(claim)}")
            if status != "ok":
                failures.append(claim)
    print(f"{len(failures)} verdict(s) differ" if failures else "all verdicts as recorded")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
