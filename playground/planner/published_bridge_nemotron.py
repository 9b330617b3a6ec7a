"""Megatron-Bridge's Nemotron 3 Nano runs, from its 26.04.01 table: a hybrid of Mamba-2 mixers and attention.

The archive page's 26.04.01 table (``published_bridge_2604`` holds its H100 and B200 transformer rows, held out)
gives Nemotron 3 Nano on eight GB300s, GB200s, B300s and B200s in MXFP8 and on sixteen H100s in FP8, at 8,192 tokens.
When that table was read the planner had no model of a Mamba-2 mixer and left these rows out; they were read again
once it had one (``ssm.Mamba2``, ``hf_hybrid``) and replayed before anything in the model was changed for them.  The
recipes of Megatron-Bridge v0.4.2 (the release of the 26.04.01 container) hold each row's layout
(scripts/performance/configs/nemotronh/nemotron_3_workload_base_configs.py): HybridEP, the attention, the Mamba-2
mixers, the router and the permutation CUDA-graphed (not the experts: their host launches still priced), no
recompute but on the H100s, which recompute the MoE, the norms, the attention core and the experts' activation and
graph only the mixers.  The model's own recipe (recipes/nemotronh/nemotron_3_nano.py): cuDNN's fused attention,
sequence parallelism (moot at TP 1), the shared expert overlapped (not priced), force-balanced routing.
"""

from __future__ import annotations

from dataclasses import replace

from playground.planner.costs import Layout
from playground.planner.published_automodel import NEMOTRON_3_NANO
from playground.planner.published_bridge import Recipe, archive_row

__all__ = ["MEGATRON_BRIDGE_NEMOTRON"]

_row = archive_row("26.04.01", held_out=False)
_NANO = replace(NEMOTRON_3_NANO, seq_len=8192)
_GRAPHED = ("HybridEP (the flex dispatcher), in bf16 after an all-gather of the routing maps; the attention, the "
            "Mamba-2 mixers, the router and the permutation CUDA-graphed (not the experts)")


def _recipe(gpu: str, dtype: str, read: str, settings: dict) -> Recipe:
    return Recipe("v0.4.2", f"NEMOTRON_3_NANO_PRETRAIN_CONFIG_{gpu}_{dtype}_V1", "nemotronh", read,
                  dict(ep_dispatch="hybridep", **settings))


def _blackwell(gpu: str, micro_batch: int, tps: float, tflops: float):
    return _row(f"Nemotron_3_Nano, 8 {gpu}, EP 8, FP8-MX", gpu, _NANO,
                Layout.today(1, 1, 8, ep=8, micro_batch=micro_batch, global_batch=512, dtype="fp8"), tps, tflops,
                recipe=_recipe(gpu, "FP8_MX", _GRAPHED + "; no recompute", {}))


MEGATRON_BRIDGE_NEMOTRON = (
    _blackwell("GB300", 4, 37888, 845),
    _blackwell("GB200", 2, 32768, 725),
    _blackwell("B300", 4, 35840, 794),
    _blackwell("B200", 2, 32768, 726),
    _row("Nemotron_3_Nano, 16 H100, EP 8, FP8-CS", "H100", _NANO,
         Layout.today(1, 1, 16, ep=8, micro_batch=1, global_batch=1024, dtype="fp8"), 14336, 321,
         "the table's FP8: current scaling, as the H100 recipes name it (fp8cs)",
         recipe=_recipe("H100", "FP8_CS", "HybridEP, in bf16 after an all-gather of the routing maps; the MoE, the "
                        "norms, the attention core and the experts' activation recomputed (selective); only the "
                        "Mamba-2 mixers CUDA-graphed",
                        dict(recompute="selective", recompute_modules=("moe", "layernorm", "core_attn", "moe_act")))),
)
