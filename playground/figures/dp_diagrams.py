"""Schematic diagrams of chapters 0 and 1: the link hierarchy and the ring all-reduce's steps.

Drawn with matplotlib patches, arrows and text; every bandwidth comes from ``playground.hardware``
and every step of the ring from the same chunk indices ``playground.data_parallel.ring`` uses.
"""

from __future__ import annotations

from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

from playground.figures import figure
from playground.hardware import gpu
from playground.plotting import COLORS, new_figure

BLUE, ORANGE, GREEN, RED, GREY = COLORS[0], COLORS[1], COLORS[2], COLORS[3], "#555555"


def _box(ax, x, y, w, h, text, color, fontsize=9, alpha=0.25, text_color="k"):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.08",
                                fc=color, ec=color, alpha=alpha, lw=1.2))
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.08",
                                fc="none", ec=color, lw=1.2))
    if text:
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fontsize,
                color=text_color)


def _line(ax, a, b, color, lw=1.5, ls="-"):
    ax.plot([a[0], b[0]], [a[1], b[1]], color=color, lw=lw, ls=ls, solid_capstyle="round")


@figure("link_hierarchy_diagram.png")
def link_hierarchy_diagram():
    """GPU -> NVLink/NVSwitch inside a node -> NIC -> leaf/spine network across nodes (H100)."""
    h100 = gpu("H100")
    nvlink = h100.nvlink_bytes_per_s / 1e9          # one direction, per GPU
    nic = h100.network_bytes_per_s / 1e9            # one direction, per GPU
    per_node = h100.gpus_per_node
    fig, ax = new_figure(width=10, height=5.0)
    ax.set_axis_off()
    ax.set_xlim(0, 12.2)
    ax.set_ylim(0.1, 6.2)
    ax.grid(False)
    spine_y, leaf_y, nic_y, gpu_y, switch_y = 5.5, 4.3, 3.0, 1.9, 0.6
    width, starts = 4.0, (0.2, 4.5)
    spine_x = (starts[0] + starts[1] + width) / 2
    _box(ax, spine_x - 1.3, spine_y, 2.6, 0.5, "spine switch", RED)
    for node, x0 in enumerate(starts):
        ax.add_patch(Rectangle((x0, 0.25), width, 3.4, fc="#f4f4f4", ec=GREY, lw=1.0, ls="--"))
        ax.text(x0 + 0.08, 3.6, f"node {node} ({per_node} GPUs)", fontsize=8.5, va="top",
                color=GREY)
        _box(ax, x0 + 0.7, leaf_y, width - 1.4, 0.5, f"leaf switch {node}", RED)
        _line(ax, (x0 + width / 2, leaf_y + 0.5), (spine_x, spine_y), RED, lw=2.2)
        _box(ax, x0 + 0.25, switch_y, width - 0.5, 0.45, "NVSwitch", BLUE)
        step = (width - 0.4) / per_node
        for g in range(per_node):
            x = x0 + 0.2 + g * step + 0.04
            w = step - 0.08
            _box(ax, x, gpu_y, w, 0.55, f"GPU\n{node * per_node + g}", GREEN, fontsize=6.5)
            _box(ax, x + 0.03, nic_y, w - 0.06, 0.32, "NIC", ORANGE, fontsize=6)
            cx = x + w / 2
            _line(ax, (cx, gpu_y), (cx, switch_y + 0.45), BLUE, lw=2.4)          # NVLink
            _line(ax, (cx, gpu_y + 0.55), (cx, nic_y), ORANGE, lw=1.4)          # PCIe to the NIC
            _line(ax, (cx, nic_y + 0.32), (x0 + width / 2, leaf_y), ORANGE, lw=0.8)  # cable
    # one label per kind of link, in a column on the right: per-GPU bandwidth, one direction
    right = starts[1] + width
    label_x = right + 0.35
    ax.annotate(f"network: {nic:.0f} GB/s per GPU,\neach way (NIC to leaf\nto spine), "
                f"{nvlink / nic:.0f}x less\nthan NVLink", xy=(right - 0.95, 3.71),
                xytext=(label_x, 3.55), fontsize=9, color=ORANGE, va="center",
                arrowprops=dict(arrowstyle="->", color=ORANGE))
    ax.annotate(f"NVLink: {nvlink:.0f} GB/s per\nGPU, each way (GPU to\nNVSwitch to GPU, "
                "inside\na node)", xy=(right - 0.45, 1.45), xytext=(label_x, 1.35), fontsize=9,
                color=BLUE, va="center", arrowprops=dict(arrowstyle="->", color=BLUE))
    ax.text(spine_x + 1.5, spine_y + 0.25, "leaf/spine fabric (InfiniBand or RoCE):\n"
            "every node reaches every other", fontsize=8.5, va="center", color=RED)
    ax.set_title(f"The link hierarchy of an {h100.name} cluster: fast inside a node, "
                 "slower across nodes", fontsize=11)
    return fig


# ----------------------------------------------------------------------------- the ring
def ring_states(n: int = 4) -> list[dict]:
    """The ring all-reduce on ``n`` ranks, step by step: which ranks' contributions each rank's
    copy of each chunk holds, and who sends which chunk.  The chunk indices are those of
    ``playground.data_parallel.ring`` (reduce-scatter: rank r sends chunk (r-i-1) mod n at step i;
    all-gather: chunk (r-i) mod n)."""
    held = [[{r} for _ in range(n)] for r in range(n)]   # held[r][c]: contributions in r's chunk c
    states = [{"phase": "start", "step": 0, "held": [[set(s) for s in row] for row in held],
               "sent": []}]
    for phase, offset in (("reduce-scatter", 1), ("all-gather", 0)):
        for i in range(n - 1):
            sent = [(r, (r - i - offset) % n) for r in range(n)]          # (sender, chunk)
            payload = {(r + 1) % n: (c, set(held[r][c])) for r, c in sent}
            for dst, (c, contributions) in payload.items():
                held[dst][c] = held[dst][c] | contributions if phase == "reduce-scatter" \
                    else set(contributions)
            states.append({"phase": phase, "step": i + 1, "sent": sent,
                           "held": [[set(s) for s in row] for row in held]})
    return states


SUM_COLORS = ["#deebf7", "#9ecae1", "#4292c6", "#08306b"]   # 1 .. 4 contributions, light to dark


def _ring_panel(ax, state, n):
    ax.set_axis_off()
    ax.set_xlim(-0.9, n + 0.1)
    ax.set_ylim(n + 0.75, -0.75)
    for r in range(n):
        ax.text(-0.12, r + 0.5, f"rank {r}", ha="right", va="center", fontsize=8)
        for c in range(n):
            k = len(state["held"][r][c])
            ax.add_patch(Rectangle((c + 0.05, r + 0.08), 0.9, 0.84, fc=SUM_COLORS[k - 1],
                                   ec="white", lw=1))
            label = "".join(str(x) for x in sorted(state["held"][r][c]))
            ax.text(c + 0.5, r + 0.5, label, ha="center", va="center", fontsize=7,
                    color="white" if k >= 3 else "k")
    for r, c in state["sent"]:   # the chunk rank r sent this step, and where it went
        ax.add_patch(Rectangle((c + 0.05, r + 0.08), 0.9, 0.84, fc="none", ec=ORANGE, lw=2.2))
        if r + 1 < n:
            ax.add_patch(FancyArrowPatch((c + 0.75, r + 0.8), (c + 0.75, r + 1.2),
                                         arrowstyle="-|>", mutation_scale=9, color=ORANGE, lw=1.4))
        else:   # the last rank sends to rank 0: leave at the bottom, arrive at the top
            ax.add_patch(FancyArrowPatch((c + 0.75, r + 0.8), (c + 0.75, r + 1.45),
                                         arrowstyle="-", color=ORANGE, lw=1.4, ls="--"))
            ax.add_patch(FancyArrowPatch((c + 0.75, -0.45), (c + 0.75, 0.2),
                                         arrowstyle="-|>", mutation_scale=9, color=ORANGE,
                                         lw=1.4, ls="--"))
    for c in range(n):
        ax.text(c + 0.5, n + 0.55, f"c{c}", ha="center", va="center", fontsize=7, color=GREY)
    title = "start: each rank its own gradient" if state["phase"] == "start" else \
        f"{state['phase']} step {state['step']}"
    ax.set_title(title, fontsize=9)


@figure("ring_allreduce_diagram.png")
def ring_allreduce_diagram():
    """n = 4 ranks, 4 chunks: n-1 reduce-scatter steps, then n-1 all-gather steps."""
    n = 4
    states = ring_states(n)
    fig, axes = new_figure(ncols=4, nrows=2, width=10, height=5.8)
    for ax, state in zip(axes.flat, states):
        _ring_panel(ax, state, n)
    legend = axes.flat[-1]
    legend.set_axis_off()
    legend.set_xlim(0, 1)
    legend.set_ylim(1, 0)
    legend.text(0.0, 0.02, "colour: ranks summed\nin that copy of a chunk", fontsize=8, va="top")
    for k in range(n):
        legend.add_patch(Rectangle((0.02, 0.24 + k * 0.12), 0.16, 0.09, fc=SUM_COLORS[k], ec="w"))
        legend.text(0.23, 0.285 + k * 0.12, f"{k + 1} rank{'s' if k else ''}"
                    + (" (full sum)" if k == n - 1 else ""), fontsize=8, va="center")
    legend.add_patch(Rectangle((0.02, 0.75), 0.16, 0.09, fc="none", ec=ORANGE, lw=2.2))
    legend.text(0.23, 0.795, "sent to rank r+1\n(arrow; 3 -> 0 wraps)", fontsize=8, va="center")
    legend.text(0.0, 0.93, "digits: which ranks", fontsize=8, va="center")
    fig.suptitle("Ring all-reduce, n = 4: each step every rank sends one chunk of S/n bytes "
                 "to its right neighbour", fontsize=10.5)
    return fig
