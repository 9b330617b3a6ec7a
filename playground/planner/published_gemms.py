"""Published cuBLAS matmul rates by shape on Hopper and Blackwell: a check of eq-gemm at a step's shapes.

``gemm``, the efficiency constant, comes from the best shape of a matmul sweep (MAMF).  Does the roofline
of eq-gemm (``kernel_rates.gemm_time``: that fraction of the peak, cut by tile quantization, or HBM traffic when
that is longer, plus a launch) hold at the shapes a training step multiplies?  OpenXLA ships the answer
for its own cost model: ``matmul_interpolator_data.h`` holds cuBLAS's measured bf16 rate for 375 (batch,
M, N, K) shapes from 256 to 4,096 per side on ``sm_90`` (Hopper) and ``sm_100_B200``.  Kept here: the 108
entries of each with at least 2^33 multiply-adds (batch x M x N x K), the sizes of a step's GEMMs, their
rate in TFLOP/s rounded to 0.1.  The file names the architecture, not the part: Hopper's entries are
compared with the H100 SXM's peak (the H200's compute is the same).  The measurements ran briefly, as
``gemm_time``'s constants did (no sustained-rate factor applies).

``gemm_check(gpu)`` predicts every entry with ``gemm_time`` and returns predicted / measured rate: above 1,
the model runs ahead of cuBLAS.
"""

from __future__ import annotations

import statistics

from playground.planner.kernel_rates import gemm_time
from playground.planner.efficiency import EFFICIENCY, Efficiency
from playground.planner.layout import Cluster

__all__ = ["XLA_MATMUL", "XLA_SOURCE", "STEP_SIDE", "gemm_check", "gemm_check_summary"]

XLA_SOURCE = ("https://github.com/ROCm/xla/blob/d02afb4fc18aa82cf9a8824672fc5eba298b66aa/xla/service/gpu/model/"
              "matmul_interpolator_data.h (OpenXLA's kDefaultMatmulPTable, entries sm_90 and sm_100_B200, "
              "\"bf16xbf16->bf16\")")

# (batch, M, N, K, measured TFLOP/s on sm_90, on sm_100_B200): the same 108 shapes in both
_ROWS = (
    (1, 512, 4096, 4096, 661.6, 990.5), (1, 1024, 2048, 4096, 665.7, 1014.9), (1, 1024, 4096, 2048, 639.1, 981.3),
    (1, 2048, 1024, 4096, 663.6, 1017.7), (1, 2048, 2048, 2048, 641.0, 985.8), (1, 2048, 4096, 1024, 596.5, 911.4),
    (1, 4096, 512, 4096, 662.0, 991.5), (1, 4096, 1024, 2048, 643.7, 990.3), (1, 4096, 2048, 1024, 604.6, 913.8),
    (1, 4096, 4096, 512, 551.8, 805.3), (2, 256, 4096, 4096, 602.9, 993.1), (2, 512, 2048, 4096, 662.8, 989.6),
    (2, 512, 4096, 2048, 641.0, 972.4), (2, 1024, 1024, 4096, 662.4, 991.2), (2, 1024, 2048, 2048, 642.2, 983.1),
    (2, 1024, 4096, 1024, 597.9, 906.9), (2, 2048, 512, 4096, 663.6, 992.3), (2, 2048, 1024, 2048, 639.1, 979.6),
    (2, 2048, 2048, 1024, 599.2, 910.5), (2, 2048, 4096, 512, 547.8, 804.1), (2, 4096, 256, 4096, 597.5, 985.0),
    (2, 4096, 512, 2048, 636.5, 961.1), (2, 4096, 1024, 1024, 598.5, 909.2), (2, 4096, 2048, 512, 548.7, 804.7),
    (2, 4096, 4096, 256, 467.5, 793.6), (4, 256, 2048, 4096, 589.6, 993.3), (4, 256, 4096, 2048, 601.5, 961.1),
    (4, 512, 1024, 4096, 665.3, 995.1), (4, 512, 2048, 2048, 638.0, 959.3), (4, 512, 4096, 1024, 598.2, 903.1),
    (4, 1024, 512, 4096, 662.0, 990.5), (4, 1024, 1024, 2048, 642.2, 971.5), (4, 1024, 2048, 1024, 601.2, 910.7),
    (4, 1024, 4096, 512, 549.2, 803.7), (4, 2048, 256, 4096, 573.9, 982.2), (4, 2048, 512, 2048, 635.4, 964.5),
    (4, 2048, 1024, 1024, 597.9, 912.9), (4, 2048, 2048, 512, 547.5, 802.5), (4, 2048, 4096, 256, 460.2, 794.0),
    (4, 4096, 256, 2048, 577.0, 945.8), (4, 4096, 512, 1024, 596.2, 903.8), (4, 4096, 1024, 512, 547.5, 801.2),
    (4, 4096, 2048, 256, 463.4, 790.6), (1, 1024, 4096, 4096, 751.9, 1214.0), (1, 2048, 2048, 4096, 752.2, 1208.5),
    (1, 2048, 4096, 2048, 725.5, 1172.8), (1, 4096, 1024, 4096, 751.7, 1204.9), (1, 4096, 2048, 2048, 727.5, 1170.0),
    (1, 4096, 4096, 1024, 685.2, 1075.6), (2, 512, 4096, 4096, 747.7, 1209.2), (2, 1024, 2048, 4096, 754.8, 1208.5),
    (2, 1024, 4096, 2048, 721.6, 1159.9), (2, 2048, 1024, 4096, 751.4, 1204.4), (2, 2048, 2048, 2048, 723.8, 1160.6),
    (2, 2048, 4096, 1024, 683.9, 1074.5), (2, 4096, 512, 4096, 741.0, 1203.4), (2, 4096, 1024, 2048, 721.8, 1162.7),
    (2, 4096, 2048, 1024, 684.3, 1074.8), (2, 4096, 4096, 512, 613.2, 916.8), (4, 256, 4096, 4096, 660.6, 1190.4),
    (4, 512, 2048, 4096, 748.0, 1207.8), (4, 512, 4096, 2048, 702.7, 1157.7), (4, 1024, 1024, 4096, 749.3, 1203.5),
    (4, 1024, 2048, 2048, 721.1, 1152.7), (4, 1024, 4096, 1024, 679.8, 1062.4), (4, 2048, 512, 4096, 743.3, 1181.9),
    (4, 2048, 1024, 2048, 722.3, 1158.7), (4, 2048, 2048, 1024, 685.4, 1062.8), (4, 2048, 4096, 512, 608.7, 923.3),
    (4, 4096, 256, 4096, 611.3, 1152.4), (4, 4096, 512, 2048, 710.1, 1145.3), (4, 4096, 1024, 1024, 677.7, 1060.5),
    (4, 4096, 2048, 512, 612.7, 913.2), (4, 4096, 4096, 256, 505.2, 791.8), (1, 2048, 4096, 4096, 752.3, 1342.5),
    (1, 4096, 2048, 4096, 759.4, 1343.5), (1, 4096, 4096, 2048, 735.6, 1277.8), (2, 1024, 4096, 4096, 742.7, 1340.5),
    (2, 2048, 2048, 4096, 752.2, 1341.3), (2, 2048, 4096, 2048, 722.8, 1277.1), (2, 4096, 1024, 4096, 746.6, 1335.5),
    (2, 4096, 2048, 2048, 730.6, 1276.4), (2, 4096, 4096, 1024, 691.8, 1161.2), (4, 512, 4096, 4096, 724.2, 1339.8),
    (4, 1024, 2048, 4096, 740.6, 1341.4), (4, 1024, 4096, 2048, 714.4, 1278.7), (4, 2048, 1024, 4096, 740.6, 1328.6),
    (4, 2048, 2048, 2048, 723.2, 1276.4), (4, 2048, 4096, 1024, 688.3, 1159.6), (4, 4096, 512, 4096, 720.6, 1322.7),
    (4, 4096, 1024, 2048, 716.5, 1265.2), (4, 4096, 2048, 1024, 690.2, 1163.1), (4, 4096, 4096, 512, 620.4, 1090.6),
    (1, 4096, 4096, 4096, 780.2, 1416.9), (2, 2048, 4096, 4096, 771.8, 1417.4), (2, 4096, 2048, 4096, 779.0, 1418.4),
    (2, 4096, 4096, 2048, 759.2, 1344.4), (4, 1024, 4096, 4096, 769.8, 1413.9), (4, 2048, 2048, 4096, 775.3, 1411.1),
    (4, 2048, 4096, 2048, 751.3, 1345.6), (4, 4096, 1024, 4096, 773.5, 1411.9), (4, 4096, 2048, 2048, 758.2, 1345.8),
    (4, 4096, 4096, 1024, 722.3, 1350.5), (2, 4096, 4096, 4096, 804.2, 1466.6), (4, 2048, 4096, 4096, 800.7, 1466.2),
    (4, 4096, 2048, 4096, 804.7, 1465.7), (4, 4096, 4096, 2048, 759.5, 1539.9), (4, 4096, 4096, 4096, 788.7, 1670.5),
)
# each architecture's entries under the hardware table's GPU they are read against: (batch, M, N, K, TFLOP/s)
XLA_MATMUL = {gpu: tuple((*row[:4], row[4 + i]) for row in _ROWS) for i, gpu in enumerate(("H100", "B200"))}
STEP_SIDE = 2048   # a shape "the size of a step's GEMMs": every one of M, N and K at least this


def gemm_check(gpu: str, eff: Efficiency = EFFICIENCY) -> list[dict]:
    """Each kept entry of ``gpu`` ("H100" or "B200"): its shape, the measured and the predicted TFLOP/s,
    their ratio (predicted / measured) and ``step_sized`` (every side at least ``STEP_SIDE``)."""
    hardware = Cluster.of(gpu).gpu
    rows = []
    for b, m, n, k, measured in XLA_MATMUL[gpu]:
        predicted = 2 * b * m * n * k / gemm_time(b, m, n, k, hardware, eff) / 1e12
        rows.append({"shape": (b, m, n, k), "measured_tflops": measured, "predicted_tflops": predicted,
                     "ratio": predicted / measured, "step_sized": min(m, n, k) >= STEP_SIDE})
    return rows


def gemm_check_summary(eff: Efficiency = EFFICIENCY) -> dict:
    """Per GPU: entries, median and range of predicted / measured (over all, and over the step-sized
    ones), and the measured rates' range as a fraction of the dense bf16 peak."""
    out = {}
    for gpu in XLA_MATMUL:
        rows, peak = gemm_check(gpu, eff), Cluster.of(gpu).gpu.peak_bf16_flops / 1e12
        ratios = [r["ratio"] for r in rows]
        step = [r["ratio"] for r in rows if r["step_sized"]]
        measured = [r["measured_tflops"] / peak for r in rows]
        out[gpu] = {"entries": len(rows), "median_ratio": round(statistics.median(ratios), 3),
                    "ratio_range": [round(min(ratios), 3), round(max(ratios), 3)],
                    "step_sized": {"entries": len(step), "median_ratio": round(statistics.median(step), 3),
                                   "ratio_range": [round(min(step), 3), round(max(step), 3)]},
                    "measured_of_peak": [round(min(measured), 3), round(max(measured), 3)]}
    return out
