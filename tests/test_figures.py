"""Every figure the book shows is in figures/, made by a registered figure function; no orphans."""

import json
import re
from pathlib import Path

from playground.figures import load_all

ROOT = Path(__file__).resolve().parent.parent
FIGURES = ROOT / "figures"
REFERENCE = re.compile(r"figures/([A-Za-z0-9_.-]+\.png)")


def _book_text() -> str:
    parts = []
    for path in sorted((ROOT / "chapters").iterdir()):
        if path.suffix == ".md":
            parts.append(path.read_text())
        elif path.suffix == ".ipynb":
            cells = json.loads(path.read_text())["cells"]
            parts += ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]
    return "\n".join(parts)


def test_every_referenced_figure_exists_and_has_a_producer():
    referenced = set(REFERENCE.findall(_book_text()))
    registry = load_all()
    assert referenced, "the book references no figure at all?"
    assert sorted(referenced - set(registry)) == [], "referenced but no @figure function makes it"
    assert sorted(n for n in referenced if not (FIGURES / n).exists()) == [], \
        "referenced but missing: run `make figures`"


def test_figures_folder_holds_no_orphans():
    registry = load_all()
    on_disk = {p.name for p in FIGURES.iterdir() if p.is_file()}
    assert sorted(on_disk - set(registry)) == [], "files in figures/ that no figure function makes"


def test_every_registered_figure_is_in_the_folder():
    missing = sorted(n for n in load_all() if not (FIGURES / n).exists())
    assert missing == [], "registered but never generated: run `make figures`"


def test_a_figure_that_cannot_be_written_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    import matplotlib.pyplot as plt
    import playground.figures.__main__ as figures_main
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    monkeypatch.setattr(figures_main, "FIGURES_DIR", blocked)
    monkeypatch.setattr(figures_main, "load_all", lambda: {"x.png": plt.figure})
    assert figures_main.main(["x.png"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot write x.png") and err.count("\n") == 1, err
    assert figures_main.main(["nosuch.png"]) == 2
    assert capsys.readouterr().err == "error: unknown figure(s) nosuch.png; see --list\n"
