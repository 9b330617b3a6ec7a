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
(5,275 and 9,299 tokens/s a GPU against 10,494 and 18,066).
"""

from __future__ import annotations

from playground.planner.costs import Layout
from playground.planner.presets import preset
from playground.planner.published_automodel import DEEPSEEK_V3_4K, QWEN3_30B
from playground.planner.published_bridge import NO_RECOMPUTE, RECIPE, SELECTIVE_MLA_UP, archive_row
from playground.planner.published_row import llama31
from playground.planner.published_zoo import QWEN3_235B

__all__ = ["MEGATRON_BRIDGE_2509"]

_ETP = "expert TP 1: the experts whole on each GPU, EP spanning TP x DP"
_row = archive_row("25.09", held_out=False)


MEGATRON_BRIDGE_2509 = (
    _row("LLAMA3_8B, 8 H100, FSDP, FP8-CS", "H100", preset("llama3-8b"),
         Layout.today(1, 1, 8, micro_batch=1, global_batch=128, zero_stage=3, dtype="fp8"), 14079, 725,
         "FSDP = 8: Megatron-FSDP over the 8 GPUs"),
    _row("LLAMA3_70B, 64 H100, TP 4 PP 8 VP 5, FP8-CS", "H100", preset("llama3-70b"),
         Layout.today(4, 8, 2, micro_batch=1, global_batch=128, vpp=5, dtype="fp8"), 1619, 727),
    _row("LLAMA3.1_405B, 1024 H100, TP 8 PP 8 CP 2 VP 8, FP8-CS", "H100", llama31("405b"),
         Layout.today(8, 8, 8, cp=2, micro_batch=1, global_batch=512, vpp=8, dtype="fp8"), 302, 763),
    _row("DeepSeekV3 (dropless), 1024 H100, TP 2 PP 8 VP 4 EP 64, FP8-CS", "H100", DEEPSEEK_V3_4K,
         Layout.today(2, 8, 64, ep=64, expert_tp=1, micro_batch=1, global_batch=8192, vpp=4, dtype="fp8"),
         1297, 338, _ETP, NO_RECOMPUTE),
    _row("Qwen3_30B_a3B (tokendrop), 16 H100, PP 2 VP 24 EP 8, FP8-CS", "H100", QWEN3_30B,
         Layout.today(1, 2, 8, ep=8, micro_batch=2, global_batch=512, vpp=24, dtype="fp8"), 10494, 241,
         misfit=NO_RECOMPUTE),
    _row("Qwen3_235B_a22B (tokendrop), 256 H100, TP 2 PP 8 VP 4 EP 32, FP8-CS", "H100", QWEN3_235B,
         Layout.today(2, 8, 16, ep=32, expert_tp=1, micro_batch=1, global_batch=2048, vpp=4, dtype="fp8"),
         1204, 178, _ETP),
    _row("LLAMA3_8B, 8 B200, FP8-CS", "B200", preset("llama3-8b"),
         Layout.today(1, 1, 8, micro_batch=2, global_batch=128, dtype="fp8"), 29994, 1544),
    _row("LLAMA3.1_405B, 128 B200, TP 4 PP 8 CP 2 VP 8, FP8-CS", "B200", llama31("405b"),
         Layout.today(4, 8, 2, cp=2, micro_batch=1, global_batch=64, vpp=8, dtype="fp8"), 664, 1676),
    _row("DeepSeekV3 (tokendrop), 256 B200, PP 16 EP 8, FP8-CS", "B200", DEEPSEEK_V3_4K,
         Layout.today(1, 16, 16, ep=8, micro_batch=1, global_batch=2048, dtype="fp8", **SELECTIVE_MLA_UP),
         2265, 589, RECIPE.format(tag="v0.1.0rc4", config="deepseek_v3_llm_pretrain.yaml, b200", family="deepseek")),
    _row("Qwen3_30B_a3B (tokendrop), 8 B200, EP 8, FP8-CS", "B200", QWEN3_30B,
         Layout.today(1, 1, 8, ep=8, micro_batch=1, global_batch=512, dtype="fp8"), 18066, 416),
    _row("Qwen3_235B_a22B (tokendrop), 64 B200, PP 8 VP 2 EP 8, FP8-CS", "B200", QWEN3_235B,
         Layout.today(1, 8, 8, ep=8, micro_batch=1, global_batch=1024, vpp=2, dtype="fp8"), 4104, 607,
         misfit=NO_RECOMPUTE),
)
