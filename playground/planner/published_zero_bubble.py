"""Qi et al.'s measured A/B of the zero-bubble schedule: ZB-1p beside 1F1B in twelve settings.

Qi et al. 2024 (arXiv:2401.10241) train four GPT-3-like models with pipeline parallelism alone on 8 to 32
A100 SXM 80GB GPUs (4 nodes, RoCE) in their Megatron-LM fork.  Table 3 gives each model's layers, heads,
hidden size, sequence length (1,024), stages, micro-batch size and three numbers of micro-batches; the first
and last stages carry one layer fewer than the rest, to pay for the embedding and the loss.  Table 4 gives
samples per GPU per second under 1F1B, interleaved 1F1B, ZB-1p and ZB-2p, each timed after warm-up with the
same code.  ZB-1p is the schedule their search finds under 1F1B's memory (p micro-batches of activations);
their Table 5 prints the same bubble for it as for the hand-made ZB-H1 in all twelve settings, so it is set
beside the planner's ``pp_schedule="zb-h1"``.

What the tables leave out is taken as Megatron-LM ran by default in 2023: the GPT-2 vocabulary padded to
51,200, no recomputation, dropout 0.1, attention unfused (``--use-flash-attn`` off).  Those change both
schedules' times alike, so the comparison that matters is the ratio measured side by side, ZB-1p's
throughput over 1F1B's.  ZB-2p (twice the memory, a searched schedule with no closed form) and interleaved
1F1B (a layer a chunk on stages of unequal size, which Megatron-Core's interleaving cannot express) are left
out.
"""

from __future__ import annotations

from playground.planner.architecture import Model
from playground.planner.costs import Cluster, Layout
from playground.planner.efficiency import EFFICIENCY, Efficiency
from playground.planner.step_time import predict

__all__ = ["ZERO_BUBBLE_SETTINGS", "ZERO_BUBBLE_MEASURED", "zero_bubble_ab"]

SOURCE = "Qi et al. 2024, arXiv:2401.10241, Table 3 (models and settings) and Table 4 (samples per GPU per second)"
# (model, layers, heads, hidden, stages = GPUs, micro-batch size, the numbers of micro-batches timed)
ZERO_BUBBLE_SETTINGS = (("1.5B", 22, 24, 2304, 8, 6, (24, 32, 64)), ("6.2B", 30, 32, 4096, 8, 3, (24, 32, 64)),
                        ("14.6B", 46, 40, 5120, 16, 1, (48, 64, 128)), ("28.3B", 62, 48, 6144, 32, 1, (96, 128, 256)))
# samples per GPU per second, in the settings' order (each model's three micro-batch counts in turn)
ZERO_BUBBLE_MEASURED = {
    "1f1b": (11.8, 12.5, 13.6, 3.50, 3.70, 4.03, 1.40, 1.49, 1.64, 0.76, 0.80, 0.88),
    "zb-1p": (12.9, 13.4, 14.2, 3.88, 4.00, 4.20, 1.61, 1.67, 1.76, 0.87, 0.90, 0.96),
}


def _layout(stages: int, layers: int, micro_batch: int, micro_batches: int, schedule: str) -> Layout:
    inner = (layers + 2) // stages          # the first and last stages one layer short
    return Layout(1, stages, 1, micro_batch, micro_batch * micro_batches, recompute="none", dropout=True,
                  flash_attention=False, first_stage_layers=inner - 1, last_stage_layers=inner - 1,
                  pp_schedule=schedule)


def zero_bubble_ab(eff: Efficiency = EFFICIENCY) -> list[dict]:
    """Each of the twelve settings: the measured samples per GPU per second under 1F1B and ZB-1p, the
    planner's under 1F1B and ZB-H1, and both speedups (ZB over 1F1B), with the predicted bubble shares."""
    a100, rows, i = Cluster.of("A100-80GB"), [], 0
    for label, layers, heads, hidden, stages, micro_batch, counts in ZERO_BUBBLE_SETTINGS:
        model = Model(layers, hidden, heads, vocab=51200, seq_len=1024, name=f"GPT {label}")
        for m in counts:
            predicted = {}
            for schedule in ("1f1b", "zb-h1"):
                layout = _layout(stages, layers, micro_batch, m, schedule)
                r = predict(model, a100, layout, eff)
                predicted[schedule] = (layout.global_batch / r["step_time_s"] / stages, r["bubble_fraction"])
            measured = ZERO_BUBBLE_MEASURED["1f1b"][i], ZERO_BUBBLE_MEASURED["zb-1p"][i]
            rows.append({"model": label, "stages": stages, "micro_batches": m,
                         "measured_1f1b": measured[0], "measured_zb": measured[1],
                         "predicted_1f1b": predicted["1f1b"][0], "predicted_zb": predicted["zb-h1"][0],
                         "bubble_1f1b": predicted["1f1b"][1], "bubble_zb": predicted["zb-h1"][1],
                         "measured_speedup": measured[1] / measured[0],
                         "predicted_speedup": predicted["zb-h1"][0] / predicted["1f1b"][0]})
            i += 1
    return rows
