"""The planner's formulas confronted with PyTorch's own counters, on the course's ``TinyGPT``.

``playground.planner`` predicts FLOPs and activation bytes from a model's shape; these two functions
count them on a real model (``FlopCounterMode``, saved-tensor hooks), so the chapter and the
tests can set prediction beside measurement.
"""

from __future__ import annotations

from playground.planner.errors import PlanError

__all__ = ["measure_training_flops", "measure_layer_activation_bytes", "measure_activation_bytes",
           "checkpointed_blocks"]


def checkpointed_blocks(blocks: int, share: float) -> list[int]:
    """Which of ``blocks`` blocks a share of full recomputation checkpoints: evenly spaced, the first
    half a spacing in, as fms-fsdp's ``apply_fsdp_checkpointing`` picks them (share 1/2: every other
    block from the first; 1/3: the second of every three)."""
    chosen, cut = [], 0.5
    for i in range(blocks):
        if (i + 1) * share >= cut:
            chosen.append(i)
            cut += 1
    return chosen


def measure_training_flops(cfg, batch_size: int, recompute: str = "none", recompute_share: float = 1.0) -> int:
    """FLOPs of one forward + backward of the course's ``TinyGPT``, counted by PyTorch.

    ``torch.utils.flop_counter`` counts matrix multiplies; attention runs on the plain (math)
    kernel so its two matmuls are visible, and ``recompute="full"`` checkpoints every block
    (the ``checkpointed_blocks`` of ``recompute_share``, when given) with early stopping off, so
    the whole forward really is re-run as Megatron's formula assumes.
    """
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils import checkpoint
    from torch.utils.flop_counter import FlopCounterMode

    from playground.model import build_model, synthetic_batch
    if recompute not in ("none", "full"):
        raise PlanError(f"recompute must be 'none' or 'full' here, got {recompute!r}")
    model = build_model(cfg)
    inputs, _ = synthetic_batch(cfg, batch_size, step=0)
    blocks = model.layers[1:-1]
    again = set(checkpointed_blocks(len(blocks), recompute_share)) if recompute == "full" else set()
    with sdpa_kernel(SDPBackend.MATH), checkpoint.set_checkpoint_early_stop(False), \
            FlopCounterMode(display=False) as counter:
        x = model.layers[0](inputs)
        for i, block in enumerate(blocks):
            x = checkpoint.checkpoint(block, x, use_reentrant=False) if i in again else block(x)
        model.layers[-1](x).float().sum().backward()
    return int(counter.get_total_flops())


def measure_layer_activation_bytes(cfg, batch_size: int) -> int:
    """Bytes one bf16 ``TinyGPT`` block saves for backward (``playground.memory.SavedActivations``)."""
    import torch

    from playground.memory import SavedActivations
    from playground.model import build_model
    block = build_model(cfg, dtype=torch.bfloat16).layers[1]
    x = torch.randn(batch_size, cfg.seq_len, cfg.d_model, dtype=torch.bfloat16, requires_grad=True)
    saved = SavedActivations(exclude=list(block.parameters()))
    with saved:
        block(x)
    return saved.bytes


def measure_activation_bytes(cfg, batch_size: int, recompute_share: float = 0.0) -> int:
    """Bytes all the blocks of a bf16 ``TinyGPT`` save for backward when the ``checkpointed_blocks`` of
    ``recompute_share`` (0: none) are checkpointed, each of those keeping only its input."""
    import torch
    from torch.utils import checkpoint

    from playground.memory import SavedActivations
    from playground.model import build_model
    model = build_model(cfg, dtype=torch.bfloat16)
    blocks = model.layers[1:-1]
    again = set(checkpointed_blocks(len(blocks), recompute_share)) if recompute_share else set()
    x = torch.randn(batch_size, cfg.seq_len, cfg.d_model, dtype=torch.bfloat16, requires_grad=True)
    with SavedActivations(exclude=list(model.parameters())) as saved:
        for i, block in enumerate(blocks):
            x = checkpoint.checkpoint(block, x, use_reentrant=False) if i in again else block(x)
    return saved.bytes
