"""The ipywidgets explorers build, and redraw without error when a reader moves each control.

In JupyterLab they are interactive; in the HTML book a static figure stands in for each.
"""

import importlib

import pytest

ipywidgets = pytest.importorskip("ipywidgets")

EXPLORERS = [
    ("playground.data_parallel", "cost_explorer"),
    ("playground.pipeline_parallel", "bubble_explorer"),
    ("playground.zero", "explorer"),
    ("playground.planner", "explorer"),
    ("playground.systems_map", "placement_explorer"),
]


def _controls(widget):
    """Every value-carrying control inside a widget tree."""
    found, stack = [], [widget]
    while stack:
        w = stack.pop()
        if isinstance(w, (ipywidgets.widgets.widget_int._Int, ipywidgets.widgets.widget_float._Float,
                          ipywidgets.widgets.widget_selection._Selection)):
            found.append(w)
        stack += list(getattr(w, "children", ()))
    return found


@pytest.mark.parametrize("module, name", EXPLORERS)
def test_explorer_redraws_for_every_control(module, name, monkeypatch):
    import matplotlib
    matplotlib.use("Agg")
    monkeypatch.setattr("IPython.display.display", lambda *a, **k: None)
    widget = getattr(importlib.import_module(module), name)()
    if widget is None:  # some explorers display themselves and return nothing
        pytest.skip(f"{name} displays itself")
    controls = _controls(widget)
    assert controls, f"{name} has no controls"
    for control in controls:
        if isinstance(control, ipywidgets.widgets.widget_selection._Selection):
            options = list(control.options)
            control.value = options[-1][1] if isinstance(options[-1], tuple) else options[-1]
        else:
            control.value = control.max if control.value != control.max else control.min
