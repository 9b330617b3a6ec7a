"""The capacity explorer starts at the text's plan, draws it at once, and redraws when a control moves."""

import pytest

ipywidgets = pytest.importorskip("ipywidgets")


@pytest.fixture
def explorer(monkeypatch):
    import matplotlib
    matplotlib.use("Agg")
    monkeypatch.setattr("IPython.display.display", lambda *a, **k: None)
    from playground.planner.capacity_explorer import explorer
    return explorer()


def _sliders(box):
    found, stack = {}, [box]
    while stack:
        w = stack.pop()
        if hasattr(w, "description") and hasattr(w, "value"):
            found[w.description] = w
        stack += list(getattr(w, "children", ()))
    return found


def test_starts_at_the_texts_values_exactly(explorer):
    from playground.planner.capacity_explorer import START
    assert explorer.current["values"] == START
    assert START == {"params": 70e9, "tokens": 1.4e12, "gpus": 1024, "mfu": 0.40, "gpu": "H100",
                     "zero_stage": 1, "recompute": "selective"}


def test_first_view_has_a_figure_with_data(explorer):
    fig, plan = explorer.current["figure"], explorer.current["plan"]
    bars = [patch for ax in fig.axes for patch in ax.patches]
    assert bars and sum(bar.get_width() for bar in bars) > 0
    assert plan["days"] == pytest.approx(16.8, abs=0.05) and plan["parallelism"]["fits"]


def test_controls_fit_their_labels(explorer):
    for control in _sliders(explorer).values():
        assert control.style.description_width == "initial"
        assert control.layout.width == "360px"


def test_moving_a_control_redraws(explorer):
    before = explorer.current
    _sliders(explorer)["GPUs"].value = 2048
    after = explorer.current
    assert after is not before and after["values"]["gpus"] == 2048
    assert after["plan"]["days"] < before["plan"]["days"]
    assert [p.get_width() for ax in after["figure"].axes for p in ax.patches]
