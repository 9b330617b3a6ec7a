"""One look for every figure in the book: sizes, fonts, colours, and how a figure is saved; and
``show_source``, the package code a chapter shows, for JupyterLab."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import matplotlib

import matplotlib.pyplot as plt

__all__ = ["style", "new_figure", "save", "show_source", "COLORS", "FIGURES_DIR"]

FIGURES_DIR = Path(__file__).resolve().parent.parent / "figures"
# Okabe-Ito: distinguishable for colour-blind readers and in greyscale print
COLORS = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]

_RC = {
    "figure.dpi": 110, "savefig.dpi": 150, "savefig.bbox": "tight",
    "font.size": 11, "axes.titlesize": 12, "axes.labelsize": 11, "legend.fontsize": 9,
    "axes.grid": True, "grid.alpha": 0.3, "axes.spines.top": False, "axes.spines.right": False,
    "axes.prop_cycle": matplotlib.cycler(color=COLORS),
}


@contextmanager
def style():
    with plt.rc_context(_RC):
        yield


def new_figure(ncols: int = 1, nrows: int = 1, width: float = 6.4, height: float = 3.8, **kw):
    """A figure in the book's style (call inside ``style()`` or let ``save`` apply it)."""
    with style():
        return plt.subplots(nrows, ncols, figsize=(width, height), layout="constrained", **kw)


def save(fig, name: str, directory: Path | None = None) -> Path:
    """Write ``fig`` as ``figures/<name>`` (PNG) and close it; returns the path."""
    directory = Path(directory or FIGURES_DIR)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    with style():
        fig.savefig(path)
    plt.close(fig)
    return path


def show_source(*objects):
    """The source of package functions or classes, highlighted, as the book's ``literalinclude``
    shows them.  JupyterLab does not render ``literalinclude`` (MyST there cannot read files), so
    each one is followed by a cell calling this, tagged ``remove-cell``: Lab shows it, the book
    drops it."""
    import inspect

    from IPython.display import Code
    return Code("\n\n".join(inspect.getsource(obj) for obj in objects), language="python")
