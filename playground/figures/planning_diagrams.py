"""Schematic diagrams of chapters 5-7: the capacity chain, the anatomy of one step, a failure timeline.

Drawn with matplotlib patches, arrows and text in the book's palette; the few numbers they show
come from the same functions the chapters call (``playground.planner.goodput``).
"""

from __future__ import annotations

import numpy as np
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

from playground.figures import figure
from playground.planner.goodput import LLAMA3_GPU_MTBF_HOURS, daly_interval, expected_goodput, young_interval
from playground.plotting import COLORS, new_figure

BLUE, ORANGE, GREEN, RED, PINK, SKY = COLORS[:6]
GREY = "0.55"


def _canvas(width, height, xlim, ylim):
    fig, ax = new_figure(width=width, height=height)
    ax.set(xlim=xlim, ylim=ylim)
    ax.axis("off")
    return fig, ax


def _box(ax, x, y, w, h, text, color, fontsize=10, alpha=0.18):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.08",
                                facecolor=color, edgecolor=color, alpha=alpha, lw=0))
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.08",
                                facecolor="none", edgecolor=color, lw=1.6))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fontsize)


def _arrow(ax, xy0, xy1, text="", color="0.25", offset=0.12, fontsize=9, **kw):
    ax.add_patch(FancyArrowPatch(xy0, xy1, arrowstyle="-|>", mutation_scale=14, color=color, lw=1.4, **kw))
    if text:
        ax.text((xy0[0] + xy1[0]) / 2, (xy0[1] + xy1[1]) / 2 + offset, text, ha="center", va="bottom",
                fontsize=fontsize, color=color)


@figure("capacity_chain_diagram.png")
def capacity_chain_diagram():
    """Tokens -> steps -> FLOPs -> GPU-hours -> days; memory per GPU -> the parallelism it forces."""
    fig, ax = _canvas(10.0, 4.6, (0, 10), (0, 4.6))
    ax.text(0.05, 4.35, "Time: how long the plan takes", fontsize=12, weight="bold", color=BLUE)
    chain = [("tokens\n$D$", ""), ("steps\n$D\\,/\\,(B s)$", "x"),
             ("FLOPs\n$C = 6 N_\\mathrm{active} D$", "$\\times\\ 6 N_\\mathrm{active} B s$"),
             ("GPU-hours\n$C\\,/\\,(\\mathrm{MFU}\\cdot F \\cdot 3600)$", "$\\div\\ \\mathrm{MFU}\\cdot F$"),
             ("days\nGPU-hours$\\,/\\,(24\\, n_\\mathrm{GPU})$", "$\\div\\ 24\\,n_\\mathrm{GPU}$")]
    widths = [1.1, 1.5, 2.0, 2.35, 2.05]
    gap, x = (10 - 0.1 - sum(widths)) / 4, 0.05
    for (text, label), w in zip(chain, widths):
        if label:  # each box's formula says what the arrow into it does
            _arrow(ax, (x - gap + 0.04, 3.35), (x - 0.04, 3.35))
        _box(ax, x, 2.95, w, 0.8, text, BLUE)
        x += w + gap
    ax.text(5, 2.55, "MFU: assumed (0.40), or predicted for one layout by the step-time model (chapter 6)",
            ha="center", fontsize=9, color="0.3", style="italic")

    ax.text(0.05, 2.05, "Memory: what it forces", fontsize=12, weight="bold", color=ORANGE)
    _box(ax, 0.05, 0.55, 2.6, 1.2, "memory per GPU\nstates $(2+2+K)\\,\\Psi$ / ZeRO\n+ activations"
         " + logits", ORANGE)
    _box(ax, 3.45, 0.55, 2.2, 1.2, "fits the usable\nmemory?\n(HBM $-$ 2 GiB $-$ 5%)", GREY)
    _box(ax, 6.55, 1.2, 3.4, 0.62, "yes: data parallelism for the rest", GREEN)
    _box(ax, 6.55, 0.2, 3.4, 0.78, "no: add TP (inside a node),\nthen PP, then CP; retry", RED)
    _arrow(ax, (2.7, 1.15), (3.4, 1.15))
    _arrow(ax, (5.7, 1.35), (6.5, 1.5), "yes", offset=0.04)
    _arrow(ax, (5.7, 0.95), (6.5, 0.6), "no", offset=-0.3)
    _arrow(ax, (6.5, 0.35), (4.55, 0.5), color=RED, connectionstyle="arc3,rad=-0.35")
    ax.text(8.25, 2.0, "the least model parallelism that fits", ha="center", fontsize=9, color="0.3",
            style="italic")
    return fig


def one_f_one_b(p: int, m: int):
    """Start times of a 1F1B schedule (forward 1, backward 2 time units): {(kind, stage, mb): start}."""
    order = []
    for stage in range(p):
        warm = min(p - stage - 1, m)
        ops = [("F", i) for i in range(warm)]
        for i in range(m - warm):
            ops += [("F", warm + i), ("B", i)]
        ops += [("B", i) for i in range(m - warm, m)]
        order.append(ops)
    start, free, pos = {}, [0.0] * p, [0] * p
    while any(pos[s] < len(order[s]) for s in range(p)):
        for s in range(p):
            while pos[s] < len(order[s]):
                kind, i = order[s][pos[s]]
                need = (("F", s - 1, i) if s > 0 else None) if kind == "F" else \
                    (("B", s + 1, i) if s < p - 1 else ("F", s, i))
                if need is not None and need not in start:
                    break
                ready = 0.0 if need is None else start[need] + (1 if need[0] == "F" else 2)
                start[(kind, s, i)] = max(free[s], ready)
                free[s] = start[(kind, s, i)] + (1 if kind == "F" else 2)
                pos[s] += 1
    return start


@figure("step_anatomy_diagram.png")
def step_anatomy_diagram():
    """One step of 1F1B on p = 4 stages, m = 6 micro-batches, with each term of eq-step marked."""
    p, m, dp_len, opt_len = 4, 6, 3.2, 0.9
    start = one_f_one_b(p, m)
    end_pipe = max(t + (1 if k[0] == "F" else 2) for k, t in start.items())
    fig, ax = _canvas(10.0, 4.9, (-1.6, end_pipe + 2.6 + opt_len), (-1.7, p + 1.55))
    row_y = {s: p - 1 - s for s in range(p)}
    for (kind, s, i), t in start.items():
        w, y = (1, GREEN) if kind == "F" else (2, BLUE)
        ax.add_patch(Rectangle((t, row_y[s] + 0.3), w, 0.6, facecolor=y, edgecolor="white", lw=1.2, alpha=0.85))
        ax.text(t + w / 2, row_y[s] + 0.6, f"{kind}{i + 1}", ha="center", va="center", fontsize=8, color="white")
        for k in range(2 if kind == "F" else 2):  # TP all-reduces inside each micro-batch (2 forward, 2 back)
            ax.add_patch(Rectangle((t + w * (0.3 + 0.4 * k), row_y[s] + 0.12), 0.12 * w / (1 + (kind == "B")),
                                   0.14, facecolor=PINK, lw=0))
    for s in range(p):
        busy = sorted((t, t + (1 if k[0] == "F" else 2)) for k, t in start.items() if k[1] == s)
        edges = [0.0] + [x for b in busy for x in b] + [end_pipe]
        for a, b in zip(edges[::2], edges[1::2]):
            if b - a > 1e-9:
                ax.add_patch(Rectangle((a, row_y[s] + 0.3), b - a, 0.6, facecolor="none", edgecolor=GREY,
                                       hatch="///", lw=0))
        ax.text(-0.2, row_y[s] + 0.6, f"stage {s}", ha="right", va="center", fontsize=9)
        last_b = start[("B", s, m - 1)]
        # each stage's gradients are final during its last backward: its reduction starts there
        ax.add_patch(Rectangle((last_b + 0.4, row_y[s] + 0.02), dp_len, 0.2, facecolor=ORANGE, lw=0, alpha=0.9))
    exposed = start[("B", 0, m - 1)] + 0.4 + dp_len - end_pipe   # stage 0 finishes last
    ax.add_patch(Rectangle((end_pipe, -0.05), exposed, p + 0.05, facecolor=ORANGE, alpha=0.12, lw=0))
    ax.add_patch(Rectangle((end_pipe + exposed, -0.05), opt_len, p + 0.05, facecolor=RED, alpha=0.25, lw=0))
    ax.text(end_pipe + exposed + opt_len / 2, p / 2, "optimizer", rotation=90, ha="center", va="center",
            fontsize=9)

    def bracket(x0, x1, y, text, color="0.2"):
        ax.annotate("", (x0, y), (x1, y), arrowprops=dict(arrowstyle="<->", color=color, lw=1.2))
        ax.text((x0 + x1) / 2, y + 0.1, text, ha="center", va="bottom", fontsize=9, color=color)

    top = p + 0.25
    bracket(0, end_pipe, top, "$(m + (p-1)/v)\\,T_\\mathrm{mb}$: $m$ micro-batches plus the bubble")
    bracket(end_pipe, end_pipe + exposed, top, "$T_\\mathrm{DP,exposed}$", ORANGE)
    bracket(end_pipe + exposed, end_pipe + exposed + opt_len, top + 0.6, "$T_\\mathrm{opt}$", RED)
    t0 = start[("F", 0, 0)]
    bracket(t0, t0 + 3, -0.45, "$T_\\mathrm{mb}$ = F + B", "0.2")
    # legend row
    items = [(GREEN, "forward of a micro-batch"), (BLUE, "backward (2x the forward)"),
             (PINK, "TP all-reduces (inside $T_\\mathrm{mb}$)"), ("hatch", "bubble: $(p-1)/v$ idle slots"),
             (ORANGE, "DP reduction: hidden behind the last backward, then exposed")]
    x, y = -1.5, -1.25
    for k, (color, text) in enumerate(items):
        xx, yy = x + (k % 3) * 8.2, y - 0.4 * (k // 3)
        if color == "hatch":
            ax.add_patch(Rectangle((xx, yy), 0.5, 0.25, facecolor="none", edgecolor=GREY, hatch="///", lw=0))
        else:
            ax.add_patch(Rectangle((xx, yy), 0.5, 0.25, facecolor=color, lw=0))
        ax.text(xx + 0.65, yy + 0.12, text, va="center", fontsize=8.5)
    ax.text(end_pipe / 2, -0.95, f"one step of 1F1B, p = {p} stages, m = {m} micro-batches, v = 1 (time →)",
            ha="center", fontsize=9, color="0.3", style="italic")
    return fig


# the numbers of chapter 7's goodput section: one checkpoint of 60 s, a 10-minute restart, Llama 3's MTBF
CKPT_S, RESTART_S, GPUS = 60.0, 600.0, 16384


@figure("failure_timeline_diagram.png")
def failure_timeline_diagram():
    """Work, checkpoints every tau, a failure, the lost work, the restart; and the Young/Daly trade-off."""
    fig, (ax, bx) = new_figure(nrows=2, width=9.0, height=6.2, gridspec_kw={"height_ratios": [1.0, 1.35]})
    ax.set(xlim=(-0.3, 15.2), ylim=(-1.2, 1.9))
    ax.axis("off")
    tau, ck, y = 3.0, 0.5, 0.0
    x = 0.0
    for k in range(2):  # two full segments: work tau, then a checkpoint write
        ax.add_patch(Rectangle((x, y), tau, 0.6, facecolor=BLUE, alpha=0.8, lw=0))
        ax.text(x + tau / 2, y + 0.3, "train $\\tau$", ha="center", va="center", color="white", fontsize=9)
        x += tau
        ax.add_patch(Rectangle((x, y), ck, 0.6, facecolor=ORANGE, lw=0))
        x += ck
    ax.text(x - ck / 2, y + 0.95, "$T_\\mathrm{ckpt}$", ha="center", fontsize=9, color=ORANGE)
    fail = x + 2.0
    ax.add_patch(Rectangle((x, y), fail - x, 0.6, facecolor=RED, alpha=0.25, hatch="xx", edgecolor=RED, lw=0))
    ax.text((x + fail) / 2, y + 0.3, "lost work", ha="center", va="center", fontsize=9)
    ax.plot([fail], [y + 0.75], marker="X", ms=14, color=RED)
    ax.text(fail, y + 1.05, "failure", ha="center", fontsize=9, color=RED)
    ax.add_patch(Rectangle((fail, y), 1.6, 0.6, facecolor=GREY, alpha=0.6, lw=0))
    ax.text(fail + 0.8, y + 0.3, "restart\n$T_\\mathrm{restart}$", ha="center", va="center", fontsize=8)
    redo = fail + 1.6
    ax.add_patch(Rectangle((redo, y), fail - x, 0.6, facecolor=BLUE, alpha=0.35, lw=0))
    ax.text(redo + (fail - x) / 2, y + 0.3, "redo", ha="center", va="center", fontsize=9)
    ax.add_patch(Rectangle((redo + fail - x, y), 15.0 - redo - (fail - x), 0.6, facecolor=BLUE, alpha=0.8, lw=0))
    ax.annotate("", (x, y - 0.2), (x + 0.02, 1.55), arrowprops=dict(arrowstyle="-", color="0.3", ls=":"))
    ax.text(x, 1.6, "last checkpoint", ha="center", fontsize=8, color="0.3")
    ax.annotate("", (x, y - 0.35), (fail, y - 0.35), arrowprops=dict(arrowstyle="<->", color=RED))
    ax.text((x + fail) / 2, y - 0.8, "lost < $\\tau$ (on average $\\tau/2$)", ha="center", fontsize=9, color=RED)
    ax.text(0, -1.1, "time →", fontsize=9, color="0.3")

    mtbf = LLAMA3_GPU_MTBF_HOURS * 3600 / GPUS
    taus = np.geomspace(2 * 60, 120 * 60, 200)
    best, daly = young_interval(CKPT_S, mtbf), daly_interval(CKPT_S, mtbf)
    bx.plot(taus / 60, 100 * CKPT_S / taus, color=ORANGE, label="checkpoint writes: $T_\\mathrm{ckpt}/\\tau$")
    bx.plot(taus / 60, 100 * (taus / 2) / mtbf, color=RED, label="lost work: $(\\tau/2)/T_\\mathrm{MTBF}$")
    bx.plot(taus / 60, 100 * (CKPT_S / taus + taus / 2 / mtbf), color="0.2", lw=2, label="their sum")
    bx.plot(taus / 60, [100 * (1 - expected_goodput(t, CKPT_S, RESTART_S, mtbf)) for t in taus], color=BLUE,
            ls="--", label="1 − goodput (exact, with the restart)")
    bx.axvline(best / 60, color="0.3", ls=":", lw=1)
    bx.text(best / 60 * 1.06, 31, f"Young $\\sqrt{{2 T_\\mathrm{{ckpt}} T_\\mathrm{{MTBF}}}}$ = {best / 60:.1f} min"
            f"\n(Daly {daly / 60:.1f} min)", fontsize=8.5, va="top")
    bx.set(xscale="log", ylim=(0, 46), xlabel="checkpoint interval $\\tau$ (minutes, log scale)",
           ylabel="time lost (% of the run)")
    bx.set_xticks([2, 5, 10, 20, 50, 100], labels=["2", "5", "10", "20", "50", "100"])
    bx.set_title(f"accounted for $T_\\mathrm{{ckpt}}$ = {CKPT_S:.0f} s, $T_\\mathrm{{restart}}$ = "
                 f"{RESTART_S / 60:.0f} min, $T_\\mathrm{{MTBF}}$ = {mtbf / 3600:.2f} h (Llama 3's rate)",
                 fontsize=10)
    bx.legend(fontsize=8, loc="upper center", ncol=2)
    return fig
