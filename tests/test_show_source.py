"""show_source: JupyterLab shows the code a chapter's literalinclude shows in the book."""

import inspect

from playground.plotting import show_source
from playground.planner.overlap import data_parallel_tokens, fsdp_tokens


def test_it_is_the_functions_own_source_highlighted_as_python():
    code = show_source(fsdp_tokens)
    assert code.data == inspect.getsource(fsdp_tokens)
    html = code._repr_html_()
    assert "<pre" in html and "fsdp_tokens" in html   # highlighted, not plain text


def test_several_objects_are_shown_in_order():
    data = show_source(data_parallel_tokens, fsdp_tokens).data
    assert data.index("def data_parallel_tokens") < data.index("def fsdp_tokens")
