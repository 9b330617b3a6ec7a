"""The systems map: every parallelism as an answer to "which bytes are replicated, which are
sharded, and which link moves them", generated from code and filled with bytes counted on real runs.

``measure_data_parallel`` is a rank worker that runs one training step of the shared model with
plain DP (all-reduce of the gradients), ZeRO-1/2 (reduce-scatter of the gradients, all-gather of
the updated parameters) and ZeRO-3 (gather each layer's parameters in forward and again in
backward, reduce-scatter its gradients), and counts the bytes each sends.
``map_rows`` combines those counts with the TP/SP block run (``tp_measure.check_block``), the
DP x PP run (``compose``) and the CP and EP rows that their own modules provide.

Measured bytes are *per rank per training step*: the payload ``playground.comm`` records for a
collective (converted to ring wire bytes with ``tp_comm.ring_wire_bytes``), the exact bytes
sent for point-to-point.
"""

from __future__ import annotations

import importlib

from playground.launch import device
from playground.model import ModelConfig, build_model, loss_fn, shard_batch, synthetic_batch
from playground.systems_map.tp_comm import ring_wire_bytes

__all__ = ["measure_data_parallel", "map_rows", "map_html", "wire", "STATE_LAYOUT",
           "OTHER_ROW_MODULES", "CITE_LABEL", "map_runs", "verdicts", "LLAMA3_LAYOUTS", "layout_report",
           "placement_explorer", "explorer_text"]

# Modules that contribute their own rows (``map_rows(measure, world_size) -> list[dict]``).
OTHER_ROW_MODULES = ("playground.systems_map.ring_attention_runs", "playground.systems_map.expert_parallel_runs")

# What each strategy does with the four kinds of per-rank state (for the map figure):
# "R" replicated, "S" sharded across the group, "P" partly sharded (some tensors are, some not),
# "L" split by layers (pipeline stages), "B" each rank's own micro-batch: different data on every
# rank, but a rank's activations are those of a whole micro-batch, not divided by n (DP, ZeRO and
# EP leave a layer's activations as they are; TP divides those inside attention and the MLP,
# SP and CP all of them), "W" a whole model's worth: 1F1B's first stage holds p micro-batches of
# its l/p layers, as much as one micro-batch through all l layers (PP divides the layers, not
# the activations of the busiest stage).
STATE_LAYOUT = {
    "DP": {"parameters": "R", "gradients": "R", "optimizer": "R", "activations": "B"},
    "ZeRO-1": {"parameters": "R", "gradients": "R", "optimizer": "S", "activations": "B"},
    "ZeRO-2": {"parameters": "R", "gradients": "S", "optimizer": "S", "activations": "B"},
    "ZeRO-3 / FSDP": {"parameters": "S", "gradients": "S", "optimizer": "S", "activations": "B"},
    "TP": {"parameters": "P", "gradients": "P", "optimizer": "P", "activations": "P"},
    "TP + SP": {"parameters": "P", "gradients": "P", "optimizer": "P", "activations": "S"},
    "CP": {"parameters": "R", "gradients": "R", "optimizer": "R", "activations": "S"},
    "PP": {"parameters": "L", "gradients": "L", "optimizer": "L", "activations": "W"},
    "EP": {"parameters": "P", "gradients": "P", "optimizer": "P", "activations": "B"},
}


def wire(summary: dict, n: int) -> float:
    """Ring wire bytes one rank sends for the collectives in a ``Traffic.summary()``, plus p2p."""
    total = float(summary.get("sent_bytes", 0))
    for op, payload in summary.get("payload_bytes", {}).items():
        total += ring_wire_bytes(op, payload, n)
    return total


def measure_data_parallel(rank: int, world_size: int, cfg: ModelConfig | None = None,
                          batch: int = 8) -> dict:
    """Rank worker: bytes this rank sends in one step of DP and ZeRO-1/2/3 (fp32).

    Uses the course's from-scratch ZeRO (``playground.zero.zero_dp.ZeroDP``, stage 0 = plain DP), whose
    collectives are rings of point-to-point messages: the bytes are counted exactly.
    """
    from playground.zero.zero_dp import ZeroDP

    cfg, dev = cfg or ModelConfig(), device()
    local = tuple(t.to(dev) for t in shard_batch(synthetic_batch(cfg, batch, 0), rank, world_size))
    sent = {}
    for stage in (0, 1, 2, 3):
        z = ZeroDP(build_model(cfg, seed=0, device=dev), stage, precision="fp32")
        sent[stage] = z.step(local, loss_fn)["sent_bytes"]
    return {"params": cfg.param_count(), "elem_bytes": 4, "sent": sent}


# How the table names the work that introduced each idea (the prose cites them properly).
CITE_LABEL = {"li2020pytorch": "PyTorch DDP (Li et al. 2020)",
              "rajbhandari2020zero": "ZeRO (Rajbhandari et al. 2020)",
              "zhao2023fsdp": "PyTorch FSDP (Zhao et al. 2023)",
              "shoeybi2019megatron": "Megatron-LM (Shoeybi et al. 2019)",
              "korthikanti2022reducing": "Korthikanti et al. 2022",
              "huang2019gpipe": "GPipe (Huang et al. 2019)",
              "narayanan2021megatron": "1F1B, interleaved (Narayanan et al. 2021)",
              "liu2023ringattention": "Ring Attention (Liu et al. 2023)",
              "lepikhin2020gshard": "GShard (Lepikhin et al. 2020)",
              "fedus2021switch": "Switch Transformer (Fedus et al. 2021)"}


def _fmt(n: float) -> str:
    return f"{n:,.0f} B"


def map_rows(dp_run: dict, tp_run: dict, pp_run: dict, cfg: ModelConfig | None = None,
             world_size: int = 4, tp: int = 4, measure_others: bool = False) -> list[dict]:
    """The map's rows, each with a formula, its value for our runs and the bytes counted.

    ``dp_run``: rank 0 of ``measure_data_parallel`` on ``world_size`` ranks; ``tp_run``: rank 0
    of ``tp_measure.check_block`` (its entry for ``tp``); ``pp_run``: rank 0's ``dp_pp`` entry of
    ``compose.compose_runs``.  ``predicted`` and ``measured`` are wire bytes per rank per step.
    """
    from playground.systems_map.tp_measure import layer_traffic

    cfg, n = cfg or ModelConfig(), world_size
    e = dp_run["elem_bytes"]
    Pe = dp_run["params"] * e
    L, s, h = cfg.n_layers, cfg.seq_len, cfg.d_model
    b_tp = tp_run.get("batch", 2)  # sequences the TP/SP block ran on (check_block's batch)
    rows = []

    def row(strategy, replicated, sharded, collective, formula, predicted, measured, link, buys, cite):
        rows.append({"strategy": strategy, "replicated": replicated, "sharded": sharded,
                     "collective": collective, "bytes_per_step_formula": formula,
                     "bytes_predicted": predicted, "bytes_measured": measured, "link": link,
                     "buys": buys, "cite": cite})

    row("DP", "all model state", "the batch", "all-reduce of the gradients",
        "2(n−1)/n·Ψq", 2 * (n - 1) / n * Pe, dp_run["sent"][0], "network",
        "n× the examples per step; no memory saved", "li2020pytorch")
    for stage, (name, rep, sh, buys) in enumerate((
            ("ZeRO-1", "parameters, gradients", "optimizer state", "optimizer state ÷ n"),
            ("ZeRO-2", "parameters", "gradients, optimizer state",
             "gradients and optimizer state ÷ n")), start=1):
        row(name, rep, sh + "; the batch", "reduce-scatter of gradients, all-gather of "
            "parameters", "2(n−1)/n·Ψq", 2 * (n - 1) / n * Pe,
            dp_run["sent"][stage], "network", buys + " at DP's bytes", "rajbhandari2020zero")
    row("ZeRO-3 / FSDP", "nothing between steps", "all model state; the batch",
        "all-gather of parameters (forward and backward), reduce-scatter of gradients",
        "3(n−1)/n·Ψq", 3 * (n - 1) / n * Pe, dp_run["sent"][3], "network (HSDP: node)",
        "all model state ÷ n for 1.5× DP's bytes", "rajbhandari2020zero; zhao2023fsdp")
    for sp, name in ((False, "TP"), (True, "TP + SP")):
        lt = layer_traffic(b_tp, s, h, tp, e, sequence_parallel=sp)
        predicted = L * sum(ring_wire_bytes(op, p, tp) for ph in lt.values() for op, (_, p) in ph.items())
        counted = tp_run["sp" if sp else "tp"]
        measured = L * (wire(counted["forward"], tp) + wire(counted["backward"], tp))
        if not sp:
            row(name, "norms; activations between blocks", "weight matrices and their state; "
                "activations inside attention and MLP", "4 all-reduces of b·s·h per layer",
                "8l(t−1)/t·bshq", predicted, measured, "NVLink (node)",
                "weights and matmul work ÷ t", "shoeybi2019megatron")
        else:
            row(name, "norm weights", "TP's shards; every activation (along s)",
                "per layer: 4 all-gathers, 4 reduce-scatters; 2 more all-gathers backward",
                "10l(t−1)/t·bshq", predicted, measured, "NVLink (node)",
                "every activation ÷ t", "korthikanti2022reducing")
    # PP: stage k sends its output (forward) and its input gradient (backward), b/dp·s·h each
    act = pp_run["batch"] // pp_run["dp"] * s * h * e
    row("PP", "nothing", "layers (l/p a stage) and their state. Not the activations: 1F1B's "
        "first stage keeps p micro-batches of l/p layers, a whole model's worth", "send/recv of boundary "
        "activations and their gradients", "b·s·h·q per micro-batch each way", float(act),
        float(pp_run["all"]["sent_bytes"]) / pp_run["steps"], "network (neighbours)",
        "model state ÷ p for little traffic; pays a bubble", "huang2019gpipe; narayanan2021megatron")
    for module in OTHER_ROW_MODULES:
        try:
            rows.extend(importlib.import_module(module).map_rows(measure=measure_others,
                                                                  world_size=world_size))
        except (ImportError, AttributeError):  # a row arrives with its module
            continue
    return rows


def _table(head: list[str], body: list[list[str]]) -> list[str]:
    from html import escape
    out = ['<div style="overflow-x: auto"><table class="systems-map" style="font-size: 0.85em">',
           "<thead><tr>" + "".join(f"<th>{escape(c)}</th>" for c in head) + "</tr></thead><tbody>"]
    for cells in body:
        out.append("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in cells) + "</tr>")
    return out + ["</tbody></table></div>"]


def map_html(rows: list[dict]) -> str:
    """The map as two narrow HTML tables: what a rank holds, then what that costs and where.

    Bytes are wire bytes per rank per step (for EP the all-to-all payload a rank hands in); the
    CP and EP rows count their ring and all-to-all only, their gradient reduction is DP's row."""
    holds = _table(["Strategy", "Replicated", "Sharded"],
                   [[r["strategy"], r["replicated"], r["sharded"]] for r in rows])
    costs = _table(["Strategy", "Moves", "Bytes / rank / step", "Predicted", "Counted", "Link"],
                   [[r["strategy"], r["collective"], r["bytes_per_step_formula"],
                     _fmt(r["bytes_predicted"]) if r.get("bytes_predicted") is not None else "–",
                     _fmt(r["bytes_measured"]) if r.get("bytes_measured") is not None else "–",
                     r["link"]] for r in rows])
    return "\n".join(["<p><b>What each rank holds</b></p>", *holds,
                      "<p><b>What moves, how much, and on which link</b></p>", *costs])


def map_runs(rank: int, world_size: int) -> dict:
    """Rank worker: the DP x TP and DP x PP training runs and the DP/ZeRO step, in one launch."""
    from playground.systems_map.compose import compose_runs
    return {"compose": compose_runs(rank, world_size), "dp": measure_data_parallel(rank, world_size)}


def verdicts(rows: list[dict]) -> str:
    """One line per row that carries both numbers: measured beside predicted, and the verdict."""
    lines = []
    for r in rows:
        pred, meas = r.get("bytes_predicted"), r.get("bytes_measured")
        if pred is None or meas is None:
            continue
        ok = abs(meas - pred) <= 1e-9 * max(1.0, pred)
        lines.append(f"{r['strategy']:14s} counted {meas:>9,.0f} B   predicted {pred:>9,.0f} B   "
                     + ("equal" if ok else "DIFFERENT"))
    return "\n".join(lines)


# Dubey et al. (2024), Table 4: the 4-D layouts of the Llama 3 405B pre-training run, in their
# order [TP, CP, PP, DP] from fastest- to slowest-varying (TP innermost, inside one 8-GPU server).
LLAMA3_LAYOUTS = (
    {"gpus": 8192, "tp": 8, "cp": 1, "pp": 16, "dp": 64, "seq_len": 8192},
    {"gpus": 16384, "tp": 8, "cp": 1, "pp": 16, "dp": 128, "seq_len": 8192},
    {"gpus": 16384, "tp": 8, "cp": 16, "pp": 16, "dp": 8, "seq_len": 131072},
)


def layout_report(gpus_per_node: int = 8) -> str:
    """For each Llama 3 layout: the grid, its size check, and how many nodes a group of each axis spans."""
    from playground.systems_map.grid import RankGrid
    lines = [f"{'GPUs':>6} {'seq':>7}  grid (outermost first)          nodes spanned by one group"]
    for lay in LLAMA3_LAYOUTS:
        grid = RankGrid(dp=lay["dp"], pp=lay["pp"], cp=lay["cp"], tp=lay["tp"])
        if grid.world_size != lay["gpus"]:
            raise AssertionError(f"{lay}: the axes multiply to {grid.world_size}, not {lay['gpus']}")
        spans = "  ".join(f"{a}:{grid.nodes_spanned(a, gpus_per_node)}" for a in ("tp", "cp", "pp", "dp"))
        lines.append(f"{lay['gpus']:>6} {lay['seq_len']:>7}  {grid.label(0).rsplit('-', 1)[0]:30s}  {spans}")
    return "\n".join(lines)



def explorer_text(h: int = 16_384, s: int = 8_192, b: int = 1, a: int = 128, t: int = 8,
                  card: str = "H100") -> str:
    """What the explorer shows for one setting: TP and TP+SP bytes per layer per rank
    (Eqs. tp-bytes, sp-bytes), their time over NVLink and the NIC, and activations per layer
    (Korthikanti et al., bf16 with dropout); all accounted from formulas and the hardware table."""
    from playground.hardware import gpu
    from playground.systems_map.tp_measure import korthikanti_bytes, layer_traffic

    g = gpu(card)
    lines = [f"h={h:,} s={s:,} b={b} a={a} t={t} {g.name}, bf16 (accounted)"]
    for sp in (False, True):
        lt = layer_traffic(b, s, h, t, 2, sp)
        wire_b = sum(ring_wire_bytes(op, p, t) for ph in lt.values() for op, (_, p) in ph.items())
        act = korthikanti_bytes(s, b, h, a, t, sp)
        lines.append(f"{'TP+SP' if sp else 'TP'}: {wire_b / 1e9:.3f} GB/layer/rank; "
                     f"{wire_b / g.nvlink_bytes_per_s * 1e3:.2f} ms NVLink, "
                     f"{wire_b / g.network_bytes_per_s * 1e3:.2f} ms NIC; "
                     f"activations {act / 1e9:.2f} GB/layer")
    return "\n".join(lines)


def placement_explorer(h: int = 16_384, s: int = 8_192, b: int = 1, a: int = 128, t: int = 8,
                       card: str = "H100"):
    """Sliders for h, s, b, a, t and the GPU over ``explorer_text``; starts at the chapter's
    405B values and draws them on first display."""
    import ipywidgets as widgets

    from playground.hardware import gpu_names

    wide = dict(layout=widgets.Layout(width="300px"), style={"description_width": "initial"})
    controls = {"h": widgets.IntSlider(value=h, min=1024, max=32768, step=1024, description="hidden h",
                                       **wide),
                "s": widgets.IntSlider(value=s, min=512, max=131072, step=512, description="tokens s",
                                       **wide),
                "b": widgets.IntSlider(value=b, min=1, max=16, description="sequences b", **wide),
                "a": widgets.IntSlider(value=a, min=8, max=256, step=8, description="heads a", **wide),
                "t": widgets.Dropdown(options=[2, 4, 8, 16], value=t, description="TP size t", **wide),
                "card": widgets.Dropdown(options=gpu_names(), value=card, description="GPU", **wide)}
    text = widgets.HTML(f"<pre>{explorer_text(h, s, b, a, t, card)}</pre>")  # drawn before display

    def draw(change):
        values = {name: w.value for name, w in controls.items()}
        text.value = f"<pre>{explorer_text(**values)}</pre>"

    for w in controls.values():
        w.observe(draw, names="value")
    boxes = list(controls.values())
    return widgets.VBox([widgets.HBox(boxes[:3], layout=widgets.Layout(flex_flow="row wrap")),
                         widgets.HBox(boxes[3:], layout=widgets.Layout(flex_flow="row wrap")), text])


def _report(values) -> None:
    from playground.systems_map.tp_measure import check_block
    from playground.launch import run
    block = run(check_block, len(values), (len(values),), quiet=True)
    rows = map_rows(values[0]["dp"], block[0][len(values)], values[0]["compose"]["dp_pp"],
                    world_size=len(values), tp=len(values))
    print(verdicts(rows))


if __name__ == "__main__":
    from playground.systems_map.compose import check_world_size
    from playground.launch_cli import cli
    cli(map_runs, default_world_size=4, report=_report, check=check_world_size)
