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


def test_no_chapter_cell_holds_a_control_character():
    """A backslash lost on the way into a notebook turns ``\\text`` into a tab and ``\\frac`` into a form
    feed: the equation then fails in MathJax, which only the built pages show.  Nothing but newlines
    belongs in a cell's source."""
    found = []
    for path in sorted(CHAPTERS.glob("*.ipynb")):
        for i, cell in enumerate(json.loads(path.read_text())["cells"]):
            source = "".join(cell["source"])
            bad = sorted({f"{ord(ch):#04x}" for ch in source if ord(ch) < 0x20 and ch != "\n"})
            if bad:
                found.append(f"{path.name} cell {i}: {', '.join(bad)}")
    assert found == []
