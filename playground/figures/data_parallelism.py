"""Figures of the data-parallelism chapter; each runs the real measurement it plots.

``draw_alpha_beta``, ``draw_cost_map`` and ``draw_timeline`` draw from a run's results without
running anything: chapter 1 calls them on the very run whose numbers it prints, and shows each as
that cell's output, so a figure and its text never come from two runs.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from playground.data_parallel import cost_model
from playground.data_parallel.allreduce_lab import MB, count_bytes, time_all_reduces
from playground.figures import figure
from playground.launch import run
from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator

from playground.plotting import COLORS, new_figure

LABELS = {"ring": "ring", "parameter_server": "parameter server", "sharded_ps": "sharded PS (n servers)",
          "tree": "tree (reduce + broadcast)", "builtin": "dist.all_reduce (gloo)"}
COLOR = dict(zip(LABELS, COLORS))
TIMED_SIZES = [2 ** k for k in range(12, 25, 2)]  # 4 KiB .. 16 MiB


@lru_cache(maxsize=None)
def _timed(world_size: int, sizes: tuple, algorithms: tuple, calibrate: bool):
    return run(time_all_reduces, world_size, list(sizes), algorithms, 5, 1, calibrate,
               timeout_s=600, quiet=True)[0]


@figure("dp_bytes_per_rank.png")
def bytes_per_rank():
    numel = 840  # divisible by every n from 2 to 8
    S = 4 * numel
    values = run(count_bytes, 8, numel, timeout_s=300, quiet=True)
    fig, ax = new_figure()
    Ns = np.arange(2, 9)
    # ring and sharded PS send the same 2(n-1)/n·S: the ring is drawn wide underneath and the
    # sharded PS dashed on top, so both stay visible (the caption says they coincide)
    styles = {"parameter_server": dict(lw=1.8), "tree": dict(lw=1.8),
              "ring": dict(lw=5, alpha=0.45), "sharded_ps": dict(lw=1.8, ls="--")}
    for alg in ("parameter_server", "tree", "ring", "sharded_ps"):
        formula = [cost_model.busiest_rank_bytes(alg, int(N), S) / S for N in Ns]
        measured = [max(values[r][N][alg][0] for r in range(N)) / S for N in Ns]
        ax.plot(Ns, formula, color=COLOR[alg], label=f"{LABELS[alg]}: formula", **styles[alg])
        ax.plot(Ns, measured, "o" if alg != "sharded_ps" else "x", color=COLOR[alg],
                mfc="none", ms=9 if alg == "ring" else 6)
    ax.set_xlabel("ranks n")
    ax.set_ylabel("bytes sent by the busiest rank / S")
    ax.set_title("One all-reduce of S bytes: lines = formula, markers = counted")
    ax.legend()
    return fig


ALPHA_BETA_ALGS = ("ring", "parameter_server", "tree", "builtin")


def draw_alpha_beta(result: dict, cores: int):
    """Left: the ping-pong and its α-β fit.  Right: the all-reduces of ``result`` (a
    ``time_all_reduces(..., calibrate=True)`` run) against the model with the machine bound."""
    model = result["alpha_beta"]
    n = result["world_size"]
    fig, (left, right) = new_figure(ncols=2, width=10, height=4)
    sizes = np.array(sorted(result["ping_pong"]))
    left.loglog(sizes, [result["ping_pong"][s] * 1e6 for s in sizes], "o", label="ping-pong, measured")
    left.loglog(sizes, (model.alpha_s + sizes * model.beta_s_per_byte) * 1e6, "-",
                label=f"fit: α = {model.alpha_s * 1e6:.0f} µs, 1/β = {model.bandwidth_gb_s:.2f} GB/s")
    left.set_xlabel("message size (bytes)")
    left.set_ylabel("one-way time (µs)")
    left.set_title("Two ranks: T = α + S·β")
    left.legend()
    timed_sizes = sorted(result["times"])
    x = np.array(timed_sizes, dtype=float)
    right.loglog(x, [cost_model.machine_bound(model, n, s, cores) * 1e3 for s in x], ":",
                 color="k", label=f"shared-machine bound, {cores} cores")
    for alg in [a for a in ALPHA_BETA_ALGS if a in result["times"][timed_sizes[0]]]:
        measured = [result["times"][s][alg]["median_s"] * 1e3 for s in timed_sizes]
        right.loglog(x, measured, "o", color=COLOR[alg], label=f"{LABELS[alg]}, measured")
        if alg != "builtin":
            right.loglog(x, [cost_model.predict(model, alg, n, s, cores=cores) * 1e3 for s in x],
                         "-", color=COLOR[alg], label=f"{LABELS[alg]}, predicted")
    right.set_xlabel("all-reduce size S (bytes)")
    right.set_ylabel("time (ms)")
    right.set_title(f"n = {n} ranks on this machine")
    right.legend(fontsize=7)
    return fig


@figure("dp_busbw.png")
def busbw_ring_vs_builtin():
    sizes = tuple(2 ** k for k in range(16, 27, 2))  # 64 KiB .. 64 MiB
    fig, ax = new_figure()
    for n, style in ((2, "--"), (4, "-")):
        result = _timed(n, sizes, ("ring", "builtin"), False)
        for alg in ("ring", "builtin"):
            ax.semilogx([s / MB for s in sizes],
                        [result["times"][s][alg]["busbw_gb_s"] for s in sizes],
                        style, marker="o", color=COLOR[alg], label=f"{LABELS[alg]}, n = {n}")
    ax.set_xlabel("all-reduce size (MiB)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_title("busbw = S/T · 2(n-1)/n, median of 5 interleaved rounds")
    ax.legend()
    return fig


def draw_cost_map(model: cost_model.AlphaBeta):
    """Predicted all-reduce time against n at three sizes, for the fitted ``model``."""
    fig, axes = new_figure(ncols=3, width=12, height=3.8, sharey=False)
    ns = np.arange(2, 65)
    ticks = [2, 4, 8, 16, 32, 64]
    for ax, size in zip(axes, (4 * 1024, MB, 256 * MB)):
        # at small S the parameter server's and the ring's latency terms are equal, 2(n-1)α:
        # the server is drawn wide underneath, the ring dashed on top, so both stay visible
        for alg, style in (("parameter_server", dict(lw=5, alpha=0.45)), ("tree", dict(lw=1.8)),
                           ("ring", dict(lw=1.8, ls="--"))):
            ax.loglog(ns, [cost_model.predict(model, alg, int(k), size) * 1e3 for k in ns],
                      color=COLOR[alg], label=LABELS[alg], **style)
        ax.set_title(f"S = {size / MB:g} MiB" if size >= MB else f"S = {size // 1024} KiB")
        ax.set_xlabel("ranks n")
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xticks(ticks, [str(t) for t in ticks])
    axes[0].set_ylabel("predicted time (ms)")
    axes[0].legend()
    fig.suptitle(f"α-β-γ model, predicted, with the fit α = {model.alpha_s * 1e6:.0f} µs, "
                 f"1/β = {model.bandwidth_gb_s:.2f} GB/s (independent links)")
    return fig


def draw_timeline(result: dict):
    """Backward (grad-ready ticks) and each bucket's all-reduce from launch to completion."""
    events = result["events"]
    t = {k: [(i, s * 1e3) for kind, i, s in events if kind == k]
         for k in ("grad_ready", "launch", "done", "backward_start", "backward_end", "finished")}
    begin, end = t["backward_start"][0][1], t["backward_end"][0][1]
    fig, ax = new_figure(width=9, height=3.6)
    ax.barh(1, begin, left=0, height=0.5, color=COLORS[2], alpha=0.35, label="forward (compute)")
    ax.barh(1, end - begin, left=begin, height=0.5, color=COLORS[0], alpha=0.35,
            label="backward (compute), ticks: a gradient is ready")
    for _, s in t["grad_ready"]:
        ax.plot([s, s], [0.75, 1.25], color=COLORS[0], lw=0.8)
    done = dict(t["done"])
    for i, start in t["launch"]:
        ax.barh(0, done[i] - start, left=start, height=0.5, color=COLORS[1], alpha=0.55,
                edgecolor="k", lw=0.4, label="bucket all-reduce" if i == 0 else None)
        ax.text(start, -0.38, str(i), fontsize=7)
    ax.axvline(end, color="k", ls="--", lw=1, label="backward ends")
    ax.axvline(t["finished"][0][1], color="k", ls=":", lw=1, label="gradients averaged")
    ax.set_yticks([0, 1], ["communication", "compute"])
    ax.set_xlabel("time since the step started (ms), rank 0")
    ax.set_title(f"BucketedDDP, {len(t['launch'])} buckets of ~256 KiB: all-reduces overlap backward")
    ax.legend(loc="upper left", fontsize=8, ncols=2)
    ax.set_ylim(-0.6, 1.9)
    return fig
