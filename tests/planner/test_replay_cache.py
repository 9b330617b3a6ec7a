"""The replay's rows are kept on disk only for the code that computed them."""

from playground.planner import replay_cache
from playground.planner.replay_cache import remembered, source_key


def _counting():
    calls = []

    def compute():
        calls.append(1)
        return ({"name": "row", "ratio_range": (0.9, 1.1)},)
    return calls, compute


def test_a_second_process_reads_what_the_first_computed(tmp_path):
    calls, compute = _counting()
    first = remembered("rows", compute, tmp_path)
    second = remembered("rows", compute, tmp_path)
    assert first == second and isinstance(second[0]["ratio_range"], tuple)   # kept as computed
    assert len(calls) == 1


def test_changed_code_computes_afresh_and_drops_the_old_answer(tmp_path, monkeypatch):
    calls, compute = _counting()
    remembered("rows", compute, tmp_path)
    monkeypatch.setattr(replay_cache, "source_key", lambda: "edited")
    remembered("rows", compute, tmp_path)
    assert len(calls) == 2
    assert [p.name for p in tmp_path.iterdir()] == ["rows-edited.pickle"]


def test_a_half_written_file_is_computed_over(tmp_path):
    calls, compute = _counting()
    (tmp_path / f"rows-{source_key()}.pickle").write_bytes(b"\x80\x04trunc")
    assert remembered("rows", compute, tmp_path)[0]["name"] == "row" and len(calls) == 1
    remembered("rows", compute, tmp_path)
    assert len(calls) == 1


def test_switched_off_it_always_computes(tmp_path, monkeypatch):
    monkeypatch.setenv("PLAYGROUND_REPLAY_CACHE", "off")
    calls, compute = _counting()
    remembered("rows", compute, tmp_path)
    remembered("rows", compute, tmp_path)
    assert len(calls) == 2 and not list(tmp_path.iterdir())


def test_an_edit_to_any_module_changes_the_key(tmp_path, monkeypatch):
    (tmp_path / "part").mkdir()
    (tmp_path / "part" / "costs.py").write_text("GEMM = 0.8\n")
    monkeypatch.setattr(replay_cache, "_PACKAGE", tmp_path)
    keys = []
    for text in ("GEMM = 0.8\n", "GEMM = 0.7\n"):
        (tmp_path / "part" / "costs.py").write_text(text)
        source_key.cache_clear()
        keys.append(source_key())
    source_key.cache_clear()
    assert keys[0] != keys[1] and len(keys[0]) == 32
