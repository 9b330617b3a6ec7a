"""Megatron-Bridge's performance summary of the 25.09 NeMo container: its DGX-H100 and DGX-B200 rows.

The archive page keeps the table of 25.09, two months before the 25.11 one the validation read first.  It
gives the same columns but no precision: its footnote says the numbers in parentheses use finer FP8
scaling granularities (blockwise on H100s, MXFP8 on B200s), so the main numbers, taken here, are FP8 with
per-tensor current scaling.  Its MoE runs are marked ``tokendrop`` (a capacity factor caps each expert's
tokens, and the rest are dropped) or ``dropless`` (force-balanced over the experts, as all of 25.11's
are); either way each expert computes the mean load (``moe_imbalance`` 1).  Unstated, as in 25.11: the
recompute policy, sequence parallelism, the overlaps, the gradient-reduction dtype, the distributed
optimizer and the token dispatcher.  The experts run whole on each GPU (expert TP 1) where EP spans TP x
DP, the only reading that fits Qwen3-235B-A22B's EP 32 over DP 16, and what Megatron-Bridge's DeepSeek-V3
recipes of v0.4 set (``expert_tensor_parallel_size=1``).  Left out: the DGX-GB200 rows (no NVL72 rack in
the hardware table).

Not held out: the archive page of April 2026 (0a25f91) already held this table, and chapter 6 has
quoted its token-drop Qwen3-30B-A3B run on H100s since an earlier session (the MoE section), so some of
it had been seen.  Its rows were added after the 26.04.01 table and replayed before anything in the
model was changed for them.  First replay, predicted / published tokens/s: on H100s Llama 3 8B under Megatron-FSDP 0.95, Llama 3 70B 0.87,
Llama 3.1 405B 0.91, dropless DeepSeek-V3 on 1,024 GPUs 0.74, token-drop Qwen3-30B-A3B 1.33 and
Qwen3-235B-A22B 1.14; on B200s Llama 3 8B 1.14, Llama 3.1 405B 1.10, and token-drop DeepSeek-V3 1.68,
Qwen3-30B-A3B 1.63 and Qwen3-235B-A22B 1.57.  Six of eleven within +-20% (the same six within +-25%),
every dense run among them; nine inside their ranges; eight judged to fit as read, the other three
(DeepSeek-V3 on H100s, Qwen3-30B-A3B on H100s and Qwen3-235B-A22B on B200s, no recompute stated) with
full recomputation.  The same Qwen3-30B-A3B layouts dropless in 25.11 ran at about half these rates
(5,275 and 9,299 tokens/s a GPU against 10,494 and 18,066).  Later, the recipes were read
(``published_bridge.Recipe``; v0.1.0rc4, whose layouts are the table's, where rc3's B200 MoE ones are not):
the Llama 3 70B and 3.1 405B runs and Qwen3-235B-A22B on H100s overlap their TP communication,
DeepSeek-V3 recomputes (MLA's up-projections; on H100s the MLP too) and on H100s runs DeepEP with its
all-to-alls overlapped (0.73 -> 1.60), and Qwen3-30B-A3B on B200s graphs each layer (1.30 -> 1.56).
"""

from __future__ import annotations

from playground.planner.costs import Layout
from playground.planner.presets import preset
from playground.planner.published_automodel import DEEPSEEK_V3_4K, QWEN3_30B
from playground.planner.published_bridge import (DSV3_B200_READ, NONE_PRICED,
                                                 SELECTIVE_MLA_UP, SELECTIVE_MLA_UP_MLP, TP_OVERLAP, TP_OVERLAP_READ,
                                                 Recipe, archive_row)
from playground.planner.published_row import llama31
from playground.planner.published_zoo import QWEN3_235B

__all__ = ["MEGATRON_BRIDGE_2509"]

_ETP = "expert TP 1: the experts whole on each GPU, EP spanning TP x DP"
_row = archive_row("25.09", held_out=False)


def _recipe(family, model, gpu, read, settings):
    """The 25.09 recipes: v0.1.0rc4's YAML files (the container shipped rc3; rc4 cherry-picked the performance
    layouts the 25.09 table prints, which rc3's B200 MoE recipes do not hold)."""
    return Recipe("v0.1.0rc4", f"{model}_llm_pretrain.yaml ({gpu})", family, read, settings)


MEGATRON_BRIDGE_2509 = (
    _row("LLAMA3_8B, 8 H100, FSDP, FP8-CS", "H100", preset("llama3-8b"),
         Layout.today(1, 1, 8, micro_batch=1, global_batch=128, zero_stage=3, dtype="fp8"), 14079, 725,
         "FSDP = 8: Megatron-FSDP over the 8 GPUs",
         recipe=_recipe("llama3", "llama3_8b", "h100", "Megatron-FSDP, no recompute: the nominal reading", {})),
    _row("LLAMA3_70B, 64 H100, TP 4 PP 8 VP 5, FP8-CS", "H100", preset("llama3-70b"),
         Layout.today(4, 8, 2, micro_batch=1, global_batch=128, vpp=5, dtype="fp8"), 1619, 727,
         recipe=_recipe("llama3", "llama3_70b", "h100", TP_OVERLAP_READ, TP_OVERLAP)),
    _row("LLAMA3.1_405B, 1024 H100, TP 8 PP 8 CP 2 VP 8, FP8-CS", "H100", llama31("405b"),
         Layout.today(8, 8, 8, cp=2, micro_batch=1, global_batch=512, vpp=8, dtype="fp8"), 302, 763,
         recipe=_recipe("llama31", "llama31_405b", "h100", TP_OVERLAP_READ, TP_OVERLAP)),
    _row("DeepSeekV3 (dropless), 1024 H100, TP 2 PP 8 VP 4 EP 64, FP8-CS", "H100", DEEPSEEK_V3_4K,
         Layout.today(2, 8, 64, ep=64, expert_tp=1, micro_batch=1, global_batch=8192, vpp=4, dtype="fp8"),
         1297, 338, _ETP,
         recipe=_recipe("deepseek", "deepseek_v3", "h100", "the MLA up-projections and the MLP recomputed "
                        "(selective), DeepEP (moe_enable_deepep) with the all-to-alls overlapped "
                        "(overlap_moe_expert_parallel_comm), the gradient reduction not overlapped",
                        dict(SELECTIVE_MLA_UP_MLP, ep_dispatch="deepep", ep_overlap=True, overlap_grad_reduce=False))),
    _row("Qwen3_30B_a3B (tokendrop), 16 H100, PP 2 VP 24 EP 8, FP8-CS", "H100", QWEN3_30B,
         Layout.today(1, 2, 8, ep=8, micro_batch=2, global_batch=512, vpp=24, dtype="fp8"), 10494, 241),
    _row("Qwen3_235B_a22B (tokendrop), 256 H100, TP 2 PP 8 VP 4 EP 32, FP8-CS", "H100", QWEN3_235B,
         Layout.today(2, 8, 16, ep=32, expert_tp=1, micro_batch=1, global_batch=2048, vpp=4, dtype="fp8"),
         1204, 178, _ETP,
         recipe=_recipe("qwen3", "qwen3_235b_a22b", "h100", TP_OVERLAP_READ + ", the all-to-all dispatcher, not "
                        "overlapped", TP_OVERLAP)),
    _row("LLAMA3_8B, 8 B200, FP8-CS", "B200", preset("llama3-8b"),
         Layout.today(1, 1, 8, micro_batch=2, global_batch=128, dtype="fp8"), 29994, 1544,
         recipe=_recipe("llama3", "llama3_8b", "b200", "no recompute; each layer CUDA-graphed (a dense model's "
                        "launches are not priced)", {})),
    _row("LLAMA3.1_405B, 128 B200, TP 4 PP 8 CP 2 VP 8, FP8-CS", "B200", llama31("405b"),
         Layout.today(4, 8, 2, cp=2, micro_batch=1, global_batch=64, vpp=8, dtype="fp8"), 664, 1676,
         recipe=_recipe("llama31", "llama31_405b", "b200", TP_OVERLAP_READ, TP_OVERLAP)),
    _row("DeepSeekV3 (tokendrop), 256 B200, PP 16 EP 8, FP8-CS", "B200", DEEPSEEK_V3_4K,
         Layout.today(1, 16, 16, ep=8, micro_batch=1, global_batch=2048, dtype="fp8"), 2265, 589,
         recipe=_recipe("deepseek", "deepseek_v3", "b200", DSV3_B200_READ, SELECTIVE_MLA_UP)),
    _row("Qwen3_30B_a3B (tokendrop), 8 B200, EP 8, FP8-CS", "B200", QWEN3_30B,
         Layout.today(1, 1, 8, ep=8, micro_batch=1, global_batch=512, dtype="fp8"), 18066, 416,
         recipe=_recipe("qwen3", "qwen3_30b_a3b", "b200", "each layer CUDA-graphed (cuda_graphs: Megatron-Core's "
                        "local graphs, whole layers: token-drop keeps their shapes fixed), no recompute, the "
                        "all-to-all dispatcher, not overlapped", dict(moe_launch="graphed"))),
    _row("Qwen3_235B_a22B (tokendrop), 64 B200, PP 8 VP 2 EP 8, FP8-CS", "B200", QWEN3_235B,
         Layout.today(1, 8, 8, ep=8, micro_batch=1, global_batch=1024, vpp=2, dtype="fp8"), 4104, 607,
         recipe=_recipe("qwen3", "qwen3_235b_a22b", "b200", NONE_PRICED, {})),
)
