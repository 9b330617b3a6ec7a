"""Goodput: the share of a job's time that trains, when the job fails and checkpoints.

A synchronous job of n GPUs stops whenever any one of them fails.  With failures independent and
each GPU failing on average once every ``gpu_mtbf_s``, the job fails once every M = gpu_mtbf_s / n
(its MTBF).  Every ``interval_s`` of training the job writes a checkpoint, which blocks for C
seconds; a failure costs the restart R plus the work since the last checkpoint.

* Young (1974): the interval that minimises the time lost is tau* = sqrt(2 C M).
* Daly (2006), a higher-order estimate for C < 2M:
  tau* = sqrt(2 C M) [1 + sqrt(C / 2M) / 3 + (C / 2M) / 9] - C.
* Goodput = training time / wall time.  A segment of tau of training and its checkpoint, L = tau + C,
  must run without a failure; with failures a Poisson process (exponential gaps of mean M) and each
  costing R, the expected wall time of a segment is (M + R)(e^(L/M) - 1), so the goodput is
  tau / ((M + R)(e^((tau + C)/M) - 1))  (``expected_goodput``).  To first order in tau / M this is
  1 / (1 + C / tau + (R + (tau + C) / 2) / M): a checkpoint every tau costs C / tau, and each failure
  the restart plus, on average, half a segment of lost work (``first_order_goodput``).

``simulate_goodput`` runs the same job with exponentially distributed failures, step by step, and
measures the goodput the formula predicts (the chapter on failures checks one against the other);
``plan_goodput`` is what the capacity plan reports.  Failure rates of published runs: Llama 3 405B
saw 419 unexpected interruptions in a 54-day snapshot on 16,384 H100s (Dubey et al. 2024, Table 5),
a job MTBF of 3.1 hours, i.e. about 51,000 hours per GPU.
"""

from __future__ import annotations

import math
import random

from playground.planner.errors import PlanError

__all__ = ["young_interval", "daly_interval", "expected_goodput", "first_order_goodput", "simulate_goodput",
           "plan_goodput",
           "LLAMA3_GPU_MTBF_HOURS", "DEFAULT_WRITE_BYTES_PER_S"]

# Dubey et al. 2024, Table 5: 419 unexpected interruptions in 54 days on 16,384 GPUs
LLAMA3_GPU_MTBF_HOURS = 54 * 24 / 419 * 16384


def _positive(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise PlanError(f"{name} must be a positive finite number, got {value!r}")
    return float(value)


def young_interval(checkpoint_s: float, mtbf_s: float) -> float:
    """Young's optimal checkpoint interval sqrt(2 C M), in seconds of training between checkpoints."""
    return math.sqrt(2 * _positive("checkpoint time", checkpoint_s) * _positive("MTBF", mtbf_s))


def daly_interval(checkpoint_s: float, mtbf_s: float) -> float:
    """Daly's higher-order optimum (valid for C < 2M; beyond it, checkpoint once per MTBF)."""
    c, m = _positive("checkpoint time", checkpoint_s), _positive("MTBF", mtbf_s)
    if c >= 2 * m:
        return m
    x = c / (2 * m)
    return math.sqrt(2 * c * m) * (1 + math.sqrt(x) / 3 + x / 9) - c


def _checked(interval_s, checkpoint_s, restart_s, mtbf_s):
    tau, c, m = (_positive(n, v) for n, v in (("interval", interval_s), ("checkpoint time", checkpoint_s),
                                               ("MTBF", mtbf_s)))
    if isinstance(restart_s, bool) or not isinstance(restart_s, (int, float)) or restart_s < 0:
        raise PlanError(f"restart time must be a non-negative number, got {restart_s!r}")
    return tau, c, float(restart_s), m


def expected_goodput(interval_s: float, checkpoint_s: float, restart_s: float, mtbf_s: float) -> float:
    """Training time / wall time with Poisson failures: tau / ((M + R)(e^((tau + C)/M) - 1))."""
    tau, c, r, m = _checked(interval_s, checkpoint_s, restart_s, mtbf_s)
    return tau / ((m + r) * math.expm1((tau + c) / m))


def first_order_goodput(interval_s: float, checkpoint_s: float, restart_s: float, mtbf_s: float) -> float:
    """The same to first order in tau / M: 1 / (1 + C/tau + (R + (tau + C)/2) / M)."""
    tau, c, r, m = _checked(interval_s, checkpoint_s, restart_s, mtbf_s)
    return 1 / (1 + c / tau + (r + (tau + c) / 2) / m)


def simulate_goodput(interval_s: float, checkpoint_s: float, restart_s: float, mtbf_s: float,
                     work_s: float, seed: int = 0) -> dict:
    """Run ``work_s`` seconds of training with a checkpoint every ``interval_s`` and failures
    arriving as a Poisson process of mean gap ``mtbf_s`` (during training, checkpoints and
    restarts alike); return the wall time, the failures and the measured goodput."""
    tau, c, m, work = (_positive(n, v) for n, v in (("interval", interval_s), ("checkpoint time", checkpoint_s),
                                                     ("MTBF", mtbf_s), ("work", work_s)))
    rng = random.Random(seed)
    wall, saved, failures, lost = 0.0, 0.0, 0, 0.0
    next_failure = rng.expovariate(1 / m)
    while saved < work:
        segment = min(tau, work - saved)
        needed = segment + (c if saved + segment < work else 0.0)  # the last segment needs no checkpoint
        if wall + needed <= next_failure:
            wall += needed
            saved += segment
            continue
        failures += 1
        lost += next_failure - wall
        wall = next_failure + restart_s
        next_failure = wall + rng.expovariate(1 / m)  # memoryless: the next gap starts after the restart
    return {"wall_s": wall, "failures": failures, "lost_s": lost, "goodput": work / wall}


def plan_goodput(train_s: float, gpus: int, gpu_mtbf_hours: float, checkpoint_bytes: float,
                 write_bytes_per_s: float | None = None, restart_s: float = 600.0) -> dict:
    """The plan's failure budget: job MTBF, expected interruptions, checkpoint time (the whole job's
    ``checkpoint_bytes`` at the storage's aggregate ``write_bytes_per_s``; by default 1 GB/s per GPU,
    at most the 2 TB/s Llama 3's storage sustained), the best interval, goodput, and the wall-clock
    seconds that ``train_s`` of failure-free training becomes."""
    n = _positive("gpus", gpus)
    job_mtbf = _positive("--gpu-mtbf-hours", gpu_mtbf_hours) * 3600 / n
    bandwidth = DEFAULT_WRITE_BYTES_PER_S(n) if write_bytes_per_s is None else \
        _positive("--checkpoint-gbs", write_bytes_per_s)
    c = _positive("checkpoint bytes", checkpoint_bytes) / bandwidth
    tau = daly_interval(c, job_mtbf)
    goodput = expected_goodput(tau, c, restart_s, job_mtbf)
    wall = train_s / goodput
    return {"gpu_mtbf_hours": gpu_mtbf_hours, "job_mtbf_s": job_mtbf, "checkpoint_bytes": checkpoint_bytes,
            "write_bytes_per_s": bandwidth, "checkpoint_s": c, "restart_s": restart_s, "interval_s": tau,
            "young_interval_s": young_interval(c, job_mtbf), "goodput": goodput,
            "expected_interruptions": wall / job_mtbf, "wall_s": wall, "effective_days": wall / 86400}


def DEFAULT_WRITE_BYTES_PER_S(gpus: float) -> float:  # noqa: N802  (a rule, read like a constant)
    """1 GB/s per GPU, at most Llama 3's Tectonic storage, which sustained 2 TB/s (Dubey et al. Sec. 3.3.1)."""
    return min(1e9 * gpus, 2e12)
