"""Schematic diagrams of the ZeRO chapter, drawn with matplotlib patches (no measurement):
what each stage shards on each rank, and FSDP's gather -> compute -> free timeline."""

from __future__ import annotations

from matplotlib.patches import Patch, Rectangle

from playground.figures import figure
from playground.plotting import COLORS, new_figure

N_RANKS = 4
STATES = (("parameters", 2, COLORS[0]), ("gradients", 2, COLORS[1]), ("optimizer, K", 12, COLORS[2]))
STAGES = ("DP", "ZeRO-1", "ZeRO-2", "ZeRO-3")


def _held(stage: int, kind: int, shard: int, rank: int) -> bool:
    """Whether ``rank`` holds ``shard`` of state ``kind`` (0 params, 1 grads, 2 optimizer)."""
    sharded = {0: stage >= 3, 1: stage >= 2, 2: stage >= 1}[kind]
    return not sharded or shard == rank


def _bytes_per_param(stage: int, n: int = N_RANKS) -> float:
    return sum(b / (n if not _held(stage, k, 1, 0) else 1) for k, (_, b, _) in enumerate(STATES))


@figure("zero_partition_diagram.png")
def partition_diagram():
    """n = 4 ranks x (parameters | gradients | optimizer state), for DP and ZeRO-1/2/3: the
    quarters each rank holds are filled, the ones it dropped are outlines."""
    fig, axes = new_figure(ncols=4, width=10.0, height=3.6, sharey=True)
    for stage, ax in enumerate(axes):
        for rank in range(N_RANKS):
            y, x = N_RANKS - 1 - rank, 0.0
            for kind, (_, size, color) in enumerate(STATES):
                piece = size / N_RANKS
                for shard in range(N_RANKS):
                    held = _held(stage, kind, shard, rank)
                    ax.add_patch(Rectangle((x + shard * piece, y + 0.15), piece, 0.7,
                                           facecolor=color if held else "white",
                                           edgecolor=color, linewidth=0.8,
                                           hatch=None if held else "//", alpha=1 if held else 0.35))
                x += size + 0.6
        ax.set_xlim(-0.3, 17.5)
        ax.set_ylim(-0.1, N_RANKS + 0.05)
        ax.set_title(f"{STAGES[stage]}: {_bytes_per_param(stage):g} B/param per rank", fontsize=10)
        ax.set_xticks([])
        ax.tick_params(axis="y", length=0)
        ax.grid(False)
        for side in ("left", "bottom"):
            ax.spines[side].set_visible(False)
    axes[0].set_yticks([N_RANKS - 1 - r + 0.5 for r in range(N_RANKS)],
                       [f"rank {r}" for r in range(N_RANKS)])
    axes[0].tick_params(axis="y", length=0)
    handles = [Patch(facecolor=c, edgecolor=c, label=f"{name} ({b} B/param)") for name, b, c in STATES]
    handles.append(Patch(facecolor="white", edgecolor="grey", hatch="//",
                         label="a quarter this rank no longer keeps"))
    fig.legend(handles=handles, loc="outside lower center", ncols=4, fontsize=8)
    fig.suptitle("Mixed-precision Adam on n = 4 ranks: each stage drops what another rank keeps",
                 fontsize=11)
    return fig


# ----------------------------------------------------------------------------- FSDP timeline
UNITS = 3
T_F, T_B, T_AG, T_RS = 1.0, 2.0, 0.7, 0.7  # schematic durations (forward, backward, gather, RS)


def _schedule():
    """(lane, start, length, label, kind) for every block of one FSDP step with prefetch, and the
    gathered-units staircase [(time, units held)]."""
    blocks, held, t = [], [], 0.0
    blocks.append(("comm", t, T_AG, "AG 0", "gather"))
    ready = {0: T_AG}
    for i in range(UNITS):  # forward: compute i while gathering i + 1
        start = max(t, ready[i])
        if i + 1 < UNITS:
            blocks.append(("comm", start, T_AG, f"AG {i + 1}", "gather"))
            ready[i + 1] = start + T_AG
        blocks.append(("compute", start, T_F, f"F {i}", "forward"))
        t = start + T_F
    blocks.append(("comm", t, T_AG, f"AG {UNITS - 1}", "gather"))  # backward regathers
    ready = {UNITS - 1: t + T_AG}
    comm_free = t + T_AG
    for i in reversed(range(UNITS)):
        start = max(t, ready[i])
        if i > 0:
            blocks.append(("comm", max(start, comm_free), T_AG, f"AG {i - 1}", "gather"))
            ready[i - 1] = max(start, comm_free) + T_AG
            comm_free = ready[i - 1]
        blocks.append(("compute", start, T_B, f"B {i}", "backward"))
        t = start + T_B
        rs = max(t, comm_free)
        blocks.append(("comm", rs, T_RS, f"RS {i}", "reduce"))
        comm_free = rs + T_RS
    # units whose full parameters exist: from their gather's start to their compute's end
    events = []
    gathers = [b for b in blocks if b[4] == "gather"]
    computes = [b for b in blocks if b[0] == "compute"]
    for g, c in zip(gathers, computes):
        events += [(g[1], +1), (c[1] + c[2], -1)]
    level = 0
    for time in sorted({round(t, 9) for t, _ in events}):  # a free and a gather at one instant
        level += sum(d for t, d in events if round(t, 9) == time)
        held.append((time, level))
    return blocks, held


@figure("fsdp_timeline_diagram.png")
def fsdp_timeline_diagram():
    """One FSDP (ZeRO-3) step on 3 units with prefetch: all-gather, compute, free; in backward
    all-gather, backward, reduce-scatter, free; below, how many units are gathered at once."""
    blocks, held = _schedule()
    colors = {"gather": COLORS[0], "forward": COLORS[2], "backward": COLORS[3], "reduce": COLORS[1]}
    fig, (ax, mem) = new_figure(nrows=2, width=9.0, height=4.4, sharex=True,
                                gridspec_kw={"height_ratios": [2, 1.2]})
    lanes = {"compute": 1, "comm": 0}
    for lane, start, length, label, kind in blocks:
        ax.add_patch(Rectangle((start, lanes[lane] - 0.35), length, 0.7, facecolor=colors[kind],
                               edgecolor="white", linewidth=1.5))
        ax.text(start + length / 2, lanes[lane], label, ha="center", va="center", fontsize=8,
                color="white" if kind != "reduce" else "black")
    end = max(b[1] + b[2] for b in blocks)
    forward_end = max(b[1] + b[2] for b in blocks if b[4] == "forward")
    for a in (ax, mem):
        a.axvline(forward_end, color="grey", linestyle=":", linewidth=1)
    ax.text(forward_end / 2, 1.62, "forward: gather, compute, free", ha="center", fontsize=9)
    ax.text((forward_end + end) / 2, 1.62, "backward: gather, compute, reduce-scatter, free",
            ha="center", fontsize=9)
    ax.set_yticks([1, 0], ["compute\nstream", "comm\nstream"])
    ax.set_ylim(-0.6, 1.9)
    ax.set_xlim(0, end + 0.1)
    ax.grid(False)
    times = [0.0] + [t for t, _ in held] + [end]
    levels = [0] + [lvl for _, lvl in held] + [0]
    mem.step(times, levels, where="post", color=COLORS[4], linewidth=2)
    mem.fill_between(times, levels, step="post", color=COLORS[4], alpha=0.25)
    mem.set_yticks([0, 1, 2], ["0", "1 unit", "2 units"])
    mem.set_ylim(0, 2.6)
    mem.set_ylabel("gathered\nparameters", fontsize=9)
    mem.set_xlabel("time (schematic): the next unit's all-gather runs under this unit's compute")
    mem.set_xticks([])
    handles = [Patch(color=colors[k], label=t) for k, t in (
        ("gather", "all-gather (AG) of a unit"), ("forward", "forward (F)"),
        ("backward", "backward (B)"), ("reduce", "reduce-scatter (RS) of its gradient"))]
    fig.legend(handles=handles, loc="outside lower center", ncols=4, fontsize=8)
    return fig
