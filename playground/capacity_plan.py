"""Capacity planning: tokens -> steps -> FLOPs -> GPU-hours -> days -> memory -> forced parallelism.

``plan(...)`` turns a training run's size into what it costs on a given GPU, and
``python -m playground.capacity_plan --params 70B --tokens 1.4T --gpu H100 --gpus 1024 [--json]``
prints the same dict.  Not exact — accurate enough to catch a 10x fantasy plan.  Every formula is
a function of its own so that a step-time model can reuse it:

* FLOPs: 6 N_active D (forward + backward), 8 N D with full recomputation, or, when the
  architecture is given, Megatron's per-iteration count (Narayanan et al. 2021, Eq. 3).
* Memory: the ZeRO model-state formulas (Rajbhandari et al. 2020) and Korthikanti et al.'s (2022)
  activation bytes per layer for each recompute setting.
* Forced parallelism: the smallest TP x PP (TP inside one node) whose model states plus
  activations fit in the GPU's usable memory (HBM less ``MEMORY_RESERVE``), and the data-parallel
  degree that remains.
"""

from __future__ import annotations

import math

from playground import hardware, zero_memory
from playground.published_runs import HIGHEST_PUBLISHED_MFU, MAX_REPORTED_MFU
from playground.scaling_laws import TOKENS_PER_PARAM, chinchilla_loss, chinchilla_optimal

__all__ = ["plan", "PlanError", "model_state_bytes", "activation_bytes_per_layer",
           "megatron_flops_per_iteration", "flops_per_token", "forced_parallelism",
           "infer_architecture", "per_gpu_memory", "usable_memory_bytes", "report", "DEFAULT_MFU",
           "MEMORY_RESERVE", "main"]

RECOMPUTE = ("none", "selective", "full")
DEFAULT_MFU = 0.40          # used only when neither --mfu nor --achieved-tflops is given; said so
DEFAULT_GLOBAL_BATCH = 2 ** 22  # tokens per step when none is given (4M, GPT-3/Llama-2 scale)
DEFAULT_SEQ_LEN, DEFAULT_VOCAB = 2048, 50257
MAX_LAYERS = 10_000  # 100x the deepest published LLMs; the layout search tries every PP up to it
# Share of HBM a plan leaves free for what the formulas do not count: the CUDA context and cuBLAS
# workspace, NCCL buffers, allocator fragmentation, and the last stage's logits and loss.
MEMORY_RESERVE = 0.10


class PlanError(ValueError):
    """Bad or contradictory planner input; the message names the problem."""


# ----------------------------------------------------------------------------- FLOPs
def flops_per_token(active_params: float, recompute: str = "none") -> float:
    """6 N (2 forward + 4 backward per parameter); 8 N when full recomputation re-runs the forward.

    Selective recomputation re-runs only the attention core, a few percent more; without the
    architecture it is counted as 6 N (``megatron_flops_per_iteration`` counts it exactly).
    """
    return (8 if recompute == "full" else 6) * active_params


def megatron_flops_per_iteration(batch: float, seq_len: int, layers: int, hidden: int, vocab: int,
                                 recompute: str = "full") -> float:
    """FLOPs of one iteration of a GPT with ``batch`` sequences (Narayanan et al. 2021, Eq. 3).

    Per layer the forward does 24 B s h^2 (projections, 4h MLP) + 4 B s^2 h (scores and
    scores x V); the logit layer 2 B s h V; backward is twice the forward.  Full recomputation
    runs the layers' forward once more: 96 B s l h^2 (1 + s/6h + V/16lh).  Without it:
    72 B s l h^2 (1 + s/6h + V/12lh).  Selective recomputation (Korthikanti et al. 2022) re-runs
    only the attention core: + 4 B s^2 h per layer.
    """
    B, s, l, h, V = batch, seq_len, layers, hidden, vocab
    if recompute == "full":
        return 96 * B * s * l * h ** 2 * (1 + s / (6 * h) + V / (16 * l * h))
    base = 72 * B * s * l * h ** 2 * (1 + s / (6 * h) + V / (12 * l * h))
    return base + (4 * B * s ** 2 * h * l if recompute == "selective" else 0)


# ----------------------------------------------------------------------------- memory
def model_state_bytes(params: float, dp: int = 1, zero_stage: int = 0,
                      optimizer_bytes_per_param: float = 12, param_bytes: float = 2,
                      grad_bytes: float = 2) -> dict:
    """Bytes per GPU of parameters, gradients and optimizer state (Rajbhandari et al. 2020).

    Mixed-precision Adam keeps 2-byte parameters and gradients and K = 12 bytes of optimizer
    state (fp32 master weights, momentum, variance).  ZeRO stage 1 shards the optimizer state
    over the ``dp`` data-parallel ranks, stage 2 also the gradients, stage 3 also the parameters.
    The formulas live in one place, ``playground.zero_memory.predicted`` (the ZeRO chapter's);
    this wrapper gives them the planner's argument names and errors.
    """
    recipe = zero_memory.Recipe("planner", param_bytes, grad_bytes, optimizer_bytes_per_param)
    if isinstance(dp, float) and dp == int(dp):
        dp = int(dp)
    try:
        return zero_memory.predicted(params, dp, zero_stage, recipe)
    except ValueError as e:
        raise PlanError(f"zero_stage/dp: {e}") from None


def activation_bytes_per_layer(seq_len: int, micro_batch: int, hidden: int, heads: int,
                               recompute: str = "none", tp: int = 1, dropout: bool = True,
                               flash_attention: bool = False, sequence_parallel: bool = True) -> float:
    """Activation bytes one transformer layer keeps for backward (Korthikanti et al. 2022).

    16-bit activations, 1-byte dropout masks, tensor parallelism of degree ``tp``.  With sequence
    parallelism every saved tensor is split over the t ranks: s b h (34 + 5 a s / h) / t with no
    recomputation, 34 s b h / t with selective recomputation (the a s^2 b attention scores are
    recomputed), 2 s b h / t with full recomputation (only the layer's input is kept).  Without
    sequence parallelism the LayerNorm and dropout regions stay replicated on every TP rank:
    s b h (10 + 24 / t + 5 a s / (h t)), s b h (10 + 24 / t) selective, and the full layer input
    2 s b h with full recomputation.  Without dropout the two s b h masks (replicated without SP)
    go (34 -> 32, 10 -> 8) and the scores cost 2 a s^2 b instead of 5; a fused (flash) attention
    kernel keeps no scores at all, only a 4-byte log-sum-exp per row (4 a s b).
    """
    s, b, h, a, t = seq_len, micro_batch, hidden, heads, tp
    if recompute == "full":
        return 2 * s * b * h / (t if sequence_parallel else 1)
    if sequence_parallel:
        per_token = (34 if dropout else 32) * s * b * h / t
    else:  # Korthikanti et al. Eq. 2: 10 s b h replicated (LayerNorms, their outputs, dropout masks)
        per_token = (10 if dropout else 8) * s * b * h + 24 * s * b * h / t
    if recompute == "selective":
        return per_token
    scores = 4 * a * s * b if flash_attention else (5 if dropout else 2) * a * s * s * b
    return per_token + scores / t


def usable_memory_bytes(gpu) -> float:
    """The bytes of HBM a plan may fill: the capacity less ``MEMORY_RESERVE`` of it."""
    return gpu.hbm_bytes * (1 - MEMORY_RESERVE)


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


def per_gpu_memory(params, arch, tp, pp, dp, zero_stage, recompute, micro_batch, opt_bytes) -> dict:
    stage_layers = math.ceil(arch["layers"] / pp)  # the first (fullest) pipeline stage
    states = model_state_bytes(params * stage_layers / arch["layers"] / tp, dp, zero_stage, opt_bytes)
    # 1F1B: the first stage holds pp micro-batches in flight for each of its layers
    acts = stage_layers * pp * activation_bytes_per_layer(arch["seq_len"], micro_batch, arch["hidden"],
                                                          arch["heads"], recompute, tp)
    return {"model_states": states["total"], "model_state_parts": states, "activations": acts,
            "total": states["total"] + acts}


def forced_parallelism(params: float, arch: dict, gpu, gpus: int | None = None,
                       zero_stage: int = 0, recompute: str = "none", micro_batch: int = 1,
                       optimizer_bytes_per_param: float = 12) -> dict:
    """The smallest TP x PP whose per-GPU memory fits, TP within a node; ties go to less PP.

    TP must divide the heads and stay within ``gpu.gpus_per_node``; PP is at most the layers
    (the first stage takes ceil(l / PP) of them); with ``gpus`` given, TP x PP must divide it and
    DP = gpus / (TP x PP).  "Fits" means model states plus activations within the usable memory,
    ``usable_memory_bytes`` (HBM less ``MEMORY_RESERVE``).
    ``fits`` is False (and the most sharded layout tried is reported) when nothing fits.
    """
    spec = hardware.gpu(gpu)
    tps = [t for t in (2 ** k for k in range(8)) if t <= spec.gpus_per_node and arch["heads"] % t == 0]
    pps = range(1, arch["layers"] + 1)
    layouts = sorted(((t, p) for t in tps for p in pps if not gpus or gpus % (t * p) == 0),
                     key=lambda tp_pp: (tp_pp[0] * tp_pp[1], tp_pp[1]))
    last = None
    for t, p in layouts:
        dp = gpus // (t * p) if gpus else 1
        mem = per_gpu_memory(params, arch, t, p, dp, zero_stage, recompute, micro_batch,
                              optimizer_bytes_per_param)
        last = {"dp": dp, "tp": t, "pp": p, "zero_stage": zero_stage, "fits": False, "memory": mem}
        if mem["total"] <= usable_memory_bytes(spec):
            last["fits"] = True
            return last
    if last is None:  # no layout divides the GPU count
        mem = per_gpu_memory(params, arch, 1, 1, gpus or 1, zero_stage, recompute, micro_batch,
                              optimizer_bytes_per_param)
        last = {"dp": gpus or 1, "tp": 1, "pp": 1, "zero_stage": zero_stage, "fits": False, "memory": mem}
    return last


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


# ----------------------------------------------------------------------------- the CLI
def main(argv=None) -> int:
    """``python -m playground.capacity_plan``: see ``playground.capacity_plan_cli``."""
    from playground.capacity_plan_cli import main as cli_main
    return cli_main(argv)


def report(p: dict) -> str:
    """The readable report of a plan (what the CLI prints without ``--json``)."""
    from playground.capacity_plan_cli import report as cli_report
    return cli_report(p)


if __name__ == "__main__":
    # run main() of the imported module, so that its PlanError is the one step_time raises
    from playground.capacity_plan import main as _main
    raise SystemExit(_main())
