"""Schematic diagrams of the pipeline chapter: the stages themselves, and activation memory over time.

Both are drawn from the schedules' own action lists (``schedules.simulate``, ideal times: one
forward t = 1, one backward t = 2), not from a timed run: they show the idea, the plots of
``pipeline.py`` show the measurements.
"""

from __future__ import annotations

from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from playground.figures import figure
from playground.pipeline_parallel.gantt import draw_gantt
from playground.pipeline_parallel.schedules import simulate
from playground.plotting import COLORS, new_figure

P, M = 4, 8   # stages p and micro-batches m, the chapter's running example


def _arrow(ax, start, end, colour, text, above: bool) -> None:
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=14, lw=1.8,
                                 color=colour))
    x, y = (start[0] + end[0]) / 2, start[1] + (0.12 if above else -0.12)
    ax.text(x, y, text, ha="center", va="bottom" if above else "top", fontsize=8.5, color=colour)


@figure("pipeline_stages_diagram.png")
def stages_diagram():
    """The model's chain cut into p = 4 stages on 4 ranks: activations forward, gradients back."""
    fig, ax = new_figure(width=8.0, height=3.3)
    ax.set_xlim(-0.2, 4 * 2.0 + 0.1)
    ax.set_ylim(-1.45, 1.75)
    ax.axis("off")
    layers = ["embedding\n+ block 1", "block 2", "block 3", "block 4\n+ head + loss"]
    width, gap = 1.45, 0.55
    for r, name in enumerate(layers):
        x = r * (width + gap)
        ax.add_patch(FancyBboxPatch((x, -0.45), width, 0.9, boxstyle="round,pad=0.02,rounding_size=0.08",
                                    facecolor="#E8F1F8", edgecolor=COLORS[0], lw=1.5))
        ax.text(x + width / 2, 0.12, f"stage {r}", ha="center", va="center", fontsize=10,
                weight="bold", color=COLORS[0])
        ax.text(x + width / 2, -0.2, name, ha="center", va="center", fontsize=8.5)
        ax.text(x + width / 2, 0.62, f"rank {r}", ha="center", va="bottom", fontsize=9, color="0.35")
        if r < len(layers) - 1:
            x0, x1 = x + width + 0.03, x + width + gap - 0.03
            _arrow(ax, (x0, 0.3), (x1, 0.3), COLORS[0], "", True)
            _arrow(ax, (x1, -0.3), (x0, -0.3), COLORS[1], "", False)
    # the legend of the arrows, once, in words
    ax.text(0.0, 1.45, "\u2192  forward: the activation of micro-batch i, shape (b, s, h), b s h q bytes",
            fontsize=9, color=COLORS[0], ha="left")
    ax.text(0.0, 1.15, "\u2190  backward: the gradient of that activation, the same shape and bytes",
            fontsize=9, color=COLORS[1], ha="left")
    # the mini-batch cut into micro-batches, entering stage 0
    for i in range(M):
        ax.add_patch(FancyBboxPatch((0.02 + i * 0.18, -1.25), 0.14, 0.32,
                                    boxstyle="round,pad=0.01", facecolor=COLORS[2], alpha=0.85,
                                    edgecolor="white"))
    ax.text(0.02 + M * 0.18 + 0.1, -1.09, f"the mini-batch of B sequences, cut into m = {M} "
            "micro-batches of b = B/m sequences:\nthey enter stage 0 one after another, so "
            f"all p = {P} stages can work at once", fontsize=8.5, va="center", ha="left")
    return fig


def _held(events) -> list[tuple[float, int]]:
    """(time, micro-batches whose activations the stage holds) after each change: +1 when a
    forward starts saving, -1 when its backward ends."""
    changes: dict[float, int] = {}
    for op, _, start, end, *_ in events:
        if op not in ("F", "B"):
            continue
        t, delta = (start, 1) if op == "F" else (end, -1)
        changes[t] = changes.get(t, 0) + delta    # a backward ending as a forward starts: net 0
    points, held = [(0.0, 0)], 0
    for t in sorted(changes):
        held += changes[t]
        points.append((t, held))
    return points


@figure("pipeline_memory_diagram.png")
def memory_diagram():
    """Stage 0's saved activations over one step: GPipe's sawtooth against 1F1B's plateau."""
    fig, axes = new_figure(nrows=4, width=8.0, height=6.6, sharex=True,
                           gridspec_kw={"height_ratios": [1.5, 1.0, 1.5, 1.0]})
    for n, (schedule, name) in enumerate((("gpipe", "GPipe"), ("1f1b", "1F1B"))):
        strip, mem = axes[2 * n], axes[2 * n + 1]
        timeline = simulate(schedule, P, M, 1.0, 2.0)
        draw_gantt(strip, timeline)
        strip.set_yticks(range(P), [f"stage {r}" for r in range(P)], fontsize=8)
        strip.axhspan(-0.45, 0.45, color=COLORS[4], alpha=0.12, lw=0)   # the stage plotted below
        strip.set_title(f"{name}, p = {P} stages, m = {M} micro-batches: the schedule "
                        "(blue forward, orange backward)", fontsize=10, loc="left")
        points = _held(timeline[0])
        peak = max(h for _, h in points)
        xs = [t for t, _ in points] + [max(e[3] for st in timeline for e in st)]
        ys = [h for _, h in points] + [points[-1][1]]
        mem.fill_between(xs, ys, step="post", color=COLORS[4], alpha=0.35, lw=0)
        mem.step(xs, ys, where="post", color=COLORS[4], lw=1.8)
        mem.axhline(peak, color="0.3", lw=0.8, ls=":")
        bound = "all m micro-batches" if schedule == "gpipe" else "at most p in flight"
        mem.text(0.3, peak + 0.4, f"peak {peak} micro-batches' activations ({bound})",
                 fontsize=8.5, va="bottom")
        mem.set_ylim(0, M + 2.8)
        mem.set_yticks([0, P, M])
        mem.set_ylabel("stage 0\nholds", fontsize=9)
    axes[-1].set_xlabel("time (units of one micro-batch forward; a backward takes 2)")
    return fig
