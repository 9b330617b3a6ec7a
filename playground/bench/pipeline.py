"""Pipeline bubble: measured idle fraction of GPipe/1F1B/interleaved/zero-bubble (ZB-H1, beside 1F1B) steps vs their formulas, for K in {2,4}."""

from __future__ import annotations

import statistics

from playground.launch import pick_backend, torchrun_world_size

TARGET = 0.10  # measured bubble within 10 % of the formula
RUN_TIMEOUT_S = 600


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in text.split(","))


def add_arguments(parser) -> None:
    under_torchrun = torchrun_world_size()
    parser.add_argument("--stages", type=_ints, default=(under_torchrun,) if under_torchrun else (2, 4),
                        help="K values, comma-separated (default 2,4; under torchrun, its world size)")
    parser.add_argument("--micro-batches", type=_ints, default=None,
                        help="M values, comma-separated (default 1,2,4,8; interleaved: 4,8; zb: M = K, "
                             "where its bubble is largest beside the fixed cost of its 3M+K-1 actions)")
    parser.add_argument("--schedule", choices=("gpipe", "1f1b", "interleaved", "zb"), default="gpipe",
                        help="zb: ZB-H1 and 1F1B side by side, the same emulated device time")
    parser.add_argument("--chunks", type=int, default=2,
                        help="V, model chunks per rank for the interleaved schedule (default 2)")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repetitions (median)")
    parser.add_argument("--forward-ms", type=float, default=None,
                        help="emulated forward time of one stage on the whole batch, ms "
                             "(default: 400 on CPU, zb 800; none on GPUs)")
    parser.add_argument("--backward-ms", type=float, default=None,
                        help="emulated backward time (default: 2 x forward)")


def run(args) -> dict:
    from playground.model import ModelConfig
    from playground.pipeline_parallel.engine import DEFAULT_DEVICE_TIME_S, PipeSpec, run_pipeline
    from playground.pipeline_parallel.report import bubble_rows, timing_specs

    world = max(args.stages)
    backend = pick_backend(world)
    if args.backward_ms is not None and args.forward_ms is None:
        raise ValueError("--backward-ms needs --forward-ms")
    for name in ("forward_ms", "backward_ms"):
        value = getattr(args, name)
        if value is not None and not 0 <= value < float("inf"):
            raise ValueError(f"--{name.replace('_', '-')} must be a finite number of ms >= 0, got {value:g}")
    if args.chunks < 1:
        raise ValueError(f"--chunks must be >= 1, got {args.chunks}")
    if args.forward_ms is None and backend == "gloo":
        # 4x the chapter's default: each hand-off costs a fixed 0.3-3 ms here (send, a woken
        # receiver), which must stay small beside a micro-batch's compute even at M = 8; ZB-H1's
        # bubble is 3x smaller and its critical path holds 3M+K-1 actions: 8x
        args.forward_ms = (8e3 if args.schedule == "zb" else 4e3) * DEFAULT_DEVICE_TIME_S[0]
    device_time = None if args.forward_ms is None else (
        args.forward_ms / 1e3, (args.backward_ms or 2 * args.forward_ms) / 1e3)
    pairs = None  # (K, M) pairs when not every K meets every M
    if args.micro_batches is None and args.schedule == "zb":
        pairs = [(K, K) for K in args.stages]
        args.micro_batches = tuple(sorted(set(args.stages)))
    elif args.micro_batches is None:
        args.micro_batches = (4, 8) if args.schedule == "interleaved" else (1, 2, 4, 8)
    pairs = pairs or [(K, M) for K in args.stages for M in args.micro_batches]
    chunks = args.chunks if args.schedule == "interleaved" else 1
    schedules = ("1f1b", "zb") if args.schedule == "zb" else (args.schedule,)
    if args.schedule == "zb":  # one clear error before any rank starts
        for K, M in pairs:
            PipeSpec("zb", stages=K, micro_batches=M, batch_size=max(8, M), cfg=ModelConfig(n_layers=max(4, K)))
        if device_time is not None and device_time[1] > 2 * device_time[0]:
            raise ValueError("ZB-H1's formula needs t_w <= t_f, i.e. --backward-ms <= 2 x --forward-ms "
                             f"(W takes half the backward), got {args.backward_ms:g} > 2 x {args.forward_ms:g}")
    if device_time is not None:  # each step lasts at least one whole forward + backward
        least_s = sum(device_time) * args.repeats * len(pairs) * len(schedules)
        if least_s > RUN_TIMEOUT_S:
            raise ValueError(f"--forward-ms {args.forward_ms:g} makes the runs last at least "
                             f"{least_s:,.0f} s, beyond the benchmark's {RUN_TIMEOUT_S} s limit")
    if args.schedule == "zb":  # each K with its own M, repetitions interleaved across them
        cfg = ModelConfig(n_layers=max([4, *args.stages]))
        per_pair = [timing_specs((K,), (M,), schedules, args.repeats, device_time, cfg=cfg) for K, M in pairs]
        specs = [s for r in range(args.repeats) for group in per_pair
                 for s in group[r * len(schedules):(r + 1) * len(schedules)]]
    else:
        specs = timing_specs(args.stages, args.micro_batches, schedules, args.repeats, device_time,
                             chunks=chunks)
    rows = bubble_rows(run_pipeline(specs, world_size=world, timeout_s=RUN_TIMEOUT_S))
    for row in rows:
        row["within_target"] = abs(row["ratio"] - 1) <= TARGET
    return {
        "backend": backend,
        "schedule": args.schedule,
        "variant": None if args.schedule == "gpipe" else args.schedule,
        "chunks": chunks,
        "what": "bubble = 1 - sum of stage busy time / (K x step time), median of interleaved "
                "repetitions; formula (K-1)/(V·M+K-1), V = 1 but for the interleaved schedule; zb "
                "(ZB-H1, run beside 1F1B): (K-1)(t_f+t_b-t_w)/(M(t_f+t_b+t_w)+(K-1)(t_f+t_b-t_w)), "
                "B and W each half of the emulated backward",
        "emulated_device_time_s": device_time,
        "target": f"|measured/formula - 1| <= {TARGET:.0%}",
        "rows": rows,
        "worst_ratio": max(rows, key=lambda r: abs(r["ratio"] - 1))["ratio"],
        "median_ratio": statistics.median(r["ratio"] for r in rows),
        "all_within_target": all(r["within_target"] for r in rows),
    }
