"""Ring all-reduce (point-to-point, playground.data_parallel.ring) against the built-in dist.all_reduce: time and busbw."""

from __future__ import annotations

from playground.data_parallel.allreduce_lab import MB, time_all_reduces
from playground import launch
from playground.bench import check_fits

TARGET_RATIO_64MB = 0.9  # ring busbw / built-in busbw at 64 MB (the target)


def add_arguments(parser) -> None:
    parser.add_argument("--sizes-mb", type=float, nargs="+", default=[1, 16, 64],
                        help="message sizes in MiB (default 1 16 64)")
    under_torchrun = launch.torchrun_world_size()
    parser.add_argument("--world-sizes", type=int, nargs="+",
                        default=[under_torchrun] if under_torchrun else [2, 4],
                        help="numbers of ranks (default 2 4; under torchrun, its world size)")
    parser.add_argument("--repeats", type=int, default=9, help="timed rounds per size (default 9)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed rounds first (default 2)")


def run(args) -> dict:
    if not all(4 / MB <= mb < float("inf") for mb in args.sizes_mb):
        raise ValueError(f"--sizes-mb must each be finite and at least 4 bytes, got {args.sizes_mb}")
    sizes = [4 * round(mb * MB / 4) for mb in args.sizes_mb]  # float32 tensors: multiples of 4 B
    if any(n < 2 for n in args.world_sizes):
        raise ValueError(f"--world-sizes must each be >= 2, got {args.world_sizes}")
    if args.repeats < 1 or args.warmup < 0:
        raise ValueError("--repeats must be >= 1 and --warmup >= 0")
    for n in args.world_sizes:  # each rank holds the message, a working copy and ring buffers
        nccl = launch.pick_backend(n) == "nccl"
        check_fits(3 * max(sizes) * (1 if nccl else n),
                   f"--sizes-mb {max(args.sizes_mb):g} on {n} ranks", per_gpu=nccl)
    rows, backend = [], None
    for n in args.world_sizes:
        result = _launch(n, sizes, args.repeats, args.warmup)
        backend = result["backend"]
        for size, algs in result["times"].items():
            ring, builtin = algs["ring"], algs["builtin"]
            rows.append({
                "world_size": n, "size_mb": round(size / MB, 3),
                "ring_median_ms": round(ring["median_s"] * 1e3, 3),
                "ring_spread": round(ring["spread"], 3),
                "ring_busbw_gb_s": round(ring["busbw_gb_s"], 3),
                "builtin_median_ms": round(builtin["median_s"] * 1e3, 3),
                "builtin_spread": round(builtin["spread"], 3),
                "builtin_busbw_gb_s": round(builtin["busbw_gb_s"], 3),
                "ring_over_builtin_busbw": round(ring["busbw_gb_s"] / builtin["busbw_gb_s"], 3),
            })
    at_64 = [r["ring_over_builtin_busbw"] for r in rows if r["size_mb"] == 64]
    return {
        "backend": backend,
        "method": ("float32 tensors; per size: warm-up rounds, then interleaved rounds with the "
                   "order of ring and built-in rotated each round; a sample is the slowest rank's "
                   "time from a barrier to the end of the call; median and spread=(p75-p25)/median "
                   "over rounds; busbw = size/time * 2(n-1)/n (nccl-tests)"),
        "repeats": args.repeats, "warmup": args.warmup,
        "rows": rows,
        "target": f"ring busbw >= {TARGET_RATIO_64MB}x built-in at 64 MB",
        "target_met": (all(r >= TARGET_RATIO_64MB for r in at_64) if at_64 else None),
    }


def _launch(n, sizes, repeats, warmup):
    timeout = 120 + 2 * repeats * len(sizes) * n
    return launch.run(time_all_reduces, n, sizes, ("ring", "builtin"), repeats, warmup,
               timeout_s=timeout, quiet=True)[0]
