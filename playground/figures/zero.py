"""Figures of the ZeRO chapter: memory per rank vs d (formula and counted), the paper's
Table 1 regenerated, bytes moved per step per stage (measured), and the timeline of ZeRO-3
with and without prefetching (real timestamps, emulated compute)."""

from __future__ import annotations

from functools import lru_cache

from playground.figures import figure
from playground.plotting import COLORS, new_figure

N_MEASURED = (1, 2, 4)
STAGE_LABELS = ("stage 0 (DP)", "stage 1", "stage 2", "stage 3")


@lru_cache(maxsize=1)
def _measured():
    """{n: rank-0 results} of the four stages, mixed precision, on 1, 2 and 4 ranks."""
    from playground.zero.runs import launch
    from playground.model import ModelConfig
    from playground.zero.accounting import exact_bytes
    from playground.zero.runs import predicted_sent_bytes, unit_numels
    variants = [("zero", s, "mixed") for s in range(4)]
    out = {n: launch(n, variants, steps=2, batch_size=8)[0] for n in N_MEASURED}
    numels = unit_numels(ModelConfig())
    for n, result in out.items():  # the captions say "as predicted": refuse to draw otherwise
        for stage in range(4):
            got = result[("zero", stage, "mixed")]
            assert got["state_bytes"] == exact_bytes(numels, n, stage, 0), (n, stage)
            assert got["sent_bytes"][0] == predicted_sent_bytes(numels, n, stage, "mixed"), (n, stage)
    return out


@figure("zero_memory_vs_nd.png")
def memory_vs_nd():
    """Per-rank model-state bytes of each stage vs d: formula curves, counted points."""
    from playground.model import ModelConfig
    from playground.zero.accounting import predicted
    psi = ModelConfig().param_count()
    measured = _measured()
    fig, ax = new_figure(width=6.4, height=4.0)
    grid = [1, 2, 4, 8, 16, 32, 64]
    for stage, color in zip(range(4), COLORS):
        ax.plot(grid, [predicted(psi, n, stage)["total"] / 1e3 for n in grid], color=color,
                label=f"{STAGE_LABELS[stage]}: accounted")
        ax.plot(N_MEASURED, [measured[n][("zero", stage, "mixed")]["state_bytes"]["total"] / 1e3
                             for n in N_MEASURED], "o", color=color, markersize=7,
                markerfacecolor="none", markeredgewidth=2)
    ax.plot([], [], "o", color="grey", markerfacecolor="none", label="counted (rank 0)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("data-parallel degree $d$ (ranks)")
    ax.set_ylabel("model-state memory per rank (kB)")
    ax.set_title(f"TinyGPT, Ψ = {psi:,} parameters, bf16 + fp32 Adam (16 B/param)")
    ax.legend(fontsize=8)
    return fig


@figure("zero_paper_table.png")
def paper_table_figure():
    """The ZeRO paper's Table 1: printed values (markers) on the formula (lines)."""
    from playground.zero.accounting import PAPER_DP_DEGREES, PAPER_TABLE_1, paper_table
    rows = paper_table()
    fig, axes = new_figure(ncols=3, width=10, height=3.6, sharey=False)
    for ax, model in zip(axes, PAPER_TABLE_1):
        mine = [r for r in rows if r["model"] == model]
        for stage, color in zip(range(4), COLORS):
            ax.plot(PAPER_DP_DEGREES, [r["formula_gb"][stage] for r in mine], color=color,
                    label=STAGE_LABELS[stage] + " formula")
            ax.plot(PAPER_DP_DEGREES, [r["paper_gb"][stage] for r in mine], "x", color=color,
                    markersize=7)
        ax.set_xscale("log", base=4)
        ax.set_yscale("log")
        ax.set_title(f"{model} parameters")
        ax.set_xlabel("$d$ (ranks)")
    axes[0].set_ylabel("model states per device (GB)")
    axes[0].plot([], [], "x", color="grey", label="printed in the paper")
    axes[0].legend(fontsize=7)
    return fig


@figure("zero_bytes_moved.png")
def bytes_moved():
    """Bytes each rank sent per step, counted, per stage, next to (N-1)/N · {2,3}Ψ · 2 B."""
    from playground.model import ModelConfig
    psi = ModelConfig().param_count()
    measured = _measured()
    fig, ax = new_figure(width=6.4, height=3.6)
    width = 0.38
    for i, (n, color) in enumerate(zip((2, 4), COLORS[4:])):
        sent = [measured[n][("zero", s, "mixed")]["sent_bytes"][0] / 1e3 for s in range(4)]
        xs = [s + (i - 0.5) * width for s in range(4)]
        ax.bar(xs, sent, width=width, color=color, label=f"counted, $d$ = {n}")
        for s, x in zip(range(4), xs):
            formula = (3 if s == 3 else 2) * psi * 2 * (n - 1) / n / 1e3
            ax.plot([x - width / 2, x + width / 2], [formula] * 2, color="black", linewidth=2)
    ax.plot([], [], color="black", linewidth=2, label="accounted $(d-1)/d·\\{2,3\\}Ψ$·2 B")
    ax.set_xticks(range(4), STAGE_LABELS)
    ax.set_ylabel("bytes sent per rank per step (kB)")
    ax.set_title("Stage 3 pays 1.5× the traffic of stages 0-2")
    ax.legend(fontsize=8, loc="upper left")
    return fig


@figure("zero_prefetch_timeline.png")
def prefetch_timeline():
    """Rank 0's and rank 1's step, real timestamps: ZeRO-3's gathers without and with prefetch;
    compute padded to 10 ms per unit (emulated device time)."""
    from matplotlib.patches import Patch

    from playground.zero.zero3_runs import EMULATED_COMPUTE_S, exposed_ratio, prefetch_demo, timeline_rows
    runs = prefetch_demo()
    assert exposed_ratio(runs) < 0.5, "prefetching did not hide the gathers: refuse to draw"
    colors = {("forward", "gather"): COLORS[0], ("backward", "gather"): COLORS[0],
              ("forward", "compute"): COLORS[2], ("backward", "compute"): COLORS[3],
              ("backward", "reduce"): COLORS[1]}
    fig, axes = new_figure(nrows=2, width=9.0, height=5.0, sharex=True)
    for ax, prefetch in zip(axes, (False, True)):
        ticks = []
        for rank, result in enumerate(runs):
            result = result["prefetch", prefetch]
            for phase, unit, kind, start, end in timeline_rows(result):
                lane = 2 * rank + (0 if kind == "compute" else 1)
                ax.barh(lane, end - start, left=start, height=0.7, color=colors[phase, kind],
                        edgecolor="white", linewidth=0.5)
                if kind == "compute":
                    ax.text((start + end) / 2, lane, str(unit), ha="center", va="center",
                            fontsize=7, color="white")
            ticks += [(2 * rank, f"rank {rank} compute"), (2 * rank + 1, f"rank {rank} comm")]
            ax.text(1.0, 2 * rank, f" waited {1e3 * result['exposed_s']:.0f} ms\n for gathers\n (measured)",
                    transform=ax.get_yaxis_transform(), fontsize=7, va="center")
        ax.set_yticks([t for t, _ in ticks], [label for _, label in ticks], fontsize=8)
        ax.set_title("ZeRO-3, " + ("prefetching one unit ahead" if prefetch else
                                   "gathering just in time"), fontsize=10)
        ax.grid(axis="y", visible=False)
    handles = [Patch(color=COLORS[0], label="all-gather of a unit (real, gloo)"),
               Patch(color=COLORS[1], label="gradient reduce-scatter (real, ring)"),
               Patch(color=COLORS[2], label=f"forward compute (emulated, ≥ {EMULATED_COMPUTE_S * 1e3:.0f} ms)"),
               Patch(color=COLORS[3], label="backward compute (emulated)")]
    fig.legend(handles=handles, loc="outside lower center", ncols=2, fontsize=8)
    axes[1].set_xlabel("time since the step started (ms); numbers: unit; compute is emulated device time")
    return fig
