"""The capacity plan: tokens -> steps -> FLOPs -> GPU-hours -> days -> memory -> forced parallelism.

``plan(...)`` turns a training run's size into what it costs on a given GPU, as one JSON-ready dict;
``python -m playground.capacity_plan --params 70B --tokens 1.4T --gpu H100 --gpus 1024 [--json]``
prints it (the command line is ``playground.planner.cli``).  Not exact — accurate enough to catch a
10x fantasy plan.  It reads every formula from the modules below it:

* FLOPs: ``playground.planner.flops`` (6 N D, 8 N D with full recomputation, or Megatron's
  per-iteration count when the architecture is given).
* Memory and forced parallelism: ``playground.planner.memory`` (model states, activations, the
  smallest TP x PP that fits).
* The compute-optimal size and the predicted loss: ``playground.planner.scaling_laws``.
"""

from __future__ import annotations

import math

from playground import hardware
from playground.planner.errors import PlanError
from playground.planner.flops import flops_per_token, megatron_flops_per_iteration
from playground.planner.memory import RECOMPUTE, forced_parallelism, usable_memory_bytes
from playground.planner.published_runs import HIGHEST_PUBLISHED_MFU, MAX_REPORTED_MFU
from playground.planner.scaling_laws import TOKENS_PER_PARAM, chinchilla_loss, chinchilla_optimal

__all__ = ["plan", "infer_architecture", "DEFAULT_MFU", "DEFAULT_GLOBAL_BATCH", "DEFAULT_SEQ_LEN",
           "DEFAULT_VOCAB", "MAX_LAYERS"]

DEFAULT_MFU = 0.40          # used only when neither --mfu nor --achieved-tflops is given; said so
DEFAULT_GLOBAL_BATCH = 2 ** 22  # tokens per step when none is given (4M, GPT-3/Llama-2 scale)
DEFAULT_SEQ_LEN, DEFAULT_VOCAB = 2048, 50257
MAX_LAYERS = 10_000  # 100x the deepest published LLMs; the layout search tries every PP up to it


# ----------------------------------------------------------------------------- shape
def infer_architecture(params: float, seq_len: int = DEFAULT_SEQ_LEN, vocab: int = DEFAULT_VOCAB) -> dict:
    """A GPT shape for ``params`` when none is given: N = 12 l h^2, h / l = 128, head size 128.

    GPT-3 175B (96 layers, h = 12288) has exactly that aspect ratio.  Layers and heads are rounded
    to multiples of 8 (when there are at least 8) so that TP and PP have divisors to work with.
    """
    def round8(x: float) -> int:
        return max(8, 8 * round(x / 8)) if x >= 6 else max(1, round(x))
    layers = round8((params / (12 * 128 ** 2)) ** (1 / 3))
    heads = round8(math.sqrt(params / (12 * layers)) / 128)
    return {"layers": layers, "hidden": 128 * heads, "heads": heads, "vocab": vocab, "seq_len": seq_len,
            "source": "inferred from params (N = 12 l h^2, h/l = 128, head size 128, rounded to 8s)"}


# ----------------------------------------------------------------------------- input checks
def _number(name, value, integer=False, allow_none=True):
    if value is None:
        if allow_none:
            return None
        raise PlanError(f"--{name} is required")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise PlanError(f"--{name} must be a finite number, got {value!r}")
    if value <= 0:
        raise PlanError(f"--{name} must be positive, got {value!r}")
    if integer:
        if int(value) != value:
            raise PlanError(f"--{name} must be a whole number, got {value!r}")
        return int(value)
    return float(value)


def _check(kw: dict) -> dict:
    n = lambda k, **o: _number(k.replace("_", "-"), kw.get(k), **o)  # noqa: E731
    out = dict(kw)
    for k in ("params", "active_params", "tokens", "compute", "global_batch_tokens", "mfu",
              "achieved_tflops", "price_per_gpu_hour", "max_days"):
        out[k] = n(k)
    for k in ("layers", "hidden", "heads", "vocab", "seq_len", "gpus", "micro_batch_size"):
        out[k] = n(k, integer=True)
    if out["compute"] is not None and (out["params"] is not None or out["tokens"] is not None):
        raise PlanError("give either --compute or --params/--tokens, not both")
    if out["compute"] is None and (out["params"] is None or out["tokens"] is None):
        raise PlanError("give --params and --tokens, or a FLOP budget with --compute")
    if out["mfu"] is not None and out["achieved_tflops"] is not None:
        raise PlanError("give either --mfu or --achieved-tflops, not both")
    if out["mfu"] is not None and out["mfu"] > 1:
        raise PlanError(f"--mfu must be in (0, 1], got {out['mfu']!r}")
    if kw.get("recompute") not in RECOMPUTE:
        raise PlanError(f"--recompute must be one of {', '.join(RECOMPUTE)}, got {kw.get('recompute')!r}")
    if kw.get("zero_stage") not in (0, 1, 2, 3) or isinstance(kw.get("zero_stage"), bool):
        raise PlanError(f"--zero-stage must be 0, 1, 2 or 3, got {kw.get('zero_stage')!r}")
    try:
        out["gpu"] = hardware.gpu(kw.get("gpu"))
    except hardware.UnknownGPUError as e:
        raise PlanError(str(e)) from None
    if out["achieved_tflops"] is not None and out["achieved_tflops"] * 1e12 > out["gpu"].peak_bf16_flops:
        raise PlanError(f"--achieved-tflops {out['achieved_tflops']:g} exceeds the {out['gpu'].name}'s "
                        f"dense BF16 peak of {out['gpu'].peak_bf16_flops / 1e12:g} TFLOP/s")
    if out["active_params"] is not None and out["params"] is not None and out["active_params"] > out["params"]:
        raise PlanError("--active-params cannot exceed --params")
    shape = [out[k] for k in ("layers", "hidden", "heads")]
    if any(v is not None for v in shape) and any(v is None for v in shape):
        raise PlanError("give all of --layers, --hidden, --heads, or none of them")
    if out["hidden"] is not None and out["hidden"] % out["heads"]:
        raise PlanError(f"--hidden {out['hidden']} is not divisible by --heads {out['heads']}")
    return out


# ----------------------------------------------------------------------------- the plan
def plan(params=None, active_params=None, tokens=None, compute=None, layers=None, hidden=None,
         heads=None, vocab=None, seq_len=None, global_batch_tokens=None, gpu="H100", gpus=None,
         mfu=None, achieved_tflops=None, recompute="none", zero_stage=0, price_per_gpu_hour=None,
         micro_batch_size=1, max_days=365) -> dict:
    """The capacity plan of one training run, as a JSON-ready dict (see the module docstring)."""
    k = _check(dict(locals()))
    spec, warnings = k["gpu"], []
    if k["compute"] is not None:
        k["params"], k["tokens"] = chinchilla_optimal(k["compute"])
    N, D = k["params"], k["tokens"]
    N_active = k["active_params"] or N
    opt_N, opt_D = chinchilla_optimal(6 * N_active * D)

    if k["layers"] is not None:
        arch = {"layers": k["layers"], "hidden": k["hidden"], "heads": k["heads"],
                "vocab": k["vocab"] or DEFAULT_VOCAB, "seq_len": k["seq_len"] or DEFAULT_SEQ_LEN,
                "source": "given"}
    else:
        arch = infer_architecture(N, k["seq_len"] or DEFAULT_SEQ_LEN, k["vocab"] or DEFAULT_VOCAB)
    if arch["layers"] > MAX_LAYERS:
        given = "--layers" if arch["source"] == "given" else f"the {N:g} parameters (inferred)"
        raise PlanError(f"{arch['layers']:,} layers from {given}: the planner handles at most "
                        f"{MAX_LAYERS:,}")
    batch_tokens = k["global_batch_tokens"] or DEFAULT_GLOBAL_BATCH
    batch_tokens = int(batch_tokens) if batch_tokens == int(batch_tokens) else batch_tokens
    if batch_tokens < arch["seq_len"]:
        raise PlanError(f"--global-batch-tokens {batch_tokens:g} is less than one sequence of "
                        f"{arch['seq_len']} tokens")
    steps = math.ceil(D / batch_tokens)

    # FLOPs: Megatron's count when the (dense) architecture is given, else 6ND / 8ND
    if arch["source"] == "given" and N_active == N:
        per_seq = lambda rc: megatron_flops_per_iteration(1, arch["seq_len"], arch["layers"],  # noqa: E731
                                                          arch["hidden"], arch["vocab"], rc)
        sequences = D / arch["seq_len"]
        total_flops, model_flops = per_seq(recompute) * sequences, per_seq("none") * sequences
        method = "megatron"
    else:
        total_flops, model_flops = flops_per_token(N_active, recompute) * D, 6 * N_active * D
        method = "8ND" if recompute == "full" else "6ND"

    # time: MFU is defined on model FLOPs; an achieved TFLOP/s counts the FLOPs actually executed
    if k["achieved_tflops"] is not None:
        gpu_seconds = total_flops / (k["achieved_tflops"] * 1e12)
        source = "achieved TFLOP/s given (counts executed FLOPs, recomputation included)"
    else:
        mfu_in = k["mfu"] if k["mfu"] is not None else DEFAULT_MFU
        gpu_seconds = model_flops / (mfu_in * spec.peak_bf16_flops)
        source = "given" if k["mfu"] is not None else f"assumed default {DEFAULT_MFU}"
    mfu_out = model_flops / (gpu_seconds * spec.peak_bf16_flops)
    gpu_hours = gpu_seconds / 3600
    days = gpu_hours / k["gpus"] / 24 if k["gpus"] else None

    par = forced_parallelism(N, arch, spec, k["gpus"], zero_stage, recompute, k["micro_batch_size"])
    mem = par.pop("memory")
    memory = {"model_states": mem["model_states"], "model_state_parts": mem["model_state_parts"],
              "activations": mem["activations"], "total": mem["total"], "capacity": spec.hbm_bytes,
              "usable": usable_memory_bytes(spec), "fits": par["fits"]}

    # fantasy-plan warnings
    if mfu_out > MAX_REPORTED_MFU:
        warnings.append(f"MFU {mfu_out:.2f} is above {MAX_REPORTED_MFU:.2f}, more than any published large run "
                        f"reached (the highest among the replayed runs is {HIGHEST_PUBLISHED_MFU:.2f}; "
                        f"Megatron-LM's 0.52 counts recomputation, i.e. HFU)")
    if D < TOKENS_PER_PARAM / 2 * N_active:
        warnings.append(f"{D / N_active:.1f} tokens per parameter: far below the ~{TOKENS_PER_PARAM:.0f} "
                        f"that is compute-optimal; the same FLOPs would buy a {opt_N / 1e9:.3g}B model "
                        f"on {opt_D / 1e9:.3g}B tokens")
    if not par["fits"]:
        warnings.append(f"nothing fits: even TP={par['tp']} x PP={par['pp']} needs "
                        f"{mem['total'] / 1e9:.1f} GB per GPU, the {spec.name} has {spec.hbm_bytes / 1e9:.0f} GB "
                        f"({usable_memory_bytes(spec) / 1e9:.0f} GB usable)")
    sequences_per_step = batch_tokens / arch["seq_len"]
    if par["fits"] and sequences_per_step < par["dp"] * k["micro_batch_size"]:
        warnings.append(f"global batch of {sequences_per_step:g} sequences is smaller than DP={par['dp']} "
                        f"x micro-batch {k['micro_batch_size']}: some replicas would get no data")
    if days is not None and days > k["max_days"]:
        warnings.append(f"{days:.0f} days of training exceeds the {k['max_days']:g}-day calendar")
    if k["gpus"] is None:
        warnings.append("no --gpus given: days and the data-parallel degree are not computed")

    return {
        "params": N, "active_params": N_active, "tokens": D,
        "compute_optimal": {"params": opt_N, "tokens": opt_D, "approach": 1},
        "predicted_loss": chinchilla_loss(N_active, D),
        "architecture": arch, "gpu": spec.name, "gpus": k["gpus"],
        "flops_per_token": total_flops / D, "model_flops": model_flops, "total_flops": total_flops,
        "flops_method": method, "recompute": recompute,
        "global_batch_tokens": batch_tokens, "steps": steps,
        "mfu": mfu_out, "hfu": total_flops / (gpu_seconds * spec.peak_bf16_flops), "mfu_source": source,
        "tflops_per_gpu": total_flops / gpu_seconds / 1e12,
        "gpu_hours": gpu_hours, "days": days,
        "cost": gpu_hours * k["price_per_gpu_hour"] if k["price_per_gpu_hour"] else None,
        "memory": memory, "parallelism": par, "warnings": warnings,
    }
