"""When the batch does not split over the GPUs, the plan says so and names what would run better:
each GPU count or batch it names is searched as a plan of its own would be, and the plan for it
gives the same figures; a count the batch cannot run on at all is one line naming those that can."""

import io
import json
import subprocess
import sys
from contextlib import redirect_stdout

import pytest

from playground import planner as cp
from playground.planner.batch_split import GAIN, nearby_counts, round_batch
from playground.planner.cli import report
from playground.step_time import main as step_time_main


@pytest.mark.parametrize("batch,rounded", [(1953, 2048), (512, 512), (1000, 1024), (3000, 3072), (1, 1), (96, 96)])
def test_a_batch_rounds_to_a_power_of_two_multiple_within_five_percent(batch, rounded):
    assert round_batch(batch) == rounded


@pytest.mark.parametrize("gpus,counts", [(1920, [1024, 2048]), (96, [64, 128]), (1000, [512, 1024]), (512, [])])
def test_the_neighbouring_counts_are_the_powers_of_two_around_it(gpus, counts):
    assert nearby_counts(gpus) == counts


def test_more_gpus_than_the_batch_splits_over_is_said_with_the_counts_that_would_do_better():
    """Llama 3 8B's 512-sequence batch on 1,920 H100s: the odd 15 becomes pipeline stages and the
    run is slower than on 1,024 GPUs.  The plan says so, and each alternative it names agrees with
    the plan of that run."""
    p = cp.plan(model="llama3-8b", tokens=15e12, gpus=1920)
    assert p["parallelism"]["pp"] * p["parallelism"]["cp"] > 1
    assert "does not split well over 1,920 = 2^7 x 3 x 5 GPUs" in p["split_note"]
    named = {(r["gpus"], r["global_batch"]): r for r in p["better_runs"]}
    assert {(1024, 512), (2048, 512), (1920, 1920)} <= set(named)
    for (gpus, batch), r in named.items():
        assert r["gpu_hours"] <= (1 - GAIN) * p["gpu_hours"]
        own = cp.plan(model="llama3-8b", tokens=15e12, gpus=gpus, global_batch=batch)
        assert own["parallelism"]["description"] == r["layout"]
        assert own["gpu_hours"] == pytest.approx(r["gpu_hours"], rel=1e-9)
        assert own["days"] == pytest.approx(r["days"], rel=1e-9)
    assert named[(1024, 512)]["days"] < p["days"]           # fewer GPUs, sooner
    text = report(p)
    assert "instead    the 512-sequence batch" in text and "- 1,024 H100s, batch 512" in text


def test_the_step_time_search_names_the_runs_the_plan_names_per_token():
    """``step_time --search`` on the same 1,920 GPUs and batch names the plan's alternatives, each with the
    plan's layout and its saving as GPU-seconds a token (the plan's GPU-hours for the same tokens)."""
    from playground.planner.step_time_cli import report as step_report
    p = cp.plan(model="llama3-8b", tokens=15e12, gpus=1920)
    out = io.StringIO()
    with redirect_stdout(out):
        assert step_time_main(["--model", "llama3-8b", "--gpus", "1920", "--global-batch", "512", "--search",
                               "--top", "1", "--json"]) == 0
    found = json.loads(out.getvalue())
    by_run = {(r["gpus"], r["global_batch"]): r for r in found["better_runs"]}
    assert set(by_run) == {(r["gpus"], r["global_batch"]) for r in p["better_runs"]}
    for r in p["better_runs"]:
        mine = by_run[r["gpus"], r["global_batch"]]
        assert mine["layout"] == r["layout"] and mine["step_time_s"] == r["step_time_s"]
        assert mine["gpu_seconds_per_token_change"] == pytest.approx(r["gpu_hours_change"], abs=1e-4)
    assert "GPU-seconds per token" in found["split_note"] and "does not split well over 1,920" in found["split_note"]
    text = step_report(found)
    assert "instead  the 512-sequence batch" in text and "- 1,024 H100s, batch 512 (same batch)" in text


def test_the_smallest_batch_as_large_that_splits_evenly_over_the_gpus_is_offered():
    """Qwen3-8B's 1,024 sequences on 96 GPUs (2^5 x 3) force 3 pipeline stages; 1,056 = 11 x 96 sequences
    run as DP 96, with no pipeline."""
    p = cp.plan(model="qwen3-8b", tokens=5e12, gpus=96)
    (r,) = [r for r in p["better_runs"] if r["gpus"] == 96]
    assert r["global_batch"] == 1056 and "DP=96" in r["layout"] and "split evenly over DP 96" in r["why"]


def test_a_batch_rounded_from_decimal_tokens_is_offered_its_power_of_two_neighbour():
    p = cp.plan(model="llama3-405b", tokens=15.6e12, gpus=16384, global_batch_tokens=16e6)
    assert p["global_batch"] == 1953
    (r,) = [r for r in p["better_runs"] if r["gpus"] == 16384]
    assert r["global_batch"] == 2048 and r["mfu"] > 2 * p["mfu"]
    assert "critical batch size" in p["split_note"]


def test_a_neighbour_that_saves_gpu_hours_is_named_where_memory_sets_the_model_parallelism():
    """Llama 3 405B needs TP x PP or FSDP with full recomputation: on 1,000 GPUs with 1,000 sequences the
    search takes FSDP over all of them, and 512 GPUs, whose pipeline (TP 2 x PP 32 x CP 8) needs no
    recomputation, spend fewer GPU-hours. The note does not blame the batch."""
    p = cp.plan(model="llama3-405b", tokens=15.6e12, gpus=1000, global_batch=1000)
    assert "fastest the search found for 1,000 = 2^3 x 5^3 GPUs" in p["split_note"]
    assert 512 in {r["gpus"] for r in p["better_runs"]}
    assert all(r["gpu_hours"] <= (1 - GAIN) * p["gpu_hours"] for r in p["better_runs"])


@pytest.mark.parametrize("model,gpus", [("llama3-8b", 512), ("llama3-70b", 1024)])
def test_a_batch_that_splits_well_gets_no_alternatives(model, gpus):
    p = cp.plan(model=model, tokens=15e12, gpus=gpus)
    assert p["better_runs"] == [] and p["split_note"] is None
    assert "instead" not in report(p)


def test_a_given_layout_is_taken_as_given():
    p = cp.plan(model="llama3-8b", tokens=15e12, gpus=1920, tp=1, pp=15, cp=8)
    assert p["better_runs"] == [] and p["split_note"] is None


@pytest.mark.parametrize("command", [["capacity_plan", "--tokens", "15T"], ["step_time", "--search"]])
def test_a_gpu_count_the_batch_cannot_run_on_names_the_counts_and_batches_that_can(command):
    module, *flags = command
    run = subprocess.run([sys.executable, "-m", f"playground.{module}", "--model", "llama3-8b", "--gpus", "1000",
                          *flags], capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and run.stdout == ""
    (line,) = run.stderr.strip().splitlines()
    assert "no layout of 1,000 GPUs runs a global batch of 512 sequences" in line
    assert "512 sequences run on 512 or 1,024 GPUs" in line and "1,000 GPUs run a batch of 500 or 1,000 sequences" in line


def test_the_figures_of_the_thousand_gpu_exercise():
    """Chapter 5's ex-capacity-1000 solution: the runs the error names, each planned."""
    days = {}
    for gpus, batch in ((1024, 512), (1000, 1000), (1000, 500), (512, 512)):
        p = cp.plan(model="llama3-8b", tokens=15e12, gpus=gpus, global_batch=batch)
        days[gpus, batch] = (round(p["days"], 1), round(p["gpu_hours"]))
    assert days == {(1024, 512): (17.2, 422_287), (1000, 1000): (16.7, 399_614), (1000, 500): (17.6, 422_154),
                    (512, 512): (32.4, 398_279)}
