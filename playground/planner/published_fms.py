"""fms-fsdp's published throughput (IBM's FSDP1 recipes for Llama 2): A100 and H100 rows.

The README's table of 2024-02-21 (``0d31998``) gives four runs on 128 A100s: the 7B and 13B with HSDP
(sharded inside a node, replicated across nodes) and no activation checkpointing, the 34B and 70B
with FSDP over all 128 GPUs and every block checkpointed, at the batch each ran.  It names no
network.  The same README's table of 2024-03-13 (``5e522b4``), run with "the exact same scripts and
configurations", names both clusters in its column heads: "A100 80G 128 GPUs with 400Gbps" and "H100
96 GPUs with 800 Gbps".  Those rates are read as a node's: an A100's NIC reaches 200 Gb/s and an
H100's 400, so neither is one GPU's (and the commit's ``scripts/train.sh`` sets NCCL up for AWS's EFA,
whose A100 nodes, p4d and p4de, carry 400 Gb/s each).  The 7B HSDP row of that A100 column (3,700 tokens/s) repeats
the first table's (3,760); the network is taken for the first table's rows, which ran on that cluster.

Kept from the 2024-03-13 table: its H100 column's 7B (HSDP, no checkpointing), 34B and 70B (FSDP, full
checkpointing), and its A100 column's 34B and 70B, all at two sequences a GPU; from the table of
2024-05-09 (``ed74fd5``, the same column heads), the 7B under torch.compile on both clusters
(``kernels="fused"``).  Every row runs "SDPA implementation of Flash attention v2", as each README's first
lines say: FlashAttention-2 (``attention_kernel="fa2"``), at its Hopper rate on the H100s (FlashAttention-3
came in July 2024, after all three tables).

"Selective AC" (the 13B of 2024-03-13; the compiled 13B, 34B and 70B) checkpoints a share p of the
blocks, evenly spread (``selective_checkpointing``; ``Layout.recompute_share``), that neither table
states.  Each table prints its runs' MFU (6 N + 12 l h s a token) beside their HFU (PyTorch's FLOP
counter: what ran, the recomputed forwards included); a recomputed forward adds a third of the
model's FLOPs, so HFU / MFU = 1 + p / 3 and each row takes p = 3 (HFU / MFU - 1) from its own
column, at most 1.  The ratio reads the runs' own counters: the first table's 7B (no checkpointing)
shows 0.57 and 0.57, its 34B and 70B (every block) 1.36 and 1.34, where 1 + 1/3 is expected.  The
two-digit MFUs leave p uncertain by about +-0.1 (more on the H100s' smaller ones), and the
compiled table's H100 column reads lower shares than its A100 column for the same scripts, so p is
also left unstated: the reported range spans every share.
"""

from __future__ import annotations

from playground.planner.layout import Layout
from playground.planner.published_row import PublishedStackRun, llama2, node_network

__all__ = ["FMS_FSDP"]

_REPO = "https://github.com/foundation-model-stack/fms-fsdp/blob/"
_SHAPES = ("model shapes fms_fsdp/utils/config_utils.py, defaults pretraining/config/training.py (seq_length 4096, "
           "sharding_group_size 8)")
_FEB = _REPO + "0d319983c4b3b7f7b3b5e2c5e7f746746b6f73a9/README.md (table: 128 A100s); " + _SHAPES
_MAR = _REPO + "5e522b4c4f8a5f080717e714fee7622414dd6b63/README.md (table: 'A100 80G 128 GPUs with 400Gbps', " \
    "'H100 96 GPUs with 800 Gbps'); " + _SHAPES
_MAY = _REPO + "ed74fd5ddec00e309eac20f478de883464c86526/README.md (table 'numbers are updated with torch.compile', " \
    "the same column heads); " + _SHAPES
# a node's network as the 2024-03-13 table names it, Gb/s one direction; NCCL's rings share it over the node's GPUs
_NODE_GBPS = {"A100-80GB": 400, "H100": 800}


def share_from_counters(mfu: float, hfu: float) -> float:
    """The share of the blocks a run recomputed whole, read from its published MFU and HFU:
    HFU / MFU = 1 + p / 3 (a recomputed forward is a third of the model's FLOPs), p at most 1."""
    return min(1.0, 3 * (hfu / mfu - 1))


def _row(size, gpu, gpus, hsdp, ac, batch, tps, source, table, compiled=False, counters=None):
    share = share_from_counters(*counters) if counters else 1.0
    layout = Layout.today(1, 1, gpus, micro_batch=batch, global_batch=gpus * batch, zero_stage=3,
                          shard_group=8 if hsdp else None, recompute="full" if ac else "none",
                          recompute_share=share, kernels="fused" if compiled else "eager", grad_reduce="bf16",
                          attention_kernel="fa2")
    note = (f"{table}; sequence length not in the table: 4096 (the README's 4k context, the config default); HSDP "
            "shard group not in the table: sharding_group_size 8 (default, one node); the network the README's "
            f"2024-03-13 table names, {_NODE_GBPS[gpu]} Gb/s a node (NCCL's rings share it over the node's eight "
            f"GPUs); FSDP1 (not FSDP2), SDPA's FlashAttention-2 (the README: 'SDPA implementation of Flash "
            f"attention v2'), {'torch.compile' if compiled else 'no torch.compile'}; "
            "gradients reduced in bf16 (fms_fsdp/policies/mixed_precision.py: bfSixteen, reduce_dtype bfloat16)")
    if counters:
        note += (f"; 'Selective AC': a share of the blocks checkpointed that the table does not give, read from its "
                 f"MFU {counters[0]:.2f} and HFU {counters[1]:.2f} as 3 (HFU / MFU - 1) = {share:.2f}; the range "
                 "spans every share")
    elif ac:
        note += "; activation checkpointing True with selective_checkpointing 1 (every block): full recompute"
    name = f"Llama 2 {size.upper()}, {'HSDP' if hsdp else 'FSDP'} {gpus}, batch {batch}" \
        + (", H100" if gpu == "H100" else "") + (", compiled" if compiled else "") \
        + (f", {share:.0%} of blocks recomputed" if counters else "")
    unstated = (("shard_group",) if hsdp else ()) + (("recompute_share",) if counters else ())
    return PublishedStackRun(name, "fms-fsdp", source, gpu, llama2(size), layout, unstated,
                             tokens_per_s_per_gpu=tps, note=note, cite="ibm2024fmsfsdp",
                             network_bytes_per_s=node_network(_NODE_GBPS[gpu]))


_FEB_ROWS = tuple(_row(size, "A100-80GB", 128, hsdp, ac, batch, tps, _FEB, "README of 2024-02-21")
                  for size, hsdp, ac, batch, tps in (("7b", True, False, 2, 3760), ("13b", True, False, 1, 1700),
                                                     ("34b", False, True, 8, 772), ("70b", False, True, 6, 380)))
_MAR_ROWS = tuple(_row(size, gpu, gpus, hsdp, ac, 2, tps, _MAR, "README of 2024-03-13")
                  for size, gpu, gpus, hsdp, ac, tps in (
                      ("34b", "A100-80GB", 128, False, True, 700), ("70b", "A100-80GB", 128, False, True, 370),
                      ("7b", "H100", 96, True, False, 7500), ("34b", "H100", 96, False, True, 1550),
                      ("70b", "H100", 96, False, True, 800)))
# the 13B's "Selective AC", with each column's (MFU, HFU)
_MAR_SELECTIVE = tuple(_row("13b", gpu, gpus, False, True, 2, tps, _MAR, "README of 2024-03-13", counters=counters)
                       for gpu, gpus, tps, counters in (("A100-80GB", 128, 1800, (0.51, 0.59)),
                                                        ("H100", 96, 3800, (0.35, 0.40))))
_MAY_ROWS = tuple(_row("7b", gpu, gpus, True, False, 2, tps, _MAY, "README of 2024-05-09", compiled=True)
                  for gpu, gpus, tps in (("A100-80GB", 128, 4550), ("H100", 96, 9600)))
_MAY_SELECTIVE = tuple(_row(size, gpu, gpus, False, True, 2, tps, _MAY, "README of 2024-05-09", compiled=True,
                            counters=counters)
                       for size, gpu, gpus, tps, counters in (
                           ("13b", "A100-80GB", 128, 2150, (0.61, 0.69)), ("13b", "H100", 96, 4850, (0.43, 0.46)),
                           ("34b", "A100-80GB", 128, 820, (0.55, 0.74)), ("34b", "H100", 96, 1830, (0.38, 0.49)),
                           ("70b", "A100-80GB", 128, 410, (0.55, 0.74)), ("70b", "H100", 96, 890, (0.38, 0.47))))
FMS_FSDP = _FEB_ROWS + _MAR_ROWS + _MAR_SELECTIVE + _MAY_ROWS + _MAY_SELECTIVE
