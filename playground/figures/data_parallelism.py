"""Figures of the data-parallelism chapter; each runs the real measurement it plots."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from playground.data_parallel import cost_model
from playground.data_parallel.allreduce_lab import MB, count_bytes, time_all_reduces, usable_cores
from playground.data_parallel.ddp_check import DDP_CONFIG, time_steps
from playground.figures import figure
from playground.launch import run
from playground.plotting import COLORS, new_figure

LABELS = {"ring": "ring", "parameter_server": "parameter server", "sharded_ps": "sharded PS (k = N)",
          "tree": "tree (reduce + broadcast)", "builtin": "dist.all_reduce (gloo)"}
COLOR = dict(zip(LABELS, COLORS))
TIMED_SIZES = [2 ** k for k in range(12, 25, 2)]  # 4 KiB .. 16 MiB


@lru_cache(maxsize=None)
def _timed(world_size: int, sizes: tuple, algorithms: tuple, calibrate: bool):
    return run(time_all_reduces, world_size, list(sizes), algorithms, 5, 1, calibrate,
               timeout_s=600, quiet=True)[0]


@figure("dp_bytes_per_rank.png")
def bytes_per_rank():
    numel = 840  # divisible by every N from 2 to 8
    S = 4 * numel
    values = run(count_bytes, 8, numel, timeout_s=300, quiet=True)
    fig, ax = new_figure()
    Ns = np.arange(2, 9)
    for alg in ("parameter_server", "tree", "ring", "sharded_ps"):
        formula = [cost_model.busiest_rank_bytes(alg, int(N), S) / S for N in Ns]
        measured = [max(values[r][N][alg][0] for r in range(N)) / S for N in Ns]
        ax.plot(Ns, formula, "-", color=COLOR[alg], label=f"{LABELS[alg]}: formula")
        ax.plot(Ns, measured, "o", color=COLOR[alg], mfc="none", ms=8 if alg == "sharded_ps" else 6)
    ax.set_xlabel("ranks N")
    ax.set_ylabel("bytes sent by the busiest rank / S")
    ax.set_title("One all-reduce of S bytes: lines = formula, circles = counted")
    ax.legend()
    return fig


@figure("dp_alpha_beta.png")
def alpha_beta_vs_measured():
    algs = ("ring", "parameter_server", "tree", "builtin")
    result = _timed(4, tuple(TIMED_SIZES), algs, True)
    model = result["alpha_beta"]
    fig, (left, right) = new_figure(ncols=2, width=10, height=4)
    sizes = np.array(sorted(result["ping_pong"]))
    left.loglog(sizes, [result["ping_pong"][s] * 1e6 for s in sizes], "o", label="ping-pong, measured")
    left.loglog(sizes, (model.alpha_s + sizes * model.beta_s_per_byte) * 1e6, "-",
                label=f"fit: α = {model.alpha_s * 1e6:.0f} µs, 1/β = {model.bandwidth_gb_s:.2f} GB/s")
    left.set_xlabel("message size m (bytes)")
    left.set_ylabel("one-way time (µs)")
    left.set_title("Two ranks: t = α + m·β")
    left.legend()
    x = np.array(TIMED_SIZES, dtype=float)
    cores = usable_cores()
    right.loglog(x, [cost_model.machine_bound(model, 4, s, cores) * 1e3 for s in x], ":",
                 color="k", label=f"shared-machine bound, {cores} cores")
    for alg in algs:
        measured = [result["times"][s][alg]["median_s"] * 1e3 for s in TIMED_SIZES]
        right.loglog(x, measured, "o", color=COLOR[alg], label=f"{LABELS[alg]}, measured")
        if alg != "builtin":
            right.loglog(x, [cost_model.predict(model, alg, 4, s, cores=cores) * 1e3 for s in x],
                         "-", color=COLOR[alg], label=f"{LABELS[alg]}, predicted")
    right.set_xlabel("all-reduce size S (bytes)")
    right.set_ylabel("time (ms)")
    right.set_title("N = 4 ranks on this machine")
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
                        style, marker="o", color=COLOR[alg], label=f"{LABELS[alg]}, N = {n}")
    ax.set_xlabel("all-reduce size (MiB)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_title("busbw = S/t · 2(N-1)/N, median of 5 interleaved rounds")
    ax.legend()
    return fig


@figure("dp_cost_map.png")
def cost_map():
    model = _timed(4, tuple(TIMED_SIZES), ("ring", "parameter_server", "tree", "builtin"),
                   True)["alpha_beta"]
    fig, axes = new_figure(ncols=3, width=12, height=3.8, sharey=False)
    Ns = np.arange(2, 65)
    for ax, size in zip(axes, (4 * 1024, MB, 256 * MB)):
        for alg in ("parameter_server", "tree", "ring"):
            ax.loglog(Ns, [cost_model.predict(model, alg, int(N), size) for N in Ns],
                      color=COLOR[alg], label=LABELS[alg])
        ax.set_title(f"S = {size / MB:g} MiB" if size >= MB else f"S = {size // 1024} KiB")
        ax.set_xlabel("ranks N")
    axes[0].set_ylabel("predicted time (s)")
    axes[0].legend()
    fig.suptitle(f"α-β-γ model with this machine's fit (α = {model.alpha_s * 1e6:.0f} µs, "
                 f"1/β = {model.bandwidth_gb_s:.2f} GB/s)")
    return fig


@figure("dp_overlap_timeline.png")
def overlap_timeline():
    values = run(time_steps, 2, DDP_CONFIG, 16, 256 * 1024, 3, timeout_s=300, quiet=True)
    return draw_timeline(values[0])


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
