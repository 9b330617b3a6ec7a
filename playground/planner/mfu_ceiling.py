"""The highest MFU published runs reached, by GPU architecture and precision: the planner's check
that a plan's speed is one somebody has seen.

Each run chapter 6 replays (``published_layouts.ALL_LAYOUTS``, ``published_stacks.STACK_RUNS``) is
read for its MFU: its model FLOPs (``flops_per_step`` with nothing recomputed, counted one way for
every row) over its published or
implied step time, over the dense peak *of the precision it ran in*, since an FP8 run measured
against the bf16 peak can pass 0.8 and says nothing about a bf16 plan.  ``mfu_ceiling`` returns the
highest of those on the plan's GPU architecture in its precision (on any architecture when fewer than
``MIN_RUNS`` ran on it: one or two runs, say a single badly tuned recipe, do not bound a GPU), and,
for a bf16 plan of 10,000 GPUs or more, no more than ``MAX_REPORTED_MFU``, the highest published for
a run that large (MegaScale's).  A dense plan is held to dense runs only: a mixture of experts reaches a
lower MFU of its active parameters (Blackwell's bf16 runs are all MoE, at 0.13-0.37), which says nothing
of what a dense model reaches there; a MoE plan to every run, as before.
"""

from __future__ import annotations

import functools

from playground.planner.costs import flops_per_step, peak_flops
from playground.planner.published_layouts import ALL_LAYOUTS
from playground.planner.published_row import published_step_time
from playground.planner.published_runs import MAX_REPORTED_MFU
from playground.planner.published_stacks import STACK_RUNS

__all__ = ["published_mfus", "mfu_ceiling", "LARGE_RUN_GPUS", "MIN_RUNS"]

LARGE_RUN_GPUS = 10_000   # MAX_REPORTED_MFU's scale: MegaScale's 12,288-GPU run
MIN_RUNS = 5              # runs of one architecture and precision that make it its own ceiling


@functools.lru_cache(maxsize=None)
def published_mfus() -> tuple[dict, ...]:
    """Every replayed run's MFU of its own precision's peak: ``name``, ``stack``, ``gpu``,
    ``architecture``, ``dtype``, ``gpus``, ``mfu`` and ``moe`` (a mixture of experts)."""
    out = []
    for row in ALL_LAYOUTS + STACK_RUNS:
        gpu, layout = row.cluster.gpu, row.layout
        model_flops = flops_per_step(row.model, layout, "none")
        mfu = model_flops / (published_step_time(row) * layout.gpus * peak_flops(gpu, layout.dtype))
        stack = getattr(row, "stack", row.cite)
        out.append({"name": row.name, "stack": stack, "gpu": gpu.name, "architecture": gpu.architecture,
                    "dtype": layout.dtype, "gpus": layout.gpus, "mfu": mfu, "moe": row.model.is_moe})
    return tuple(out)


def mfu_ceiling(gpu, dtype: str, gpus: int | None = None, dense: bool = False) -> dict | None:
    """The highest MFU (of ``dtype``'s peak) a replayed run on ``gpu``'s architecture reached in
    ``dtype`` (``scope`` says which runs were searched: that architecture's when ``MIN_RUNS`` or more
    ran on it, else every one's), with
    the run (``run``) and how many were searched (``runs``); for a bf16 plan of ``LARGE_RUN_GPUS`` or
    more, MegaScale's ``MAX_REPORTED_MFU`` when lower; with ``dense``, dense runs only.  None when no run ran
    in ``dtype``."""
    same = [r for r in published_mfus() if r["dtype"] == dtype and not (dense and r["moe"])]
    mine = [r for r in same if r["architecture"] == gpu.architecture]
    pool, scope = (mine, f"on {gpu.architecture.capitalize()} GPUs") if len(mine) >= MIN_RUNS else (same, "on any GPU")
    if not pool:
        return None
    best = max(pool, key=lambda r: r["mfu"])
    ceiling = {"mfu": best["mfu"], "runs": len(pool), "scope": scope,
               "run": f"{best['stack']}: {best['name']}", "large_run": False}
    if dtype == "bf16" and gpus is not None and gpus >= LARGE_RUN_GPUS and MAX_REPORTED_MFU < best["mfu"]:
        ceiling.update(mfu=MAX_REPORTED_MFU, run="MegaScale's 175B on 12,288 A100s, Jiang et al. 2024",
                       large_run=True)
    return ceiling
