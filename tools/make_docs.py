"""Regenerate docs/reproduction.md and the measured block of docs/analysis.md from claims.json.

Usage: python tools/make_docs.py [OUT_DIR]
(default runs/reproduce/latest: the newest `condlab reproduce all`)
"""

import sys
from pathlib import Path

from condlab.records._io import atomic_write_text
from condlab.reproduce._docs import HAND, load_claims, replay_block, reproduction_md, splice

DOCS = Path(__file__).resolve().parents[1] / "docs"


def main(out: str = "runs/reproduce/latest") -> int:
    results = load_claims(out)
    if not results:
        print(f"no claims.json under {out}: run `condlab reproduce all` first (or name its folder)",
              file=sys.stderr)
        return 2
    target = DOCS / "reproduction.md"
    old = target.read_text() if target.exists() else ""
    # A hand-written tail (experiments the generating run did not include) is kept as it is.
    tail = old[old.index(HAND):] if HAND in old else ""
    atomic_write_text(target, reproduction_md(results, out) + ("\n" + tail if tail else ""))
    analysis = DOCS / "analysis.md"
    atomic_write_text(analysis, splice(analysis.read_text(), replay_block(results)))
    print(f"wrote {DOCS / 'reproduction.md'} and the measured block of {analysis} from {len(results)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
