"""The peer model beside ours: llm-analysis, run for real on published rows through our mapping."""

import math
import sys

import pytest

pytest.importorskip("llm_analysis")

from playground.planner import peer_model  # noqa: E402
from playground.planner.errors import PlanError  # noqa: E402
from playground.planner.published_layouts import ALL_LAYOUTS  # noqa: E402
from playground.planner.published_stacks import STACK_RUNS  # noqa: E402

ROWS = {r.name: r for r in ALL_LAYOUTS + STACK_RUNS}
PICKS = ("GPT 145.6B", "Llama 3 405B, 8,192 GPUs", "Llama 3.1 70B, FSDP 32 TP 8", "OPT-175B, FSDP + TP 8, 992 GPUs")


@pytest.fixture(scope="module")
def table():
    return peer_model.peer_table([ROWS[n] for n in PICKS])


def test_the_table_builds_with_both_predictions_positive_and_finite(table):
    assert [r["name"] for r in table] == list(PICKS)
    for r in table:
        assert r["skipped"] == ""
        for key in ("published", "ours", "llm_analysis", "llm_analysis_readme", "ratio_ours",
                    "ratio_llm_analysis", "ratio_llm_analysis_readme"):
            assert r[key] > 0 and math.isfinite(r[key]), (r["name"], key)


def test_the_mapping_passes_the_model_shape_through(table):
    for r in table:
        assert r["params_ratio"] == pytest.approx(1, abs=0.02), r["name"]


def test_the_rows_are_compared_on_one_metric():
    """Ours and the peer go through published_metric alike: a step time, or tokens/s per GPU."""
    row = ROWS["Llama 3.1 70B, FSDP 32 TP 8"]
    [entry] = peer_model.peer_table([row])
    peer = peer_model.llm_analysis_step_time(row.model, row.gpu, row.layout)
    assert entry["metric"] == "tokens_per_s_per_gpu"
    assert entry["llm_analysis"] == pytest.approx(peer["tokens_per_s"] / row.layout.gpus)
    assert entry["ratio_llm_analysis"] == pytest.approx(entry["llm_analysis"] / row.tokens_per_s_per_gpu)


def test_its_step_is_compute_only_at_its_documented_default_efficiency():
    row = ROWS["GPT 145.6B"]
    default = peer_model.llm_analysis_step_time(row.model, row.gpu, row.layout)
    readme = peer_model.llm_analysis_step_time(row.model, row.gpu, row.layout, **peer_model.README_EFFICIENCY)
    assert default["flops_efficiency"] == 1 and default["hbm_memory_efficiency"] == 1
    assert readme["step_time_s"] == pytest.approx(2 * default["step_time_s"])  # no comm, no bubble
    assert default["step_time_s"] == pytest.approx(default["flops_per_step"] / (row.layout.gpus * 312e12))


def test_runs_it_cannot_describe_are_skipped_with_the_reason():
    cp = next(r for r in STACK_RUNS if r.layout.cp > 1)
    moe = next(r for r in STACK_RUNS if r.model.is_moe)
    skipped = peer_model.peer_table([cp, moe])
    assert "context parallelism" in skipped[0]["skipped"] and "MoE" in skipped[1]["skipped"]
    assert all(r["llm_analysis"] is None and r["ours"] > 0 for r in skipped)
    with pytest.raises(PlanError, match="cannot describe"):
        peer_model.llm_analysis_step_time(moe.model, moe.gpu, moe.layout)


def test_its_logging_is_held_and_the_summary_reads_per_stack(table):
    from llm_analysis.analysis import logger
    handlers = list(logger.handlers)
    row = ROWS["GPT 145.6B"]  # ZeRO stage 0: llm-analysis warns that ZeRO is disabled
    peer = peer_model.llm_analysis_step_time(row.model, row.gpu, row.layout)
    assert any("ZeRO is disabled" in w for w in peer["warnings"])
    assert logger.handlers == handlers  # its own stdout handler is back in place
    summary = peer_model.peer_summary(table)
    assert {s["stack"] for s in summary} == {r["stack"] for r in table}
    assert all(s["rows"] == 1 and s["worst_ours"] == s["median_ours"] for s in summary)


def test_a_missing_package_raises_one_clear_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "llm_analysis", None)
    with pytest.raises(ImportError, match="pip install llm-analysis==0.2.2"):
        peer_model.peer_table([ROWS["GPT 145.6B"]])
