"""Schematic diagrams of chapter 4: Megatron's f and g, sequence parallelism's transitions,
expert dispatch, and a rank grid laid on two nodes.  Drawn, not measured; the rank grid's
groups come from ``RankGrid`` itself, so the picture is the grid the code builds."""

from __future__ import annotations

from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from playground.figures import figure
from playground.plotting import COLORS, new_figure

SHARED, SHARDED, COMM, GREY = "#dddddd", "#9fd8c4", COLORS[1], "#555555"
SEQ = "#c6dcf2"  # sharded along the sequence


def _box(ax, x, y, w, h, text, color=SHARED, fontsize=9, weight="normal", edge=GREY, ls="-"):
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.02,rounding_size=0.08",
                                facecolor=color, edgecolor=edge, lw=1, ls=ls))
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize, weight=weight)


def _arrow(ax, x0, y0, x1, y1, color=GREY, lw=1.2, style="-|>", ls="-", rad=0.0):
    ax.add_patch(FancyArrowPatch((x0, y0), (x1, y1), arrowstyle=style, mutation_scale=10,
                                 color=color, lw=lw, ls=ls, connectionstyle=f"arc3,rad={rad}",
                                 shrinkA=0, shrinkB=0))


def _op(ax, x, y, name, color=COMM):
    ax.add_patch(FancyBboxPatch((x - 0.28, y - 0.28), 0.56, 0.56, boxstyle="circle,pad=0",
                                facecolor=color, edgecolor="black", lw=1))
    ax.text(x, y, name, ha="center", va="center", fontsize=11, weight="bold")


def _canvas(width, height, xlim, ylim):
    fig, ax = new_figure(width=width, height=height)
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.axis("off")
    ax.grid(False)
    return fig, ax


def _lanes(ax, x0, x1, boxes, lanes, y_of, shape_row):
    """Boxes repeated on every rank's lane between x0 and x1, joined by arrows."""
    for lane in lanes:
        y = y_of[lane]
        xs = [x for x, _, _ in boxes]
        _arrow(ax, x0, y, xs[0] - 0.55, y)
        for (x, text, color), nxt in zip(boxes, xs[1:] + [x1]):
            _box(ax, x, y, 1.1, 0.62, text, color, fontsize=8)
            _arrow(ax, x + 0.55, y, nxt - (0.55 if nxt != x1 else 0), y)
    for x, shape in shape_row:
        ax.text(x, y_of[lanes[-1]] - 0.5, shape, ha="center", va="top", fontsize=7.5, color=GREY)


@figure("tp_block_diagram.png")
def tp_block_diagram():
    """Megatron TP in one block: f opens each column-parallel region, g closes each row-parallel one."""
    fig, ax = _canvas(11.0, 3.9, (-0.4, 17.0), (-1.95, 2.75))
    y_of = {0: 1.55, 1: 0.35}
    mid = (y_of[0] + y_of[1]) / 2
    for x0, title, boxes, shapes in (
            (0.0, "attention", [(3.0, "Q|K|V\ncolumn-par.", SHARDED), (4.5, "attention\na/t heads", SHARDED),
                                (6.0, "W_o\nrow-par.", SHARDED)], [(4.5, "b·s·h/t per rank")]),
            (8.6, "MLP", [(11.6, "W_1\ncolumn-par.", SHARDED), (13.1, "GeLU\n4h/t cols", SHARDED),
                          (14.6, "W_2\nrow-par.", SHARDED)], [(13.1, "b·s·4h/t per rank")])):
        _box(ax, x0 + 0.55, mid, 0.9, 0.7, "LN", SHARED)
        ax.text(x0 + 0.55, mid - 0.55, "b·s·h, whole\non every rank", ha="center", va="top",
                fontsize=7.5, color=GREY)
        _arrow(ax, x0 + 1.0, mid, x0 + 1.52, mid)
        _op(ax, x0 + 1.8, mid, "f")
        for lane in (0, 1):
            _arrow(ax, x0 + 2.08, mid, x0 + 2.35, y_of[lane])
        _lanes(ax, x0 + 2.35, x0 + 6.85, boxes, (0, 1), y_of, shapes)
        for lane in (0, 1):
            _arrow(ax, x0 + 6.85, y_of[lane], x0 + 7.12, mid)
        _op(ax, x0 + 7.4, mid, "g")
        ax.text(x0 + 4.5, 2.35, title, ha="center", fontsize=11, weight="bold")
    for lane, name in ((0, "rank 0"), (1, "rank t−1")):
        ax.text(2.35, y_of[lane] + 0.42, name, fontsize=8, color=GREY)
    for xa, xb in ((7.68, 8.7), (16.28, 16.95)):  # the residual additions between the regions
        _arrow(ax, xa, mid, xb, mid)
        ax.text((xa + xb) / 2, mid + 0.12, "+x", ha="center", va="bottom", fontsize=9)
    ax.text(0.0, -1.35, "f: forward identity, backward all-reduce of ∂L/∂x  ·  "
            "g: forward all-reduce of the partial sums, backward identity",
            fontsize=9.5, ha="left")
    ax.text(0.0, -1.8, "Per layer: g twice forward, f twice backward, each on b·s·h·q bytes; "
            "shaded boxes hold 1/t of the weights", fontsize=9.5, ha="left", color=GREY)
    return fig


@figure("sequence_parallel_diagram.png")
def sequence_parallel_diagram():
    """SP: the token-wise regions are sharded along s; all-gather in, reduce-scatter out."""
    fig, ax = _canvas(11.0, 3.7, (-0.3, 14.6), (-1.75, 2.75))
    y_of = {0: 1.55, 1: 0.35}
    for lane, name in ((0, "rank 0"), (1, "rank t−1")):
        y = y_of[lane]
        ax.text(-0.2, y + 0.42, name, fontsize=8, color=GREY)
        stations = [(0.6, "LN\ns/t tokens", SEQ), (2.0, "AG", COMM),
                    (3.75, "Q|K|V … W_o\nTP region", SHARDED), (5.5, "RS", COMM),
                    (6.9, "+x, LN\ns/t tokens", SEQ), (8.3, "AG", COMM),
                    (10.05, "W_1 … W_2\nTP region", SHARDED), (11.8, "RS", COMM),
                    (13.2, "+x\ns/t tokens", SEQ)]
        half = {COMM: 0.28, SHARDED: 0.75, SEQ: 0.53}
        for (x, text, color), (nx, _, ncolor) in zip(stations, stations[1:] + [(14.4, "", None)]):
            if color == COMM:
                _op(ax, x, y, text)
            else:
                _box(ax, x, y, 2 * half[color] - 0.06, 0.62, text, color, fontsize=8)
            _arrow(ax, x + half[color], y, nx - half.get(ncolor, 0), y)
    for x, shape in ((0.6, "b·(s/t)·h"), (3.7, "b·s·h in, partial sums out"),
                     (6.9, "b·(s/t)·h"), (13.2, "b·(s/t)·h")):
        ax.text(x, y_of[1] - 0.5, shape, ha="center", va="top", fontsize=7.5, color=GREY)
    ax.text(-0.2, 2.4, "AG: all-gather along s (in place of f)   RS: reduce-scatter along s "
            "(in place of g)   blue: sharded along s   green: TP-sharded", fontsize=9)
    ax.text(-0.2, -1.2, "Forward bytes equal TP's: RS + AG is an all-reduce cut in two. "
            "Backward swaps them (AG ↔ RS)", fontsize=9.5)
    ax.text(-0.2, -1.6, "and gathers each saved column-parallel input again: 2 more all-gathers "
            "per layer.", fontsize=9.5, color=GREY)
    return fig


@figure("expert_dispatch_diagram.png")
def expert_dispatch_diagram():
    """EP: route on the token's rank, all-to-all to the experts' ranks, compute, all-to-all back."""
    fig, ax = _canvas(11.0, 4.6, (-0.5, 15.5), (-1.4, 4.6))
    ranks, per_rank = 4, 2
    colors = [COLORS[j] for j in (0, 2, 3, 4)]  # one colour per destination rank
    # each rank's 3 tokens and their top-2 experts (expert j lives on rank j // 2)
    choice = [[(0, 5), (2, 3), (7, 1)], [(4, 0), (1, 6), (3, 5)], [(6, 2), (5, 7), (0, 4)],
              [(3, 6), (1, 2), (7, 4)]]
    ys = [3.6 - 1.15 * r for r in range(ranks)]
    for r, y in enumerate(ys):
        ax.text(-0.4, y, f"rank {r}", va="center", fontsize=9, weight="bold")
        for j, experts in enumerate(choice[r]):
            _box(ax, 1.5 + 0.55 * j, y, 0.45, 0.45, f"x{3 * r + j}", SHARED, fontsize=7)
        _box(ax, 3.7, y, 0.95, 0.5, "router\ntop-k", SHARED, fontsize=7.5)
        for e_local in range(per_rank):
            ex = r * per_rank + e_local
            _box(ax, 9.3 + 1.25 * e_local, y, 1.05, 0.62, f"expert {ex}", colors[r], fontsize=8)
        _box(ax, 14.2, y, 1.2, 0.5, "Σ gate·out", SHARED, fontsize=7.5)
    # one arrow per (token, choice), coloured by the expert's rank: dispatch out, combine back
    pairs = [(r, j, ex // per_rank) for r in range(ranks) for j, experts in enumerate(choice[r]) for ex in experts]
    for r, j, dest in pairs:
        _arrow(ax, 4.2, ys[r] + 0.12 - 0.12 * j, 8.7, ys[dest] + 0.15 - 0.1 * j, color=colors[dest], lw=0.9)
        _arrow(ax, 11.9, ys[dest] + 0.15 - 0.1 * j, 13.55, ys[r] + 0.12 - 0.12 * j,
               color=colors[dest], lw=0.8, ls="--")
    ax.text(6.45, 4.3, "dispatch: all-to-all", ha="center", fontsize=10, weight="bold")
    ax.text(12.5, 4.3, "combine: all-to-all back", ha="center", fontsize=10, weight="bold")
    ax.text(-0.4, -0.55, "Each token goes to its k = 2 experts, wherever they live "
            "(E = 8 experts, E/e = 2 per rank on e = 4 ranks).", fontsize=9.5)
    ax.text(-0.4, -1.0, "Combine returns each output to its token's rank (dashed: the same "
            "pairs, reversed) to be weighted by its gate; backward runs both all-to-alls again.", fontsize=9.5, color=GREY)
    return fig


@figure("rank_grid_diagram.png")
def rank_grid_diagram():
    """16 ranks on two 8-GPU nodes, Megatron-Core's order (TP fastest): t = 4, c = 2, d = 2."""
    from playground.systems_map.grid import RankGrid

    grid = RankGrid(dp=2, cp=2, tp=4)  # outermost first: TP varies fastest
    per_node, w = 8, 1.0
    fig, ax = _canvas(11.0, 4.4, (-0.6, 19.4), (-2.4, 4.1))

    def xy(rank):
        node, slot = divmod(rank, per_node)
        return node * 10.0 + 0.35 + slot * 1.07, 2.0

    for node in range(2):
        ax.add_patch(FancyBboxPatch((node * 10.0, 0.4), 9.2, 3.5, boxstyle="round,pad=0.05",
                                    facecolor="white", edgecolor="black", lw=1.2))
        ax.text(node * 10.0 + 4.6, 3.5, f"node {node}: 8 GPUs on NVLink", ha="center", fontsize=9.5,
                weight="bold")
    tp_colors = ["#9ecae9", "#9fd8c4", "#f2c6a0", "#e5b7d3"]
    for g, group in enumerate(grid.all_groups("tp")):
        for rank in group:
            x, y = xy(rank)
            c = grid.coords(rank)
            _box(ax, x + w / 2, y, w, 0.9, f"{rank}\nt{c['tp']} c{c['cp']} d{c['dp']}",
                 tp_colors[g], fontsize=7.5)
        x0, x1 = xy(group[0])[0], xy(group[-1])[0] + w
        ax.plot([x0, x1], [1.3, 1.3], color=tp_colors[g], lw=3)
        ax.text((x0 + x1) / 2, 1.05, f"TP group {group[0]}–{group[-1]}", ha="center", va="top",
                fontsize=8, bbox=dict(facecolor="white", edgecolor="none", pad=1), zorder=5)
    for group in grid.all_groups("cp")[:1]:
        (xa, ya), (xb, _) = xy(group[0]), xy(group[1])
        _arrow(ax, xa + w / 2, ya + 0.5, xb + w / 2, ya + 0.5, color=COLORS[3], lw=1.5,
               style="<|-|>", rad=-0.35)
        ax.text((xa + xb) / 2 + w / 2, 3.0, f"CP pair {group[0]}, {group[1]}", ha="center",
                fontsize=8, color=COLORS[3], bbox=dict(facecolor="white", edgecolor="none", pad=1))
    for i, group in enumerate(grid.all_groups("dp")[:4]):
        (xa, ya), (xb, _) = xy(group[0]), xy(group[1])
        depth = 0.05 - 0.2 * i  # one level per pair, so no two pairs share a line
        ax.plot([xa + w / 2, xa + w / 2, xb + w / 2, xb + w / 2], [ya - 0.45, depth, depth, ya - 0.45],
                color="black", lw=1, ls="--")
    ax.text(9.6, -0.75, "DP pairs (r, r + 8) cross the network (dashed)", ha="center", va="top",
            fontsize=9)
    ax.text(-0.5, -1.45, "rank = 8·d + 4·c + t (TP fastest, then CP, then DP): TP and CP groups "
            "stay inside a node on NVLink;", fontsize=9.5)
    ax.text(-0.5, -1.95, "only DP's once-per-step gradient reduction leaves it. Swap the order and "
            "TP's 4 collectives per layer would cross the NIC.", fontsize=9.5, color=GREY)
    return fig
