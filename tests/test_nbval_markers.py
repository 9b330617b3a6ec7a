"""The chapters' nbval markers are ones nbval reads: it matches a comment line exactly, so
``# NBVAL_IGNORE_OUTPUT: why`` is silently an ordinary comment and the cell's noisy digits get
compared (chapter 4's rounding-noise cell did that)."""

import json
from pathlib import Path

from nbval.plugin import comment_markers

CHAPTERS = Path(__file__).resolve().parents[1] / "chapters"


def test_every_nbval_comment_in_a_chapter_is_a_marker_nbval_recognises():
    wrong = []
    for path in sorted(CHAPTERS.glob("*.ipynb")):
        for i, cell in enumerate(json.loads(path.read_text())["cells"]):
            for line in "".join(cell["source"]).splitlines():
                comment = line.strip().lstrip("#").strip()
                if line.strip().startswith("#") and comment.startswith("NBVAL") and comment not in comment_markers:
                    wrong.append(f"{path.name} cell {i}: {line.strip()!r}")
    assert wrong == []
