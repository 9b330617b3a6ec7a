"""cuDNN's measured training attention on a GB200 and a GB300: a check of the attention rate on Blackwell.

The model charges a fused attention kernel the causal part it executes at ``attention_efficiency`` of the dense
bf16 peak: cuDNN's at 0.51 (``Efficiency.attention_cudnn``, read from Hopper measurements), and on a GPU whose
softmax exponential runs twice as fast (Blackwell Ultra, ``GPU.exp_rate`` 2) ``attention_fast_exp`` times that.
Do both hold on Blackwell?  cuDNN's own training benchmark answers for its kernel
(``benchmark/sdpa_benchmark_training`` of cudnn-frontend): the same cuDNN (9.22, frontend 1.21.1) on a GB200
and a GB300, causal bf16 attention forward and backward at 2K-32K tokens for three models' heads.  Kept here:
the 15 shapes of Llama 3.1 405B (64 heads of 128, 8 KV heads), DeepSeek-V3 (128 heads, 192 for Q and K, 128
for V) and the benchmark's "kimiK26" (64 such heads), batch 2, the non-deterministic backward; each time in
milliseconds as measured.  The sliding-window configuration (gpt-oss's, a 128-token window) is left out: a
window that narrow is not the rate these rows measure.

``attention_check(gpu)`` predicts each shape's forward plus backward with the model's own pieces (the causal
share a 128 x 128 tiled kernel executes, ``causal_executed``; the backward's five matmuls to the forward's two,
2.5 times; the rate of a briefly run kernel, as the benchmark ran) and returns predicted / measured time:
above 1, the model is slower than cuDNN.  ``ultra_gain`` gives the GB200's time over the GB300's, shape by
shape, the measurement ``attention_fast_exp`` and its spread come from.
"""

from __future__ import annotations

import statistics

from playground import hardware
from playground.planner.efficiency import EFFICIENCY, Efficiency
from playground.planner.kernel_rates import FUSED_ATTENTION_BACKWARD, attention_efficiency, causal_executed
from playground.planner.layout import Layout

__all__ = ["CUDNN_SOURCE", "CUDNN_ATTENTION", "attention_check", "ultra_gain", "attention_check_summary"]

CUDNN_SOURCE = ("https://github.com/NVIDIA/cudnn-frontend/tree/3929da2ef4c1dba1bb8acb68727b9134f26f40c0/benchmark/"
                "sdpa_benchmark_training/results (llama3.1, dsv3 and kimiK26 on gb200 and gb300, 2026-04-24; "
                "cuDNN 9.22, frontend 1.21.1; bfloat16, top_left causal mask, deterministic_bwd False)")

# (model, batch, tokens, heads, KV heads, head dim of Q and K, of V,
#  GB200 forward ms, GB200 backward ms, GB300 forward ms, GB300 backward ms)
CUDNN_ATTENTION = (
    ("dsv3", 2, 2048, 128, 128, 192, 128, 0.321, 1.056, 0.268, 0.977),
    ("dsv3", 2, 4096, 128, 128, 192, 128, 0.977, 3.383, 0.864, 3.127),
    ("dsv3", 2, 8192, 128, 128, 192, 128, 3.47, 11.984, 3.013, 11.074),
    ("dsv3", 2, 16384, 128, 128, 192, 128, 13.103, 50.424, 11.178, 43.911),
    ("dsv3", 2, 32768, 128, 128, 192, 128, 50.456, 212.546, 44.189, 177.494),
    ("kimiK26", 2, 2048, 64, 64, 192, 128, 0.167, 0.536, 0.136, 0.492),
    ("kimiK26", 2, 4096, 64, 64, 192, 128, 0.518, 1.698, 0.421, 1.548),
    ("kimiK26", 2, 8192, 64, 64, 192, 128, 1.733, 6.005, 1.466, 5.466),
    ("kimiK26", 2, 16384, 64, 64, 192, 128, 6.398, 24.921, 5.442, 21.253),
    ("kimiK26", 2, 32768, 64, 64, 192, 128, 25.72, 105.445, 21.498, 88.821),
    ("llama3.1", 2, 2048, 64, 8, 128, 128, 0.125, 0.389, 0.1, 0.356),
    ("llama3.1", 2, 4096, 64, 8, 128, 128, 0.391, 1.198, 0.323, 1.101),
    ("llama3.1", 2, 8192, 64, 8, 128, 128, 1.397, 4.127, 1.185, 3.832),
    ("llama3.1", 2, 16384, 64, 8, 128, 128, 5.15, 16.554, 4.593, 14.593),
    ("llama3.1", 2, 32768, 64, 8, 128, 128, 21.692, 71.756, 18.014, 59.024),
)
_COLUMN = {"GB200": 7, "GB300": 9}   # where each GPU's forward time sits in a row


def _predicted_s(gpu, b: int, s: int, heads: int, d_qk: int, d_vo: int, eff: Efficiency) -> float:
    """The model's forward plus backward of one causal attention, run briefly (no sustained-rate factor)."""
    executed = causal_executed(s, s) * s * s                 # scores a 128 x 128 tiled kernel computes
    forward_flops = 2 * b * heads * executed * (d_qk + d_vo)
    rate = attention_efficiency(gpu, Layout(1, 1, 1, attention_kernel="cudnn"), eff, d_qk) * gpu.peak_bf16_flops
    return (1 + FUSED_ATTENTION_BACKWARD) * forward_flops / rate


def attention_check(gpu: str, eff: Efficiency = EFFICIENCY) -> list[dict]:
    """Each kept shape on ``gpu`` ("GB200" or "GB300"): its shape, the measured and predicted forward plus
    backward seconds, and their ratio (predicted / measured)."""
    part, col = hardware.gpu(gpu), _COLUMN[gpu]
    rows = []
    for row in CUDNN_ATTENTION:
        name, b, s, heads, _kv, d_qk, d_vo = row[:7]
        measured = (row[col] + row[col + 1]) / 1e3
        predicted = _predicted_s(part, b, s, heads, d_qk, d_vo, eff)
        rows.append({"model": name, "tokens": s, "measured_s": measured, "predicted_s": predicted,
                     "ratio": predicted / measured})
    return rows


def ultra_gain() -> list[float]:
    """Each shape's GB200 forward plus backward time over the GB300's: what Blackwell Ultra's faster
    exponential bought cuDNN's attention."""
    return [(r[7] + r[8]) / (r[9] + r[10]) for r in CUDNN_ATTENTION]


def attention_check_summary(eff: Efficiency = EFFICIENCY) -> dict:
    """Per GPU: shapes, predicted / measured at the median and its range; and the measured GB300 gain's
    median and range beside the constant the model charges."""
    out = {}
    for gpu in _COLUMN:
        ratios = [r["ratio"] for r in attention_check(gpu, eff)]
        out[gpu] = {"entries": len(ratios), "median_ratio": round(statistics.median(ratios), 3),
                    "ratio_range": [round(min(ratios), 3), round(max(ratios), 3)]}
    gains = ultra_gain()
    out["ultra_gain"] = {"median": round(statistics.median(gains), 3),
                         "range": [round(min(gains), 3), round(max(gains), 3)],
                         "charged": eff.attention_fast_exp}
    return out
