"""Figures of the systems-map chapter: the map itself, and TP vs SP per layer (measured)."""

from __future__ import annotations

from playground.figures import figure
from playground.plotting import COLORS, new_figure

# the configuration the chapter runs: the shared ModelConfig, b = 2 sequences per block run
_B = 2


def tp_sp_measurements(world_size: int = 4, tp_sizes=(2, 4)) -> dict:
    """One real 4-rank run of ``tp_measure.check_block`` plus the t = 1 block, in one dict."""
    from playground.launch import run
    from playground.systems_map.tp_measure import check_block, single_block_activation_bytes
    values = run(check_block, world_size, tp_sizes, None, _B, quiet=True)
    return {"ranks": values, "t1_activation_bytes": single_block_activation_bytes(batch=_B)}


@figure("tp_sp_per_layer.png")
def tp_sp_per_layer(data: dict | None = None):
    """Per layer and rank: bytes on the wire (ring) and activation bytes saved, TP vs SP."""
    from playground.model import ModelConfig
    from playground.systems_map.placement import wire
    from playground.systems_map.tp_measure import block_activation_bytes, korthikanti_bytes, layer_traffic
    from playground.systems_map.tp_comm import ring_wire_bytes

    data = data or tp_sp_measurements()
    cfg = ModelConfig()
    s, h, a = cfg.seq_len, cfg.d_model, cfg.n_heads
    rank0 = data["ranks"][0]
    ts = sorted(rank0)
    fig, (ax1, ax2) = new_figure(ncols=2, width=10.5, height=3.9)

    width = 0.38
    for j, (mode, color) in enumerate((("tp", COLORS[0]), ("sp", COLORS[1]))):
        for i, t in enumerate(ts):
            run = rank0[t][mode]
            fwd, bwd = wire(run["forward"], t) / 1024, wire(run["backward"], t) / 1024
            x = i + (j - 0.5) * width
            ax1.bar(x, fwd, width, color=color, label=f"{mode.upper()} forward" if i == 0 else None)
            ax1.bar(x, bwd, width, bottom=fwd, color=color, alpha=0.45,
                    label=f"{mode.upper()} backward" if i == 0 else None)
            lt = layer_traffic(_B, s, h, t, 4, sequence_parallel=(mode == "sp"))
            pred = sum(ring_wire_bytes(op, p, t) for ph in lt.values() for op, (_, p) in ph.items())
            ax1.plot([x - width / 2, x + width / 2], [pred / 1024] * 2, color="black", lw=1.5,
                     label="formula (Eq. tp-bytes, sp-bytes)" if i == 0 and j == 0 else None)
    ax1.set_xticks(range(len(ts)), [f"t = {t}" for t in ts])
    ax1.set_ylabel("KiB sent per rank per layer (ring)")
    ax1.set_title("Communication: SP re-gathers in backward")
    ax1.legend(loc="upper left", fontsize=8)

    all_t = [1, *ts]
    meas_tp = [data["t1_activation_bytes"]] + [rank0[t]["tp"]["activation_bytes"] for t in ts]
    meas_sp = [data["t1_activation_bytes"]] + [rank0[t]["sp"]["activation_bytes"] for t in ts]
    k = 1 / 1024
    ax2.plot(all_t, [m * k for m in meas_tp], "o", color=COLORS[0], ms=8, label="TP measured")
    ax2.plot(all_t, [m * k for m in meas_sp], "s", color=COLORS[1], ms=8, label="TP+SP measured")
    dense = [1, 1.5, 2, 3, 4]
    ax2.plot(dense, [block_activation_bytes(s, _B, h, a, t) * k for t in dense], "-",
             color=COLORS[0], label="our block, TP (formula)")
    ax2.plot(dense, [block_activation_bytes(s, _B, h, a, t, True) * k for t in dense], "-",
             color=COLORS[1], label="our block, SP (formula)")
    # the paper's formula is for 2-byte activations: x2 to compare with our fp32 block
    ax2.plot(dense, [2 * korthikanti_bytes(s, _B, h, a, t, False, dropout=False) * k for t in dense],
             "--", color=COLORS[0], alpha=0.6, label="Korthikanti, no dropout, TP (x2 for fp32)")
    ax2.plot(dense, [2 * korthikanti_bytes(s, _B, h, a, t, True, dropout=False) * k for t in dense],
             "--", color=COLORS[1], alpha=0.6, label="Korthikanti, no dropout, SP (x2 for fp32)")
    ax2.set_xticks(all_t)
    ax2.set_xlabel("tensor-parallel size t")
    ax2.set_ylabel("KiB of activations saved per rank per layer")
    ax2.set_title("Memory: only SP divides everything by t")
    ax2.legend(fontsize=7)
    return fig


@figure("systems_map.png")
def systems_map_figure():
    """Which state each strategy replicates or shards, and which collective it pays with."""
    from matplotlib.patches import Rectangle

    from playground.systems_map.placement import STATE_LAYOUT

    collective = {"DP": "all-reduce of gradients (2Ψ) · network",
                  "ZeRO-1": "reduce-scatter + all-gather (2Ψ) · network",
                  "ZeRO-2": "reduce-scatter + all-gather (2Ψ) · network",
                  "ZeRO-3 / FSDP": "all-gather ×2 + reduce-scatter (3Ψ) · network",
                  "TP": "4 all-reduces of bsh per layer · NVLink",
                  "TP + SP": "all-gathers + reduce-scatters per layer · NVLink",
                  "CP": "ring of K,V blocks; grads reduced over d·c · NVLink or next node",
                  "PP": "send/recv of bsh per micro-batch · network",
                  "EP": "all-to-all of tokens; grads over e·d or expert copies · either"}
    fill = {"R": ("#dddddd", "replicated"), "S": (COLORS[2], "sharded ÷ n"),
            "P": ("#9fd8c4", "matrices sharded,\nnorms replicated"),
            "L": (COLORS[5], "split by layer"),
            "B": ("#f3e3b5", "per micro-batch\n(not ÷ n)"),
            "W": ("#f3c9a5", "p micro-batches\n× l/p layers")}
    kinds = ["parameters", "gradients", "optimizer", "activations"]
    rows = list(STATE_LAYOUT)
    fig, ax = new_figure(width=11.5, height=4.6)
    # CP's replicated gradients are reduced over d·c ranks, not held alone
    pitch, cell = 1.25, 1.2  # wide cells: their labels must fit inside
    for i, name in enumerate(rows):
        y = len(rows) - 1 - i
        for j, kind in enumerate(kinds):
            code = STATE_LAYOUT[name][kind]
            ax.add_patch(Rectangle((j * pitch, y), cell, 0.85, color=fill[code][0]))
            label = fill[code][1]
            if code == "P" and name == "EP":
                label = "experts sharded,\nthe rest replicated"
            elif code == "R" and name == "CP" and kind == "gradients":
                label = "replicated,\nreduced over d·c"
            elif code == "P" and kind == "activations":
                label = "in attn/MLP ÷ t,\nat boundaries whole"
            ax.text(j * pitch + cell / 2, y + 0.42, label, ha="center", va="center", fontsize=7)
        ax.text(-0.1, y + 0.42, name, ha="right", va="center", fontsize=10, weight="bold")
        ax.text(4 * pitch + 0.1, y + 0.42, collective[name], ha="left", va="center", fontsize=9)
    for j, kind in enumerate(kinds):
        ax.text(j * pitch + cell / 2, len(rows) + 0.1, kind, ha="center", va="bottom", fontsize=10)
    ax.text(4 * pitch + 0.1, len(rows) + 0.1, "collective (bytes per rank per step) · usual link",
            ha="left", va="bottom", fontsize=10)
    ax.set_xlim(-1.6, 11.6)
    ax.set_ylim(-0.2, len(rows) + 0.7)
    ax.axis("off")
    ax.grid(False)
    return fig
