"""Profile: where one training step of the course's GPT spends its device time, by kind of kernel.

The same run as ``bench mfu`` (its sizes, flags and defaults), traced with ``torch.profiler``: every
kernel of a few steps is put in a class by its name (matrix products, fused attention, element-wise
and normalization, the loss, the optimizer, copies) and timed per step.  On a GPU of the hardware
table the step-time model's parts for the same run stand beside them (``mfu.predicted``), so a miss
shows where it lies.  On a CPU the classes are aten operators' own time, and no model is shown.
"""

from __future__ import annotations

import re
import statistics
import time

import torch
from torch.profiler import ProfilerActivity, profile

from playground.bench import mfu

# kernel-name fragments of each class (cuBLAS's nvjet/sm90 kernels, cuDNN's and FlashAttention's,
# PyTorch's fused AdamW); on a CPU the aten operator names
_CLASSES = (
    ("attention", ("flash", "fmha", "sdpa", "cudnn", "scaled_dot_product", "efficient_attention")),
    ("optimizer", ("multi_tensor", "adam", "foreach")),
    ("matrix products", ("gemm", "nvjet", "sm90_", "sm80_", "cutlass", "xmma", "cublas", "splitk",
                         "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")),
    ("loss", ("softmax", "nll_loss", "cross_entropy", "logsumexp")),
    ("copies", ("memcpy", "memset")),
)
OTHER = "element-wise and norms"


def add_arguments(parser) -> None:
    mfu.add_arguments(parser)   # the same run as bench mfu; --steps is the number of steps traced


def kernel_class(name: str) -> str:
    """The class of one kernel (or, on a CPU, one aten operator) by its name."""
    low = name.lower()
    for label, fragments in _CLASSES:
        if any(f in low for f in fragments):
            return label
    return OTHER


_GENERIC = {"vectorized_elementwise_kernel", "unrolled_elementwise_kernel", "elementwise_kernel", "reduce_kernel",
            "func_wrapper_t", "binary_internal"}


def short_name(kernel: str) -> str:
    """A readable label for a kernel's long templated name: its first specific at::native name
    ("direct_copy", "bfloat16_copy", "add", "layer_norm_grad_input_kernel_vectorized"), else its head."""
    names = [n for n in re.findall(r"at::native::(?:\(anonymous namespace\)::)?(\w+)", kernel) if n not in _GENERIC]
    if not names:
        return kernel.split("<")[0].replace("void ", "")[:40]
    return names[0].removesuffix("_kernel_cuda").removeprefix("CUDAFunctor_")


def _kernel_seconds(prof, cuda: bool) -> dict:
    """{name: seconds over all traced steps}: device kernels on a GPU (not the profiler's own
    annotations of the CPU ops that launched them), operators' self time on a CPU."""
    times = {}
    if cuda:
        for e in prof.events():
            if e.device_type == torch.autograd.DeviceType.CUDA and not e.is_user_annotation:
                times[e.name] = times.get(e.name, 0.0) + e.time_range.elapsed_us() / 1e6
    else:   # an operator run inside the optimizer's step is the optimizer's, whatever its name
        for e in prof.events():
            if not e.name.startswith("aten::") or e.self_cpu_time_total <= 0:
                continue
            parent, name = e.cpu_parent, e.name
            while parent is not None:
                if parent.name.startswith("Optimizer.step"):
                    name = f"adam: {e.name}"
                    break
                parent = parent.cpu_parent
            times[name] = times.get(name, 0.0) + e.self_cpu_time_total / 1e6
    return times


def model_parts(size: dict, gpu_name: str) -> dict:
    """The step-time model's seconds for the groups of work a profile measures, for a run of ``size``
    on ``gpu_name`` as the bench runs it (``mfu.predicted``)."""
    p = mfu.predicted({"model": size, "gpu_in_table": gpu_name})
    parts = p["compute_parts"]
    return {"matrix units (products, attention, logits)": parts["gemm"] + parts["logits"],
            "element-wise, norms and loss": parts["elementwise"],
            "optimizer": p["time_breakdown"]["optimizer"], "step": p["step_time_s"]}


def predicted_groups(record: dict) -> dict | None:
    """``model_parts`` for a profile on record, or None where its device is not a GPU of the table."""
    row = mfu.table_gpu(record["provenance"]["device"]) if record["provenance"]["device_count"] else None
    return None if row is None else model_parts(record["model"], row.name)


def run(args) -> dict:
    device, size, cfg, model, optimizer, batch = mfu.prepare(args)
    cuda = device.type == "cuda"
    for _ in range(max(args.warmup, 1)):
        mfu._step(model, optimizer, batch, device)
    walls = []
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        for _ in range(size["steps"]):
            mfu._sync(device)
            start = time.perf_counter()
            mfu._step(model, optimizer, batch, device)
            mfu._sync(device)
            walls.append(time.perf_counter() - start)
    steps = size["steps"]
    per_step = {name: t / steps for name, t in _kernel_seconds(prof, cuda).items()}
    classes = {}
    for name, t in per_step.items():
        classes[kernel_class(name)] = classes.get(kernel_class(name), 0.0) + t
    wall = statistics.median(walls)
    measured = {"matrix units (products, attention, logits)":
                classes.get("matrix products", 0.0) + classes.get("attention", 0.0),
                "element-wise, norms and loss": classes.get(OTHER, 0.0) + classes.get("loss", 0.0)
                + classes.get("copies", 0.0),
                "optimizer": classes.get("optimizer", 0.0), "step": wall}
    peak = mfu._peak(device)
    predicted = model_parts(size, peak.name) if peak is not None else None
    top = sorted(per_step.items(), key=lambda kv: -kv[1])[:20]
    return {
        "backend": None, "device_type": device.type, "model": size,
        "dtype": "bf16 autocast, fp32 master weights, AdamW", "steps_traced": steps,
        "median_step_s": round(wall, 4), "kernel_time_per_step_s": round(sum(per_step.values()), 4),
        "by_class_s": {k: round(v, 5) for k, v in sorted(classes.items(), key=lambda kv: -kv[1])},
        "groups_measured_s": {k: round(v, 5) for k, v in measured.items()},
        "groups_predicted_s": None if predicted is None else {k: round(v, 5) for k, v in predicted.items()},
        "groups_measured_over_predicted": None if predicted is None else
        {k: round(measured[k] / predicted[k], 3) for k in measured if predicted[k] > 0},
        "top_kernels": [{"name": name[:160], "class": kernel_class(name), "ms_per_step": round(t * 1e3, 3)}
                        for name, t in top],
        "note": ("device kernel time per traced step by class (torch.profiler), against the step-time model "
                 "for the same run (mfu.predicted: one GPU, eager kernels, SDPA's cuDNN attention, no recomputation)"
                 if predicted is not None else
                 "CPU: each aten operator's own time per step by class; no step-time model for a CPU"),
    }
