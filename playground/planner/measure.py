"""The planner's formulas confronted with PyTorch's own counters, on the course's ``TinyGPT``.

``playground.planner`` predicts FLOPs and activation bytes from a model's shape; these two functions
count them on a real model (``FlopCounterMode``, saved-tensor hooks), so the chapter and the
tests can set prediction beside measurement.
"""

from __future__ import annotations

from playground.planner.errors import PlanError

__all__ = ["measure_training_flops", "measure_layer_activation_bytes"]


def measure_training_flops(cfg, batch_size: int, recompute: str = "none") -> int:
    """FLOPs of one forward + backward of the course's ``TinyGPT``, counted by PyTorch.

    ``torch.utils.flop_counter`` counts matrix multiplies; attention runs on the plain (math)
    kernel so its two matmuls are visible, and ``recompute="full"`` checkpoints every block
    with early stopping off, so the whole forward really is re-run as Megatron's formula assumes.
    """
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils import checkpoint
    from torch.utils.flop_counter import FlopCounterMode

    from playground.model import build_model, synthetic_batch
    if recompute not in ("none", "full"):
        raise PlanError(f"recompute must be 'none' or 'full' here, got {recompute!r}")
    model = build_model(cfg)
    inputs, _ = synthetic_batch(cfg, batch_size, step=0)
    with sdpa_kernel(SDPBackend.MATH), checkpoint.set_checkpoint_early_stop(False), \
            FlopCounterMode(display=False) as counter:
        x = model.layers[0](inputs)
        for block in model.layers[1:-1]:
            x = checkpoint.checkpoint(block, x, use_reentrant=False) if recompute == "full" else block(x)
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
