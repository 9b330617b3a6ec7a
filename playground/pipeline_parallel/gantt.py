"""A pipeline step drawn as a Gantt chart: one row per stage, a bar per forward and backward
(and, for the zero-bubble schedule, per weight-gradient pass W).

Used by the chapter's figures (``playground.figures.pipeline``) and by the bubble explorer
(``playground.pipeline_parallel.report.bubble_explorer``); the timeline comes from a real run
(``run_pipeline``) or from ``schedules.simulate``.
"""

from __future__ import annotations

from playground.plotting import COLORS

__all__ = ["draw_gantt"]


def draw_gantt(ax, timeline, scale: float = 1.0) -> None:
    """Stage rows, forward bars (blue), backward bars (orange; with a split backward: input
    gradient B orange, weight gradient W green), micro-batch index inside.

    Events of the interleaved schedule carry their chunk v as a fifth entry: its label gets v
    primes and its bar a lighter shade."""
    for k, events in enumerate(timeline):
        for op, m, start, end, *chunk in events:
            v = chunk[0] if chunk else 0
            colour = COLORS[{"F": 0, "B": 1, "W": 2}[op]]
            ax.barh(k, (end - start) * scale, left=start * scale, height=0.8, color=colour,
                    alpha=1.0 - 0.35 * (v % 2), edgecolor="white", linewidth=0.5)
            ax.text((start + end) / 2 * scale, k, str(m) + "\u2032" * v, ha="center",
                    va="center", fontsize=7, color="white")
    ax.set_yticks(range(len(timeline)), [f"stage {k}" for k in range(len(timeline))])
    ax.set_ylim(len(timeline) - 0.4, -0.6)
    ax.grid(axis="y", visible=False)
