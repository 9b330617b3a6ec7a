"""GEMM: achieved matmul TFLOP/s by shape (squares and a transformer layer's), against the peak.

On a CUDA GPU the inputs are bf16 (what training runs); on a CPU they are fp32 (what CPU BLAS
libraries are tuned for; bf16 is fast only on CPUs with AMX or AVX-512 BF16 units).  The shapes are a few
squares and the forward GEMMs of one layer of a preset model on one GPU at a TP degree
(``planner.costs.layer_gemms``: the planner's own shapes, so a measured fraction plugs straight
into its ``Efficiency.gemm``).  Each shape: warm-up calls, then ``--repeats`` timed repetitions,
each of enough back-to-back calls to last a few milliseconds; the median repetition gives the
TFLOP/s (2 M N K per product).  On a GPU the hardware table knows, or with ``--peak-tflops``, each
shape's fraction of the dense peak is reported and the best shape's fraction is the measured
``gemm`` efficiency (the Maximum Achievable Matmul FLOPS idea); on a CPU there is no datasheet
peak, so fractions are of the best shape measured here and no efficiency is claimed.

``--hold SECONDS`` then runs the best shape back to back for that long, as a training run holds its
GPU (gpu-fryer's test), and reports the rate of its last quarter against the short measurement: on a
Hopper that ratio is the measured ``hopper_sustained``, on a Blackwell ``blackwell_sustained`` (a GPU at
its power limit slows its tensor cores), elsewhere it is reported and not claimed.

``--fp8`` also times FP8 products (``torch._scaled_mm``: E4M3 inputs, one scale per tensor, bf16 out) of each
square whose side is a multiple of 16, twice: with fast accumulation, as
Transformer Engine runs the forward, and with split accumulation (partial sums promoted to fp32 as they go), as it
runs the backward.  Against a known FP8 peak (the hardware table's, or ``--peak-fp8-tflops``) the best fast
square's fraction is the measured ``fp8_gemm``; on a Hopper, split over fast at that shape is the measured
``fp8_split_accumulation`` (a Blackwell has no fast mode: its ratio is reported, not claimed).
"""

from __future__ import annotations

import math
import shlex
import statistics
import sys
import time
from dataclasses import replace

import torch

from playground.bench import check_fits
from playground.bench.mfu import _device, _peak, _sync
from playground.planner.costs import layer_gemms
from playground.planner.errors import PlanError
from playground.planner.presets import preset, preset_names

# sizes that keep one H200 busy for a few seconds in all, and a 2-core laptop CPU under 30 s
GPU_DEFAULTS = dict(sizes=[1024, 2048, 4096, 8192], tp=1, tokens=None)
CPU_DEFAULTS = dict(sizes=[256, 512, 1024], tp=8, tokens=256)
MIN_REPEAT_S = 0.005  # a repetition lasts at least this long (several calls when one is shorter)


def add_arguments(parser) -> None:
    parser.add_argument("--model", default="llama3-8b", metavar="NAME",
                        help="preset whose layer GEMMs are timed (default llama3-8b): "
                             + ", ".join(preset_names()))
    parser.add_argument("--tp", type=int, default=None,
                        help="tensor-parallel degree splitting those GEMMs (GPU default 1, CPU default 8)")
    parser.add_argument("--micro-batch", type=int, default=1, help="sequences per micro-batch (default 1)")
    parser.add_argument("--tokens", type=int, default=None,
                        help="sequence length s of the layer GEMMs, in tokens (GPU default: the preset's; "
                             "CPU default 256)")
    parser.add_argument("--sizes", type=int, nargs="*", default=None,
                        help="square GEMMs n x n x n to time too (GPU default 1024 2048 4096 8192, "
                             "CPU default 256 512 1024; none: only the layer)")
    parser.add_argument("--repeats", type=int, default=5, help="timed repetitions per shape (default 5)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed calls per shape first (default 2)")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                        help="where to run (default auto: CUDA when present)")
    parser.add_argument("--hold", type=float, default=0.0, metavar="SECONDS",
                        help="afterwards, run the best shape back to back for this long and report the rate of "
                             "its last quarter over the short measurement (default 0: off; gpu-fryer holds 60 s); "
                             "on a Hopper GPU that ratio is the measured hopper_sustained, on a Blackwell "
                             "blackwell_sustained")
    parser.add_argument("--fp8", action="store_true",
                        help="also time FP8 products (torch._scaled_mm, one scale per tensor, bf16 out) of each "
                             "square whose side is a multiple of 16, with fast and with split "
                             "accumulation: the best fast square's fraction of the FP8 peak is the measured "
                             "fp8_gemm, and on a Hopper split over fast there the measured fp8_split_accumulation")
    parser.add_argument("--peak-fp8-tflops", type=float, default=None,
                        help="dense FP8 peak of this device in TFLOP/s, when the hardware table does not know it "
                             "(with --fp8; default: the table's FP8 peak on a known GPU; none on a CPU)")
    parser.add_argument("--peak-tflops", type=float, default=None,
                        help="dense peak of this device in TFLOP/s, when the hardware table does not "
                             "know it (default: the table's bf16 peak on a known GPU; none on a CPU)")


def _shapes(args, device) -> tuple[list[tuple[str, int, int, int, int]], int, int]:
    """(name, batch count, M, N, K) of every GEMM to time (squares first, then the layer's), the TP
    degree and the sequence length used."""
    defaults = GPU_DEFAULTS if device.type == "cuda" else CPU_DEFAULTS
    sizes = defaults["sizes"] if args.sizes is None else args.sizes
    tp = defaults["tp"] if args.tp is None else args.tp
    for name, value in (("--tp", tp), ("--micro-batch", args.micro_batch), ("--repeats", args.repeats)):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    if args.warmup < 0:
        raise ValueError(f"--warmup must be >= 0, got {args.warmup}")
    if not math.isfinite(args.hold) or not 0 <= args.hold <= 3600:
        raise ValueError(f"--hold must be seconds from 0 (off) to 3600, got {args.hold:g}")
    if any(n < 1 for n in sizes):
        raise ValueError(f"--sizes must each be >= 1, got {sizes}")
    for name, peak in (("--peak-tflops", args.peak_tflops), ("--peak-fp8-tflops", args.peak_fp8_tflops)):
        if peak is not None and not (0 < peak < math.inf):
            raise ValueError(f"{name} must be a positive number, got {peak}")
    try:
        model = preset(args.model)
    except PlanError as exc:
        raise ValueError(str(exc)) from None
    tokens = args.tokens if args.tokens is not None else (defaults["tokens"] or model.seq_len)
    if tokens < 1:
        raise ValueError(f"--tokens must be >= 1, got {tokens}")
    model = replace(model, seq_len=tokens)
    width = model.expert_width if model.is_moe else model.ffn_width
    if model.heads % tp or width % tp:
        raise ValueError(f"TP={tp} does not divide the {model.heads} heads and the MLP width {width} "
                         f"of {args.model}")
    layer = layer_gemms(model, args.micro_batch, tp, moe=model.is_moe)
    squares = [(f"square {n}", 1, n, n, n) for n in sizes]
    shapes = squares + [(name, int(c), max(1, round(M)), int(N), int(K)) for name, c, M, N, K in layer]
    return shapes, tp, tokens


def _operands(count, M, N, K, dtype, device):
    """The two inputs, the output and the product (batched when ``count`` > 1) of one shape."""
    gen = torch.Generator(device=device).manual_seed(0)  # drawn where they are used: no host copy
    shape_a, shape_b = ((count, M, K), (count, K, N)) if count > 1 else ((M, K), (K, N))
    a = torch.randn(shape_a, generator=gen, device=device, dtype=dtype)
    b = torch.randn(shape_b, generator=gen, device=device, dtype=dtype)
    out = torch.empty(shape_a[:-1] + (N,), device=device, dtype=dtype)
    return a, b, out, (torch.bmm if count > 1 else torch.mm)


def _time_calls(call, device, repeats, warmup) -> list[float]:
    """Seconds per ``call()``, one value per timed repetition."""
    for _ in range(max(warmup, 1)):  # one call at least: it sizes the repetitions
        _sync(device)
        start = time.perf_counter()
        call()
        _sync(device)
        once = time.perf_counter() - start
    calls = max(1, math.ceil(MIN_REPEAT_S / max(once, 1e-9)))
    times = []
    for _ in range(repeats):
        _sync(device)
        start = time.perf_counter()
        for _ in range(calls):
            call()
        _sync(device)
        times.append((time.perf_counter() - start) / calls)
    return times


def _time_shape(count, M, N, K, dtype, device, repeats, warmup) -> list[float]:
    """Seconds per product, one value per timed repetition."""
    a, b, out, mm = _operands(count, M, N, K, dtype, device)
    return _time_calls(lambda: mm(a, b, out=out), device, repeats, warmup)


def _time_fp8(M, N, K, device, fast: bool, repeats, warmup) -> list[float]:
    """Seconds per FP8 product of (M x K) by (K x N), E4M3 with one scale per tensor and bf16 out, with fast or
    split accumulation; the second operand column-major, as FP8 tensor cores take it."""
    gen = torch.Generator(device=device).manual_seed(0)
    a = torch.randn((M, K), generator=gen, device=device).to(torch.float8_e4m3fn)
    b = torch.randn((N, K), generator=gen, device=device).to(torch.float8_e4m3fn).t()
    one = torch.ones((), device=device)
    return _time_calls(lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16,
                                                use_fast_accum=fast), device, repeats, warmup)


def _fp8(args, shapes, device, row) -> dict:
    """Fast and split accumulation timed on every square of ``shapes`` whose side is a multiple of 16 (a
    CPU's FP8 products run a reference kernel, too slow for a layer's shapes), and what they measure:
    ``fp8_gemm`` against a known FP8 peak, ``fp8_split_accumulation`` on a Hopper."""
    fit = [(name, M, N, K) for name, c, M, N, K in shapes if name.startswith("square") and not M % 16]
    if not fit:
        raise ValueError("--fp8 needs a square (--sizes) whose side is a multiple of 16")
    rows = []
    for name, M, N, K in fit:
        fast, split = (_time_fp8(M, N, K, device, f, args.repeats, args.warmup) for f in (True, False))
        flops = 2 * M * N * K
        rows.append({"shape": name, "m": M, "n": N, "k": K,
                     "fast_tflops": float(f"{flops / statistics.median(fast) / 1e12:.4g}"),
                     "fast_tflops_range": [float(f"{flops / max(fast) / 1e12:.4g}"),
                                           float(f"{flops / min(fast) / 1e12:.4g}")],
                     "split_tflops": float(f"{flops / statistics.median(split) / 1e12:.4g}"),
                     "split_over_fast": float(f"{statistics.median(split) / statistics.median(fast):.4g}")})
    best = max(rows, key=lambda r: r["fast_tflops"])
    peak = args.peak_fp8_tflops * 1e12 if args.peak_fp8_tflops is not None else getattr(row, "peak_fp8_flops", None)
    efficiency, spread = {}, {}
    if peak:
        efficiency["fp8_gemm"] = float(f"{best['fast_tflops'] * 1e12 / peak:.4g}")
        spread["fp8_gemm"] = [float(f"{x * 1e12 / peak:.4g}") for x in best["fast_tflops_range"]]
    if getattr(row, "architecture", "") == "hopper":   # the GPUs whose FP8 backward the planner charges for it
        efficiency["fp8_split_accumulation"] = best["split_over_fast"]
        spread["fp8_split_accumulation"] = [min(r["split_over_fast"] for r in rows),
                                            max(r["split_over_fast"] for r in rows)]
    return {"rows": rows, "best": best["shape"],
            "peak_tflops": float(f"{peak / 1e12:.4g}") if peak else None,
            "peak_source": None if not peak else ("--peak-fp8-tflops" if args.peak_fp8_tflops is not None
                                                  else f"hardware table: {row.name} dense FP8"),
            "note": ("fast accumulation as Transformer Engine's forward, split (promoted to fp32) as its backward; "
                     + ("the best fast square's fraction of the FP8 peak is the measured fp8_gemm" if peak else
                        "no FP8 peak: no fp8_gemm claimed (give --peak-fp8-tflops to claim one)")
                     + ("; split over fast there is the measured fp8_split_accumulation"
                        if "fp8_split_accumulation" in efficiency else
                        "; split over fast is reported, not claimed: only a Hopper's backward pays it")),
            "efficiency": efficiency, "efficiency_spread": spread}


def _hold(count, M, N, K, dtype, device, seconds) -> float:
    """Seconds per product over the last quarter of ``seconds`` of back-to-back products."""
    a, b, out, mm = _operands(count, M, N, K, dtype, device)
    start = time.perf_counter()
    tail_start, tail_calls = None, 0
    while True:
        mm(a, b, out=out)
        _sync(device)       # per call: the clock must see the device's time, not the launch queue's
        now = time.perf_counter() - start
        if tail_start is None and now >= 0.75 * seconds:
            tail_start, tail_calls = time.perf_counter(), 0
        elif tail_start is not None:
            tail_calls += 1
        if now >= seconds and tail_calls:
            return (time.perf_counter() - tail_start) / tail_calls


def run(args) -> dict:
    device = _device(args.device)
    shapes, tp, tokens = _shapes(args, device)
    dtype, dtype_name = (torch.bfloat16, "bf16") if device.type == "cuda" else (torch.float32, "fp32")
    size = dtype.itemsize
    check_fits(max(size * c * (M * K + K * N + M * N) for _, c, M, N, K in shapes) * 2,
               "the largest GEMM", per_gpu=device.type == "cuda")
    row = _peak(device)
    if args.peak_tflops is not None:
        peak, peak_source = args.peak_tflops * 1e12, "--peak-tflops"
    elif row is not None:
        peak, peak_source = row.peak_bf16_flops, f"hardware table: {row.name} dense bf16"
    else:
        peak, peak_source = None, None
    rows = []
    for name, count, M, N, K in shapes:
        times = _time_shape(count, M, N, K, dtype, device, args.repeats, args.warmup)
        flops = 2 * count * M * N * K
        median = statistics.median(times)
        rows.append({"shape": name, "count": count, "m": M, "n": N, "k": K,
                     "median_ms": round(median * 1e3, 4),
                     "tflops": float(f"{flops / median / 1e12:.4g}"),
                     "tflops_range": [float(f"{flops / max(times) / 1e12:.4g}"),
                                      float(f"{flops / min(times) / 1e12:.4g}")]})
    best = max(rows, key=lambda r: r["tflops"])
    for r in rows:
        r["fraction_of_best"] = round(r["tflops"] / best["tflops"], 4)
        r["fraction_of_peak"] = None if peak is None else round(r["tflops"] * 1e12 / peak, 4)
    held = None
    if args.hold > 0:   # the best shape held as a run holds it: its last quarter against the short runs
        per = _hold(best["count"], best["m"], best["n"], best["k"], dtype, device, args.hold)
        tflops = 2 * best["count"] * best["m"] * best["n"] * best["k"] / per / 1e12
        held = {"shape": best["shape"], "seconds": args.hold, "tflops": float(f"{tflops:.4g}"),
                "over_short": float(f"{tflops / best['tflops']:.4g}")}   # 4 significant digits, as the rates
    fp8 = _fp8(args, shapes, device, row) if args.fp8 else None
    arch = getattr(row, "architecture", "") if row is not None else ""
    hopper = arch in ("hopper", "blackwell")   # the GPUs whose held rate the planner charges
    layer = [r for r in rows if not r["shape"].startswith("square")]
    layer_flops = sum(2 * r["count"] * r["m"] * r["n"] * r["k"] for r in layer)
    layer_s = sum(r["median_ms"] for r in layer) / 1e3
    return {
        "backend": None, "device_type": device.type,
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU",
        "dtype": dtype_name,
        "dtype_note": ("bf16 inputs and outputs, fp32 accumulation (cuBLAS)" if device.type == "cuda" else
                       "fp32 (CPU BLAS's tuned precision; bf16 is fast only with AMX / AVX-512 BF16)"),
        "model": args.model, "tp": tp, "micro_batch": args.micro_batch, "tokens": tokens,
        "repeats": args.repeats, "warmup": args.warmup,
        "method": ("per shape: warm-up calls, then repetitions of back-to-back calls lasting >= "
                   f"{MIN_REPEAT_S * 1e3:g} ms, synchronized; median "
                   "repetition; TFLOP/s = 2 count M N K / time"),
        "peak_tflops": None if peak is None else round(peak / 1e12, 1), "peak_source": peak_source,
        "rows": rows,
        "best": {"shape": best["shape"], "tflops": best["tflops"], "fraction_of_peak": best["fraction_of_peak"]},
        "layer_tflops": float(f"{layer_flops / layer_s / 1e12:.4g}") if layer_s else None,
        "held": held,
        "fp8": fp8,
        "efficiency": {**({} if peak is None else {"gemm": best["fraction_of_peak"]}),
                       **({f"{arch}_sustained": held["over_short"]} if held and hopper else {}),
                       **(fp8["efficiency"] if fp8 else {})},
        "efficiency_spread": {**({} if peak is None else {
            "gemm": [round(best["tflops_range"][0] * 1e12 / peak, 4), round(best["tflops_range"][1] * 1e12 / peak, 4)]}),
            **(fp8["efficiency_spread"] if fp8 else {})},
        "note": (f"fractions of the dense peak ({peak_source}); the best shape's is the measured gemm efficiency"
                 if peak is not None else "no datasheet peak for a CPU: fractions are of the best shape measured "
                 "here, and no gemm efficiency is claimed (give --peak-tflops to claim one)"),
        "command": getattr(args, "command", None) or shlex.join(["python", "-m", "playground.bench", "gemm",
                                                                 *sys.argv[1:]]),
    }
