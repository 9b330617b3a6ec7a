"""Cost of a launch: wall time to run a trivial function on N ranks (target: 4 ranks in <= 5 s).

The first launch of a process also starts the fork server that imports torch once; later
launches fork from it.  Both are reported: ``first_s`` (cold) and ``warm_median_s``.
"""

from __future__ import annotations

import statistics
import time

from playground import launch
from playground.ring_pass import trivial

TARGET_S = 5.0


def add_arguments(parser) -> None:
    parser.add_argument("--nproc", type=int, default=launch.torchrun_world_size() or 4,
                        help="ranks per launch (default 4; under torchrun, its world size)")
    parser.add_argument("--repeats", type=int, default=3, help="launches to time (default 3)")


def run_bench(nproc: int, repeats: int) -> dict:
    if repeats < 1:
        raise ValueError(f"--repeats must be >= 1, got {repeats}")
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        launch.run(trivial, nproc, quiet=True)
        times.append(time.perf_counter() - start)
    warm = statistics.median(times[1:]) if len(times) > 1 else None
    return {"backend": "gloo", "nproc": nproc, "times_s": [round(t, 2) for t in times],
            "first_s": round(times[0], 2),
            "warm_median_s": None if warm is None else round(warm, 2), "target_s": TARGET_S,
            "meets_target": times[0] <= TARGET_S}


def run(args) -> dict:
    return run_bench(args.nproc, args.repeats)
