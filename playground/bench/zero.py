"""ZeRO stages 0-3: measured vs predicted model-state bytes per rank, bytes moved per step, time per step vs DDP."""

from __future__ import annotations

import statistics

from playground.launch import pick_backend, torchrun_world_size

MEMORY_TARGET = 0.01  # measured model-state bytes within 1 % of the formula


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in text.split(","))


def add_arguments(parser) -> None:
    parser.add_argument("--nproc", type=_ints, default=(torchrun_world_size(),) if torchrun_world_size() else (2, 4),
                        help="N_d values, comma-separated (default 2,4; under torchrun, its world size)")
    parser.add_argument("--precision", choices=("mixed", "fp32"), default="mixed")
    parser.add_argument("--steps", type=int, default=6, help="Adam steps per run")
    parser.add_argument("--repeats", type=int, default=3,
                        help="interleaved repetitions of every variant (median time)")
    parser.add_argument("--d-model", type=int, default=64, help="hidden size h of the model")
    parser.add_argument("--layers", type=int, default=4, help="transformer blocks L")


def run(args) -> dict:
    from playground.model import ModelConfig
    from playground.zero.accounting import exact_bytes, predicted
    from playground.zero.runs import launch, predicted_sent_bytes, unit_numels

    cfg = ModelConfig(d_model=args.d_model, n_layers=args.layers)
    psi = cfg.param_count()
    from playground.bench import check_fits
    for n in args.nproc:  # every rank keeps a whole fp32 model, its Adam state and a reference
        nccl = pick_backend(n) == "nccl"
        check_fits(48 * psi * (1 if nccl else n),
                   f"a {psi:,}-parameter model (--d-model {args.d_model}, --layers {args.layers}) "
                   f"on {n} ranks", per_gpu=nccl)
    numels = unit_numels(cfg)
    variants = [("ddp",)] + [("zero", s, args.precision) for s in range(4)]
    rows = []
    for n in args.nproc:
        results = launch(n, variants, cfg, steps=args.steps, batch_size=4 * n,
                         repeats=args.repeats, timeout_s=600)
        # a step lasts as long as its slowest rank: per step, the max over ranks; then the median
        def step_time(variant):
            per_step = zip(*(r[variant]["times"] for r in results))
            return statistics.median(max(ts) for ts in per_step)
        ddp_time = step_time(("ddp",))
        for stage in range(4):
            mine = results[0][("zero", stage, args.precision)]
            held = mine["state_bytes"]["total"]
            formula = predicted(psi, n, stage, args.precision)["total"]
            sent = mine["sent_bytes"][0]
            es = 2 if args.precision == "mixed" else 4
            rows.append({
                "n_d": n, "stage": stage,
                "measured_bytes": held,
                "predicted_bytes": round(formula),
                "exact_bytes": exact_bytes(numels, n, stage, 0, args.precision)["total"],
                "measured_over_predicted": round(held / formula, 4),
                "sent_bytes_per_step": sent,
                "predicted_sent_bytes": predicted_sent_bytes(numels, n, stage, args.precision),
                # the paper's volume: elements per rank, with the ring's (N-1)/N taken out
                "elements_moved_over_psi": round(sent / es / psi * n / (n - 1), 4) if n > 1
                else 0.0,
                "time_per_step_ms": round(step_time(("zero", stage, args.precision)) * 1e3, 3),
                "time_vs_ddp": round(step_time(("zero", stage, args.precision)) / ddp_time, 3),
            })
        rows.append({"n_d": n, "stage": "torch DDP (fp32)", "time_per_step_ms":
                     round(ddp_time * 1e3, 3), "time_vs_ddp": 1.0})
    zero_rows = [r for r in rows if isinstance(r["stage"], int)]
    return {
        "backend": pick_backend(max(args.nproc)),
        "what": "per-rank model-state bytes (parameters + gradients + optimizer state, storages "
                "counted once) vs the ZeRO formula; bytes this rank sent per step; median step "
                "time (slowest rank) of interleaved repetitions relative to torch DDP",
        "precision": args.precision,
        "psi": psi,
        "target": f"|measured/predicted - 1| <= {MEMORY_TARGET:.0%}",
        "rows": rows,
        "all_within_target": all(abs(r["measured_over_predicted"] - 1) <= MEMORY_TARGET
                                 for r in zero_rows),
        "sent_as_predicted": all(r["sent_bytes_per_step"] == r["predicted_sent_bytes"]
                                 for r in zero_rows),
    }
