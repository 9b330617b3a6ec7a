"""The planner's formulas confronted with PyTorch's own counters, on the course's ``TinyGPT``.

``playground.planner`` predicts FLOPs and activation bytes from a model's shape; these two functions
count them on a real model (``FlopCounterMode``, saved-tensor hooks), so the chapter and the
tests can set prediction beside measurement.
"""

from __future__ import annotations

from playground.planner.errors import PlanError

__all__ = ["measure_training_flops", "measure_layer_activation_bytes", "measure_activation_bytes",
           "measure_routed_copy_bytes", "measure_fp8_mlp_bytes", "measure_fp8_weight_bytes",
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


def _swiglu(gate_up, weights=None):
    import torch
    gate, up = gate_up.float().chunk(2, dim=-1)
    out = torch.nn.functional.silu(gate) * up
    return (out if weights is None else out * weights).to(gate_up.dtype)


def measure_routed_copy_bytes(hidden: int, expert_width: int, probs: str, copies: int = 64, grad: bool = False):
    """Bytes one routed copy leaves saved in a bf16 SwiGLU expert, its router weight (fp32) applied where
    ``probs`` says (``Layout.moe_probs``): ``"activation"``, inside the SwiGLU (Megatron-Core since
    v0.13), or ``"combine"``, on the expert's output as the combine sums the copies (before it).  The
    SwiGLU is checkpointed, so it keeps only its input (and the weights) and recomputes the rest, as
    Megatron-Core's fused ``bias_swiglu_impl`` and ``weighted_bias_swiglu_impl`` do.
    Counted by ``SavedActivations`` over ``copies`` copies, the router weights' 4 bytes a copy included.
    ``grad``: also return the output and the gradients of the copies, the router weights and the two
    matrices, to check the two placements against each other."""
    import torch
    from torch.utils import checkpoint

    from playground.memory import SavedActivations
    from playground.planner.layout import MOE_PROBS
    if probs not in MOE_PROBS:
        raise PlanError(f"probs must be one of {', '.join(MOE_PROBS)}, got {probs!r}")
    g = torch.Generator().manual_seed(0)
    x = torch.randn(copies, hidden, generator=g).to(torch.bfloat16).requires_grad_()
    w_in = (torch.randn(hidden, 2 * expert_width, generator=g) / hidden ** 0.5).to(torch.bfloat16).requires_grad_()
    w_out = (torch.randn(expert_width, hidden, generator=g) / expert_width ** 0.5).to(torch.bfloat16).requires_grad_()
    weights = torch.rand(copies, 1, generator=g).requires_grad_()
    with SavedActivations(exclude=[w_in, w_out]) as saved:
        if probs == "activation":
            out = checkpoint.checkpoint(_swiglu, x @ w_in, weights, use_reentrant=False) @ w_out
        else:
            out = checkpoint.checkpoint(_swiglu, x @ w_in, use_reentrant=False) @ w_out * weights
    per_copy = saved.bytes / copies
    if not grad:
        return per_copy
    out.float().square().sum().backward()
    return per_copy, out.detach().float(), [t.grad for t in (x, weights, w_in, w_out)]


def _float8_linear(keep: str, cache: dict | None = None, transpose: bool = False):
    """An FP8 linear layer, ``y = x W`` with both operands cast to float8 (e4m3, one scale a tensor) and the
    product taken in fp32, that keeps for the weight gradient either the FP8 copy of ``x`` it cast
    (``keep="fp8"``, as Transformer Engine's Linear does) or ``x`` itself (``"bf16"``, as torchao's
    Float8Linear does, casting it again in backward).  Both give the same gradients.  With ``cache`` (a dict)
    each weight is cast on its first use and the cast kept there for the later micro-batches of the step
    (Transformer Engine's ``is_first_microbatch`` workspace), with ``transpose`` also a transposed copy for
    the input gradient, as a GPU whose FP8 GEMMs take one layout (a Hopper) needs."""
    import torch

    def cast(t):
        scale = 448.0 / t.abs().amax().float().clamp(min=1e-12).item()   # e4m3's largest value at the max
        return (t.float() * scale).to(torch.float8_e4m3fn), scale

    def weight(w):   # (the FP8 weight, the FP8 weight laid out for the input gradient, its scale)
        if cache is None:
            w8, scale = cast(w)
            return w8, w8.T, scale
        if id(w) not in cache:
            w8, scale = cast(w)
            cache[id(w)] = (w8, w8.T.contiguous() if transpose else w8.T, scale)
        return cache[id(w)]

    class Float8Linear(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            (x8, x_scale), (w8, _, w_scale) = cast(x), weight(w)
            ctx.save_for_backward(x8 if keep == "fp8" else x, w)
            ctx.x_scale = x_scale
            return ((x8.float() / x_scale) @ (w8.float() / w_scale)).to(x.dtype)

        @staticmethod
        def backward(ctx, grad):
            kept, w = ctx.saved_tensors
            x8, x_scale = (kept, ctx.x_scale) if keep == "fp8" else cast(kept)
            _, w8_t, w_scale = weight(w)
            grad_x = grad.float() @ (w8_t.float() / w_scale)
            grad_w = (x8.float() / x_scale).T @ grad.float()
            return grad_x.to(grad.dtype), grad_w.to(w.dtype)

    return Float8Linear.apply


def measure_fp8_weight_bytes(hidden: int, ffn: int, transpose: bool, micro_batches: int = 2, tokens: int = 16,
                             grad: bool = False):
    """Bytes per weight element of the FP8 copies a step keeps of a SwiGLU MLP's two weights when its linear
    layers run in FP8 (``_float8_linear``) and cast each weight once, on the step's first micro-batch, reusing
    the cast for the rest (``Layout.fp8_weight_cache``; with ``Layout.fp8_params`` the cast *is* the weight):
    counted from the storage the copies hold after ``micro_batches`` forward and backward passes.  1 with the
    cast alone, 2 with the transposed copy (``transpose``) a Hopper's FP8 GEMMs need.  ``grad``: also return
    the two weights' gradients summed over the micro-batches, and those of the same passes casting every time."""
    import torch

    g = torch.Generator().manual_seed(0)
    w_in = (torch.randn(hidden, 2 * ffn, generator=g) / hidden ** 0.5).to(torch.bfloat16).requires_grad_()
    w_out = (torch.randn(ffn, hidden, generator=g) / ffn ** 0.5).to(torch.bfloat16).requires_grad_()
    batches = [torch.randn(tokens, hidden, generator=g).to(torch.bfloat16) for _ in range(micro_batches)]
    cache: dict = {}
    grads = []
    for store in (cache, None):
        linear = _float8_linear("fp8", store, transpose)
        for x in batches:
            linear(_swiglu(linear(x, w_in)), w_out).float().square().sum().backward()
        grads.append([w.grad.clone() for w in (w_in, w_out)])
        w_in.grad = w_out.grad = None
    held = sum({t.untyped_storage().data_ptr(): t.untyped_storage().nbytes()
                for entry in cache.values() for t in entry[:2]}.values())
    per_element = held / (w_in.numel() + w_out.numel())
    return (per_element, *grads) if grad else per_element


def measure_fp8_mlp_bytes(hidden: int, ffn: int, keep: str, tokens: int = 64, grad: bool = False):
    """Bytes one token leaves saved in a bf16 SwiGLU MLP whose two linear layers run in FP8
    (``_float8_linear``), keeping the FP8 copy of their inputs (``keep="fp8"``, ``Layout.fp8_saved_inputs``)
    or the bf16 inputs (``"bf16"``); the SwiGLU is checkpointed as Megatron-Core's fused one is, keeping its
    bf16 input.  Counted by ``SavedActivations`` over ``tokens`` tokens.  ``grad``: also return the output
    and the gradients of the input and the two matrices."""
    import torch
    from torch.utils import checkpoint

    from playground.memory import SavedActivations
    if keep not in ("fp8", "bf16"):
        raise PlanError(f"keep must be fp8 or bf16, got {keep!r}")
    linear = _float8_linear(keep)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(tokens, hidden, generator=g).to(torch.bfloat16).requires_grad_()
    w_in = (torch.randn(hidden, 2 * ffn, generator=g) / hidden ** 0.5).to(torch.bfloat16).requires_grad_()
    w_out = (torch.randn(ffn, hidden, generator=g) / ffn ** 0.5).to(torch.bfloat16).requires_grad_()
    with SavedActivations(exclude=[w_in, w_out]) as saved:
        out = linear(checkpoint.checkpoint(_swiglu, linear(x, w_in), use_reentrant=False), w_out)
    per_token = saved.bytes / tokens
    if not grad:
        return per_token
    out.float().square().sum().backward()
    return per_token, out.detach().float(), [t.grad for t in (x, w_in, w_out)]
