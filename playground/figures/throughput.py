"""Figures of the throughput chapter, all computed by the step-time model (tables: ``playground.planner.replay``)."""

from __future__ import annotations

from matplotlib.ticker import NullLocator

from playground.figures import figure
from playground.plotting import COLORS, new_figure
from playground.planner.published_layouts import ALL_LAYOUTS
from playground.planner.replay import SOURCES, microbatch_sweep, tp_sweep, validation_table
from playground.planner.step_time import predict

SOURCE_COLORS = [COLORS[k] for k in (1, 2, 3, 4, 5, 7)]
PARTS = ("compute", "recompute", "tp_comm", "pp_p2p", "bubble", "dp_comm_exposed", "zero3_gathers", "optimizer")


@figure("throughput_validation.png")
def validation_figure():
    rows = validation_table()
    fig, (ax, bx) = new_figure(ncols=2, width=10.0, height=7.0)
    top = max(max(r["published"], r["predicted"]) for r in rows) * 1.1
    ax.fill_between([0, top], [0, 0.8 * top], [0, 1.2 * top], color=COLORS[0], alpha=0.12, label="±20% band")
    ax.plot([0, top], [0, top], color="0.4", lw=1, ls="--", label="predicted = published")
    for i, (label, _) in enumerate(SOURCES):
        sel = [r for r in rows if r["source"] == i]
        ax.scatter([r["published"] for r in sel], [r["predicted"] for r in sel], s=36, zorder=3, label=label,
                   facecolors=["none" if r["outlier"] else SOURCE_COLORS[i] for r in sel], edgecolors=SOURCE_COLORS[i])
    ax.set(xlim=(0, top), ylim=(0, top), xlabel="published TFLOP/s per GPU", ylabel="predicted TFLOP/s per GPU")
    ax.legend(loc="lower right", fontsize=7)   # the upper left holds the H100 rows, far above the band
    bx.barh(range(len(rows)), [r["ratio"] for r in rows], color=[SOURCE_COLORS[r["source"]] for r in rows],
            hatch=[".." if r["outlier"] else "" for r in rows])
    bx.axvspan(0.8, 1.2, color=COLORS[0], alpha=0.12)
    bx.axvline(1.0, color="0.4", lw=1, ls="--")
    bx.set_yticks(range(len(rows)), [r["name"].replace("Llama 3 405B, ", "Llama 405B ") for r in rows], fontsize=7)
    bx.invert_yaxis()
    bx.set(xlim=(0.6, 1.5), xlabel="predicted / published")
    return fig


@figure("throughput_breakdown.png")
def breakdown_figure():
    rows = []
    for row in ALL_LAYOUTS:
        if row.cite == "narayanan2021megatron":
            r = predict(row.model, row.cluster, row.layout)
            shares = {"GEMMs": (r["compute_parts"]["gemm"] + r["compute_parts"]["logits"]) / r["step_time_s"],
                      "element-wise": r["compute_parts"]["elementwise"] / r["step_time_s"]}
            shares.update({k.replace("_", " "): v for k, v in r["fractions"].items() if k != "compute"})
            rows.append((row.name.replace("GPT ", ""), shares))
    fig, ax = new_figure(width=7.2, height=4.0)
    x = range(len(rows))
    bottom = [0.0] * len(rows)
    for part, color in zip(rows[0][1], COLORS + ["0.6", "0.3"]):
        vals = [100 * shares[part] for _, shares in rows]
        if max(vals) < 0.2:
            continue
        ax.bar(x, vals, bottom=bottom, color=color, label=part)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_xticks(list(x), [name for name, _ in rows], rotation=30)
    ax.set(ylabel="share of the step time (%)", xlabel="model (Table 1 layout)", ylim=(0, 100))
    ax.legend(ncol=4, fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.0))
    return fig


@figure("throughput_tp_nodes.png")
def tp_figure():
    rows = tp_sweep()
    fig, ax = new_figure()
    ax.plot([r["tp"] for r in rows], [r["tflops"] for r in rows], "o-", color=COLORS[0])
    ax.axvspan(8.5, 40, color=COLORS[3], alpha=0.1, label="TP crosses nodes (network)")
    ax.set(xscale="log", xlabel="tensor-parallel degree TP (PP = 64 / TP, DP = 24)",
           ylabel="predicted TFLOP/s per GPU", ylim=(0, None))
    ax.set_xticks([r["tp"] for r in rows], [str(r["tp"]) for r in rows])
    ax.legend()
    return fig


@figure("throughput_microbatch.png")
def microbatch_figure():
    sweep = microbatch_sweep()
    fig, (a, b) = new_figure(ncols=2, width=8.0, height=3.6)
    for i, (B, rows) in enumerate(sweep.items()):
        sizes = [r["b"] for r in rows]
        a.plot(sizes, [r["tflops_per_gpu"] for r in rows], "o-", color=COLORS[i], label=f"batch {B}")
        b.plot(sizes, [100 * r["bubble_fraction"] for r in rows], "o-", color=COLORS[i], label=f"bubble, batch {B}")
    b.plot(sizes, [100 * r["gemm_efficiency"] for r in rows], "s--", color=COLORS[2], label="GEMM efficiency")
    for ax in (a, b):
        ax.set(xscale="log", xlabel="micro-batch size b (sequences)")
        ax.set_xticks(sizes, [str(s) for s in sizes])
        ax.legend(fontsize=8)
    a.set(ylabel="predicted TFLOP/s per GPU")
    b.set(ylabel="%  (bubble: (p-1)/m;  GEMM: of peak)")
    return fig


@figure("throughput_tornado.png")
def tornado_figure():
    """One factor at a time: how far each unstated setting or constant moves a prediction."""
    from playground.planner.replay import tornado_rows
    rows = tornado_rows()
    moving = [[b for b in row["bars"] if b["factor"] != "optimizer_bytes"
               and max(b["relative"]) - min(b["relative"]) > 1e-3] for row in rows]  # factors that move a row
    heights = [0.8 + 0.22 * len(bars) for bars in moving]          # every bar as tall in every panel
    fig, axes = new_figure(nrows=len(rows), width=8.0, height=sum(heights) + 0.6,
                           gridspec_kw={"height_ratios": heights})
    for ax, row, bars in zip(axes, rows, moving):
        for i, b in enumerate(bars):
            lo, hi = sorted(100 * (x - 1) for x in b["relative"])
            ax.barh(i, hi - lo, left=lo, color=COLORS[1] if b["factor"] in row["unstated"] else COLORS[0],
                    height=0.6)
        ax.axvline(0, color="0.3", lw=1)
        pub = 100 * (row["published_relative"] - 1)
        ax.axvline(pub, color=COLORS[3], lw=2, ls="--", label=f"published ({pub:+.0f}%)")
        ax.set_yticks(range(len(bars)), [b["factor"].replace("_", " ") for b in bars], fontsize=8)
        ax.invert_yaxis()
        ax.set_title(row["name"], fontsize=9, loc="left")
        ax.legend(loc="lower right", fontsize=7)
    axes[-1].set_xlabel("predicted throughput relative to the nominal prediction (%)")
    fig.suptitle("orange: a setting the source leaves unstated; blue: a constant over its sourced spread",
                 fontsize=9)
    return fig


@figure("gemm_table_check.png")
def gemm_table_figure():
    """eq-gemm against cuBLAS's measured bf16 rates at a step's shapes (OpenXLA's table), Hopper and Blackwell."""
    from playground.planner.published_gemms import gemm_check
    fig, axes = new_figure(ncols=2, width=10.0, height=4.6)
    for ax, gpu, color in zip(axes, ("H100", "B200"), (COLORS[1], COLORS[3])):
        rows = gemm_check(gpu)
        top = max(max(r["measured_tflops"], r["predicted_tflops"]) for r in rows) * 1.05
        low = min(min(r["measured_tflops"], r["predicted_tflops"]) for r in rows) * 0.9
        ax.fill_between([low, top], [0.9 * low, 0.9 * top], [1.1 * low, 1.1 * top], color=COLORS[0], alpha=0.12,
                        label="±10%")
        ax.plot([low, top], [low, top], color="0.4", lw=1, ls="--", label="predicted = measured")
        for keep, label, face in ((True, "every side ≥ 2,048", color), (False, "a side < 2,048", "none")):
            sel = [r for r in rows if r["step_sized"] == keep]
            ax.scatter([r["measured_tflops"] for r in sel], [r["predicted_tflops"] for r in sel], s=22, zorder=3,
                       facecolors=face, edgecolors=color, label=label)
        ax.set(xlim=(low, top), ylim=(low, top), xlabel="measured TFLOP/s (cuBLAS, bf16)",
               ylabel="predicted by eq-gemm (TFLOP/s)", title=f"{gpu}: {len(rows)} shapes of OpenXLA's table")
        ax.legend(loc="upper left", fontsize=7)
    return fig


@figure("attention_table_check.png")
def attention_table_figure():
    """The fused attention's rate against cuDNN's measured training attention on a GB200 and a GB300, and the
    GB300's measured gain beside the one the model charges."""
    from playground.planner.efficiency import EFFICIENCY
    from playground.planner.published_attention import CUDNN_ATTENTION, attention_check, ultra_gain
    fig, (left, right) = new_figure(ncols=2, width=10.0, height=4.2)
    markers = {"llama3.1": "o", "dsv3": "s", "kimiK26": "^"}
    left.axhspan(0.9, 1.1, color="0.5", alpha=0.12, label="±10%")
    left.axhline(1.0, color="0.4", lw=1, ls="--")
    for gpu, color, dx in (("GB200", COLORS[0], 0.96), ("GB300", COLORS[3], 1.04)):
        for name, marker in markers.items():
            rows = [r for r in attention_check(gpu) if r["model"] == name]
            left.scatter([r["tokens"] * dx for r in rows], [r["ratio"] for r in rows], marker=marker, s=30,
                         color=color, label=f"{gpu}, {name}", zorder=3)
    left.set(xscale="log", xlabel="tokens (causal, batch 2)", ylabel="predicted / measured time (forward + backward)",
             title="cuDNN's attention against the model's rate")
    tokens = sorted({r[2] for r in CUDNN_ATTENTION})
    left.set_xticks(tokens, [f"{t // 1024}K" for t in tokens])
    left.xaxis.set_minor_locator(NullLocator())
    left.legend(loc="lower right", fontsize=6, ncols=2)
    low, high = EFFICIENCY.spread["attention_fast_exp"]
    right.axhspan(low, high, color=COLORS[3], alpha=0.12, label="the constant's spread")
    right.axhline(EFFICIENCY.attention_fast_exp, color=COLORS[3], lw=1.5,
                  label=f"charged: attention_fast_exp = {EFFICIENCY.attention_fast_exp}")
    for name, marker in markers.items():
        pairs = [(r[2], g) for r, g in zip(CUDNN_ATTENTION, ultra_gain()) if r[0] == name]
        right.scatter([t for t, _ in pairs], [g for _, g in pairs], marker=marker, s=30, color="0.3", label=name,
                      zorder=3)
    right.set(xscale="log", xlabel="tokens (causal, batch 2)", ylabel="GB200 time / GB300 time",
              title="Blackwell Ultra's faster exponential, measured")
    right.set_xticks(tokens, [f"{t // 1024}K" for t in tokens])
    right.xaxis.set_minor_locator(NullLocator())
    right.legend(loc="upper left", fontsize=7)
    return fig


@figure("throughput_heldout.png")
def heldout_figure():
    """The held-out runs, replayed before any change: each ratio with its range, dense and MoE apart."""
    from playground.planner.published_stacks import HELD_OUT_BAND
    from playground.planner.replay import held_out_table
    rows = held_out_table()["rows"]
    fig, ax = new_figure(width=10.0, height=0.28 * len(rows) + 1.4)
    ax.axvspan(0.8, 1.2, color=COLORS[0], alpha=0.15, label="±20%")
    for edge in (1 - HELD_OUT_BAND, 1 + HELD_OUT_BAND):
        ax.axvline(edge, color=COLORS[0], lw=1, ls=":", label=f"±{HELD_OUT_BAND:.0%}, the held-out band"
                   if edge > 1 else None)
    ax.axvline(1.0, color="0.4", lw=1, ls="--")
    for i, r in enumerate(rows):
        color = COLORS[3] if r["moe"] else COLORS[2]
        ax.plot(r["ratio_range"], [i, i], color=color, lw=2, alpha=0.5)
        ax.scatter([r["ratio"]], [i], color=color if r["fits"] else "white", edgecolors=color, s=36, zorder=3)
    keys = ((COLORS[2], "dense"), (COLORS[3], "MoE")) + \
        ((("white", "does not fit as read"),) if not all(r["fits"] for r in rows) else ())
    for color, label in keys:   # the hollow key only where a run is drawn hollow
        ax.scatter([], [], color=color, edgecolors="0.3" if color == "white" else color, label=label)
    names = [f"{r['source'].replace('Megatron-Core MoE report (v0.16)', 'MoE report').replace('Megatron-LM MoE recipes', 'LM recipes').replace('Megatron-', '').replace('NeMo ', '')}: "
             f"{r['name'].removesuffix(', 26.04.01').removesuffix(', 26.06').removesuffix(', 25.09')}" for r in rows]
    ax.set_yticks(range(len(rows)), [n if len(n) < 72 else n[:70] + "…" for n in names], fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticks([0.4, 0.5, 0.75, 1, 1.5, 2, 3], ["0.4", "0.5", "0.75", "1", "1.5", "2", "3"])
    ax.set(xlim=(0.25, 4.0), xlabel="predicted / published throughput (dot), and its range (line)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7)
    return fig


@figure("moe_layer_h200.png")
def moe_layer_figure():
    """One EP rank's MoE layer measured on an H200 by each path, beside the step-time model's price."""
    from playground import results
    record = next(r for r in results.on_record("moe") if r["provenance"]["device_count"] and len(r["rows"]) > 1)
    labels = {"grouped": "grouped GEMM, sizes on the device", "grouped_sync": "the same after a host sync",
              "loop_sync": "a GEMM per expert (after the sync)", "capacity": "fixed capacity (token drop)",
              "grouped_graph": "grouped, in a CUDA graph"}
    rows = record["rows"]
    paths = [p for p in labels if all(p in r["paths"] for r in rows)]
    fig, ax = new_figure(width=10.0, height=4.4)
    width = 0.8 / len(paths)
    for j, path in enumerate(paths):
        xs = [i + (j - (len(paths) - 1) / 2) * width for i in range(len(rows))]
        ax.bar(xs, [r["paths"][path]["ms_per_layer"] / r["model_ms_per_layer"] for r in rows], width,
               color=COLORS[j + 1], label=labels[path])
    ax.axhline(1.0, color="0.2", lw=1.2, ls="--", label="the step-time model's price (= 1)")
    ax.set_xticks(range(len(rows)), [f"{r['shape']}\n{r['local_experts']} local expert{'s' * (r['local_experts'] > 1)}, "
                                     f"{r['rows'] // r['local_experts']:,} rows each" for r in rows], fontsize=7)
    ax.set(ylabel="measured / modelled time of one layer", ylim=(0, None),
           title=f"One EP rank's routed experts, forward + backward, {rows[0]['tokens']:,} tokens: "
                 f"measured on one {record['gpu_in_table']}")
    ax.legend(loc="upper right", fontsize=7)
    return fig
