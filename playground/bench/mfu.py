"""MFU: time real bf16 training steps of the shared GPT, count their FLOPs, compare with peak.

The FLOPs are the planner's (``planner.flops.megatron_flops_per_iteration``, no recomputation:
model FLOPs) and are cross-checked against PyTorch's own FLOP counter on one step.  On a GPU
found in the hardware table, achieved TFLOP/s is divided by its dense bf16 peak; on a CPU the
achieved figure is reported and no peak is claimed.
"""

from __future__ import annotations

import statistics
import time

import torch

from playground.bench import check_fits
from playground.planner.architecture import Model
from playground.planner.flops import megatron_flops_per_iteration
from playground.planner.layout import Cluster, Layout
from playground.planner.step_range import predict_range
from playground.hardware import UnknownGPUError, gpu
from playground.model import ModelConfig, build_model, loss_fn, synthetic_batch

# sizes that keep one H200 busy (~0.2 PFLOP a step) and a laptop CPU done in seconds
GPU_DEFAULTS = dict(hidden=4096, layers=8, heads=32, seq_len=2048, vocab=32768, batch=8, steps=8)
CPU_DEFAULTS = dict(hidden=256, layers=2, heads=4, seq_len=128, vocab=1024, batch=4, steps=3)


def add_arguments(parser) -> None:
    for name in GPU_DEFAULTS:
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=None,
                            help=f"(GPU default {GPU_DEFAULTS[name]}, CPU default {CPU_DEFAULTS[name]})")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first (default 2)")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")


def _device(choice: str) -> torch.device:
    if choice == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda asked for, but no CUDA device is available")
    if choice == "auto":
        choice = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(choice)


def _peak(device: torch.device):
    """The hardware table's row for this GPU, or None (CPU, or a GPU the table lacks)."""
    return table_gpu(torch.cuda.get_device_name(device)) if device.type == "cuda" else None


def table_gpu(name: str):
    """The hardware table's row for a device named as CUDA names it ("NVIDIA H200"), or None."""
    for word in sorted(name.replace("-", " ").split(), key=len, reverse=True):
        for candidate in (word, f"{word} 80GB" if word == "A100" else word):
            try:
                return gpu(candidate)
            except UnknownGPUError:
                continue
    return None


def _step(model, optimizer, batch, device) -> None:
    inputs, targets = batch
    with torch.autocast(device.type, dtype=torch.bfloat16):
        loss = loss_fn(model(inputs), targets)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def _sync(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def prepare(args):
    """The run ``args`` ask for, checked and built: (device, size, cfg, model, optimizer, batch) with
    fp32 master weights and fused AdamW on a GPU.  ValueError (one line) for sizes that cannot run."""
    device = _device(args.device)
    defaults = GPU_DEFAULTS if device.type == "cuda" else CPU_DEFAULTS
    size = {k: getattr(args, k) if getattr(args, k) is not None else v for k, v in defaults.items()}
    for key, value in size.items():
        if value < 1:
            raise ValueError(f"--{key.replace('_', '-')} must be >= 1, got {value}")
    if args.warmup < 0:
        raise ValueError(f"--warmup must be >= 0, got {args.warmup}")
    cfg = ModelConfig(vocab=size["vocab"], d_model=size["hidden"], n_heads=size["heads"],
                      n_layers=size["layers"], seq_len=size["seq_len"])
    # fp32 weights, gradients and AdamW's two moments (16 B per parameter), plus activations:
    # ~34 B per token per hidden unit and layer (Korthikanti et al.) and the logits with their
    # gradient in fp32 and bf16 (12 B per token per vocabulary entry)
    tokens = size["batch"] * cfg.seq_len
    need = 16 * cfg.param_count() + tokens * (34 * cfg.d_model * cfg.n_layers + 12 * cfg.vocab)
    check_fits(need, f"the model {size}", per_gpu=device.type == "cuda")
    model = build_model(cfg, device=device)            # fp32 master weights
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device.type == "cuda")
    batch = tuple(t.to(device) for t in synthetic_batch(cfg, size["batch"], step=0))
    return device, size, cfg, model, optimizer, batch


def run(args) -> dict:
    device, size, cfg, model, optimizer, batch = prepare(args)
    from torch.utils.flop_counter import FlopCounterMode
    with FlopCounterMode(display=False) as counter:     # one step, counted by PyTorch
        _step(model, optimizer, batch, device)
    counted = counter.get_total_flops()
    for _ in range(args.warmup):
        _step(model, optimizer, batch, device)
    times = []
    for _ in range(size["steps"]):
        _sync(device)
        start = time.perf_counter()
        _step(model, optimizer, batch, device)
        _sync(device)
        times.append(time.perf_counter() - start)

    flops = megatron_flops_per_iteration(size["batch"], cfg.seq_len, cfg.n_layers, cfg.d_model,
                                         cfg.vocab, recompute="none")
    step_s = statistics.median(times)
    achieved = flops / step_s
    peak = _peak(device)
    return {
        "backend": None, "device_type": device.type, "model": size,
        "params": cfg.param_count(), "dtype": "bf16 autocast, fp32 master weights, AdamW",
        "flops_per_step_formula": flops, "flops_per_step_counted": counted,
        "formula_over_counted": round(flops / counted, 4) if counted else None,
        "step_times_s": [round(t, 4) for t in times], "median_step_s": round(step_s, 4),
        "tokens_per_s": round(size["batch"] * cfg.seq_len / step_s, 1),
        "achieved_tflops": float(f"{achieved / 1e12:.4g}"),  # 4 significant digits, even on a CPU
        "peak_tflops": None if peak is None else round(peak.peak_bf16_flops / 1e12, 1),
        "gpu_in_table": None if peak is None else peak.name,
        "mfu": None if peak is None else round(achieved / peak.peak_bf16_flops, 4),
    }


def formula_over_counted_expected(size: dict, device_type: str) -> float:
    """What eq-megatron over PyTorch's FLOP counter should read for a run of ``size``: the formula
    counts attention's scores 3 times a forward (forward + twice for backward).  A CPU's counter
    does not see the fused attention at all; a GPU's sees the fused (flash) attention's backward,
    which computes the scores again: 3.5 forwards."""
    tail = size["vocab"] / (12 * size["layers"] * size["hidden"])    # the logits, over the layers
    attention = size["seq_len"] / (6 * size["hidden"])               # the scores, over the layers
    counted = 1 + tail + (attention * 3.5 / 3 if device_type == "cuda" else 0.0)
    return (1 + attention + tail) / counted


def predicted(record: dict) -> dict:
    """The step-time model's prediction (``predict_range``: value and range) for a GPU record's run,
    set up as the bench runs it: one GPU, the course's GPT (untied logits, learned positions, a 4h
    GELU MLP), eager PyTorch kernels under bf16 autocast over its fp32 weights (``autocast_fp32``: each
    weight cast where used, the residual stream fp32), no recomputation, one micro-batch, and the fused attention
    PyTorch's SDPA ran there: on the H200 of the records, cuDNN's (``bench profile`` names its
    kernels: ``"cudnn"``; before Hopper the model prices it as FlashAttention-2)."""
    size = record["model"]
    model = Model(size["layers"], size["hidden"], size["heads"], vocab=size["vocab"], seq_len=size["seq_len"],
                  tied_embeddings=False, name="the course's GPT")
    layout = Layout.today(micro_batch=size["batch"], global_batch=size["batch"], kernels="eager",
                          attention_kernel="cudnn", autocast_fp32=True)
    return predict_range(model, Cluster.of(record["gpu_in_table"]), layout)

