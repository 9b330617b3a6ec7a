"""Figures of the capacity-planning chapter, all drawn from the planner's JSON output, and its explorer."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from matplotlib.patches import Patch

from playground import hardware
from playground.figures import figure
from playground.planner.capacity_explorer import MFU, explorer_figure  # MFU: the fixed MFU of the sweeps below
from playground.planner.gemms import ATTENTION_CORE, layer_gemms
from playground.planner.layout import Layout
from playground.planner.memory import FRAGMENTATION, FRAMEWORK_BYTES, memory_per_gpu, usable_memory_bytes
from playground.planner.presets import preset
from playground.planner.published_automodel import NEMOTRON_3_NANO
from playground.planner.replay import plan_json, published_table
from playground.planner.ssm import SCAN_GEMMS
from playground.plotting import COLORS, new_figure

@figure("capacity_gpu_hours.png")
def gpu_hours_vs_model_size():
    fig, ax = new_figure()
    sizes = np.logspace(9, 12, 13)
    by_peak: dict = {}  # accelerators with the same peak give the same line: draw it once
    for g in hardware.all_gpus():
        by_peak.setdefault(g.peak_bf16_flops, []).append(g.name)
    for color, (peak, names) in zip(COLORS * 2, sorted(by_peak.items(), reverse=True)):
        hours = [plan_json(params=n, tokens=20 * n, gpu=names[0], mfu=MFU)["gpu_hours"] for n in sizes]
        ax.loglog(sizes, hours, marker="o", ms=3, lw=2, color=color,
                  label=f"{', '.join(names)} ({peak / 1e12:.0f} TFLOP/s)")
    ax.set_xlabel("parameters N (compute-optimal: D = 20 N tokens)")
    ax.set_ylabel("GPU-hours at MFU 0.40")
    ax.set_title("GPU-hours = 6 N (20 N) / (MFU x peak): slope 2 on log-log axes")
    ax.legend(title="GPU (dense BF16 peak)")
    return fig


@figure("capacity_days.png")
def days_vs_cluster_size():
    fig, ax = new_figure()
    gpus = 2 ** np.arange(6, 15)
    for color, (label, n, d) in zip(COLORS, [("7B on 2T tokens", 7e9, 2e12),
                                             ("70B on 1.4T tokens", 70e9, 1.4e12),
                                             ("405B on 15.6T tokens", 405e9, 15.6e12)]):
        days = [plan_json(params=n, tokens=d, gpu="H100", gpus=int(g), mfu=MFU)["days"] for g in gpus]
        ax.loglog(gpus, days, "o-", ms=3, color=color, label=label)
    ax.axhline(90, color="grey", ls="--", lw=1)
    ax.text(gpus[0], 100, "90 days: a quarter", color="grey", fontsize=9)
    ax.set_xlabel("H100 GPUs in the cluster")
    ax.set_ylabel("days of training at MFU 0.40")
    ax.set_title("days = 6 N D / (GPUs x MFU x peak): halve the time, double the GPUs")
    ax.legend()
    return fig


@figure("capacity_memory.png")
def memory_vs_zero_and_layout():
    fig, ax = new_figure(width=7.0)
    layouts = [(1, 1), (8, 1), (8, 4), (8, 16)]
    stages, width, gib = [0, 1, 2, 3], 0.2, 2 ** 30
    model, gpus = preset("llama3-70b"), 1024
    for i, (tp, pp) in enumerate(layouts):
        dp = gpus // (tp * pp)
        totals = [memory_per_gpu(model, Layout.today(tp, pp, dp, global_batch=1024, zero_stage=stage,
                                                     recompute="selective"))["total"] / gib for stage in stages]
        ax.bar(np.array(stages) + (i - 1.5) * width, totals, width, color=COLORS[i],
               label=f"TP={tp} x PP={pp} (DP={dp})")
    h100 = hardware.gpu("H100")
    ax.axhline(h100.memory_bytes / gib, color="black", lw=1.5)
    ax.axhline(usable_memory_bytes(h100) / gib, color="black", lw=1, ls="--")
    ax.text(-0.45, h100.memory_bytes / gib * 1.15,
            f"H100: {h100.memory_bytes / gib:.1f} GiB (dashed: usable, less {FRAMEWORK_BYTES / gib:.0f} GiB "
            f"and {100 * FRAGMENTATION:.0f}%)", fontsize=9)
    ax.set_yscale("log")
    ax.set_xticks(stages, [f"ZeRO-{s}" for s in stages])
    ax.set_ylabel("GiB per GPU (states + activations + logits)")
    ax.set_title("Llama 3 70B at 8K on 1024 H100s, flash attention: ZeRO shrinks 16 Psi / (TP PP)")
    ax.legend(fontsize=8)
    return fig


@figure("capacity_published.png")
def planner_vs_published():
    fig, ax = new_figure(width=6.4, height=4.2)
    rows = published_table()
    markers = {"total_flops": ("s", "total FLOPs"), "gpu_hours": ("o", "GPU-hours"), "days": ("^", "days")}
    ax.axvspan(1 / 1.5, 1.5, color="grey", alpha=0.2, label="within 1.5x")
    ax.axvline(1, color="black", lw=0.8)
    for i, row in enumerate(rows):  # hollow: consistency or FLOP-only checks, not a measured time
        marker, _ = markers[row["metric"]]
        color = COLORS[3] if row["outlier"] else COLORS[0]
        ax.plot(row["ratio"], i, marker, ms=8, color=color,
                markerfacecolor=color if row["kind"] == "measured" else "none")
    for marker, label in markers.values():
        ax.plot([], [], marker, color=COLORS[0], label=label)
    ax.plot([], [], "o", color=COLORS[0], markerfacecolor="none", label="consistency / FLOP-only check")
    ax.set_xscale("log")
    ax.set_xlim(0.4, 3)
    ax.set_xticks([0.5, 2 / 3, 1, 1.5, 2, 3], ["0.5", "0.67", "1", "1.5", "2", "3"])
    ax.set_xticks([], minor=True)
    ax.set_yticks(range(len(rows)), [r["run"] for r in rows])
    ax.invert_yaxis()
    ax.set_xlabel("published / planner (1 = exact; > 1: the run took more than planned)")
    ax.set_title(f"Planner vs {len(rows)} published runs (red: documented misses)")
    ax.legend(fontsize=8, loc="lower right")
    return fig


@figure("capacity_explorer.png")
def explorer_default():
    return explorer_figure()[0]


@figure("capacity_hybrid.png")
def hybrid_blocks_and_flops():
    """Nemotron 3 Nano's 52 blocks in order, and its forward FLOPs a token against the sequence: the 23 Mamba-2
    mixers flat, the 6 attention layers' scores and context growing with it, and the same model with attention in
    its mixers' place (every count from ``gemms.layer_gemms``)."""
    nano = NEMOTRON_3_NANO
    fig, (top, ax) = new_figure(nrows=2, width=6.8, height=4.8, gridspec_kw={"height_ratios": [1, 4]})
    pattern = "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME"   # its config's hybrid_override_pattern
    kinds = {"M": ("Mamba-2 mixer", COLORS[0]), "*": ("attention", COLORS[3]), "E": ("MoE", COLORS[2])}
    for i, block in enumerate(pattern):
        top.bar(i, 1, width=0.9, color=kinds[block][1])
    top.set_xlim(-1, len(pattern))
    top.set_yticks([])
    top.set_xticks([0, 13, 26, 39, 51])
    top.grid(False)
    top.set_title("Nemotron 3 Nano: 23 Mamba-2 mixers, 6 attention layers, 23 MoEs", fontsize=10)
    top.legend(handles=[Patch(color=color, label=label) for label, color in kinds.values()], ncols=3, fontsize=8,
               loc="upper center", bbox_to_anchor=(0.5, -0.35), frameon=False)
    lengths = 2 ** np.arange(12, 21)

    def per_token(model, pick):
        return np.array([model.layers * sum(2 * c * M * N * K for n, c, M, N, K in
                                            layer_gemms(replace(model, seq_len=int(s)), 1, 1, moe=True) if pick(n)) / s
                         for s in lengths]) / 1e9
    mixers = per_token(nano, lambda n: n.startswith("ssm_") or n in SCAN_GEMMS)
    core = per_token(nano, lambda n: n in ATTENTION_CORE)
    total = per_token(nano, lambda n: True)
    as_attention = per_token(replace(nano, ssm_layers=0, attention_layers=nano.attention_layers + nano.ssm_layers),
                             lambda n: True)
    ax.loglog(lengths, as_attention, "o--", ms=3, color="grey", label="attention in every mixer's place (29 layers)")
    ax.loglog(lengths, total, "o-", ms=3, color="black", label="Nemotron 3 Nano, all its layers' GEMMs")
    ax.loglog(lengths, mixers, "s-", ms=3, color=COLORS[0], label="its 23 Mamba-2 mixers")
    ax.loglog(lengths, core, "^-", ms=3, color=COLORS[3], label="its 6 attention layers' scores and context")
    ax.set_xticks(lengths[::2], [f"{int(s) // 1024}K" for s in lengths[::2]])
    ax.set_xticks([], minor=True)
    ax.set_xlabel("sequence length (tokens)")
    ax.set_ylabel("forward GFLOP a token")
    ax.legend(fontsize=8)
    return fig
