"""Pipeline schedules as plain data: who computes what, in which order, and what it predicts.

Nothing here talks to another process.  A schedule is, for every stage k, an ordered list of
actions ``("F", m)`` (forward of micro-batch m) and ``("B", m)`` (its backward).  From those lists
alone we can predict a step (``simulate``), count how many micro-batches a stage holds at once
(``max_in_flight``), and, given measured events, compute the bubble (``measured_bubble``).

Symbols used throughout the chapter: K stages, M micro-batches per step, t_f and t_b the time one
stage needs for the forward and the backward of one micro-batch.
"""

from __future__ import annotations

SCHEDULES = ("naive", "gpipe", "1f1b")

__all__ = ["SCHEDULES", "stage_bounds", "schedule_actions", "max_in_flight", "simulate",
           "predicted_bubble", "measured_bubble", "check_schedule_args"]


def check_schedule_args(schedule: str, stages: int, micro_batches: int) -> None:
    """One clear ``ValueError`` for a schedule request that cannot run."""
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown schedule {schedule!r}; choose one of {', '.join(SCHEDULES)}")
    for name, value in (("stages", stages), ("micro_batches", micro_batches)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    if schedule == "naive" and micro_batches != 1:
        raise ValueError(f"the naive schedule runs the whole batch at once (micro_batches=1), "
                         f"got micro_batches={micro_batches}; use 'gpipe' or '1f1b' to split it")


def stage_bounds(n_blocks: int, stages: int) -> list[int]:
    """Cut the chain ``[embedding, block_1..block_L, head]`` into ``stages`` consecutive slices.

    The rule: blocks are shared out as evenly as possible (counts differ by at most one, the
    earlier stages take the extra ones), the embedding joins the first stage and the head the
    last.  Every stage holds at least one block, so ``stages <= n_blocks``.  Returns K+1 indices
    into the chain: stage k holds ``layers[bounds[k]:bounds[k+1]]``.
    """
    if isinstance(stages, bool) or not isinstance(stages, int) or stages < 1:
        raise ValueError(f"stages must be an integer >= 1, got {stages!r}")
    if stages > n_blocks:
        raise ValueError(f"cannot cut {n_blocks} transformer blocks into {stages} stages: every "
                         f"stage needs at least one block (use stages <= {n_blocks} or a deeper "
                         "model)")
    base, extra = divmod(n_blocks, stages)
    bounds, end = [0], 1                    # chain index 0 is the embedding
    for k in range(stages):
        end += base + (1 if k < extra else 0)
        bounds.append(end)
    bounds[-1] = n_blocks + 2               # the head (chain index L+1) joins the last stage
    return bounds


def schedule_actions(schedule: str, stages: int, micro_batches: int, stage: int) -> list[tuple[str, int]]:
    """The ordered actions of ``stage`` (0-based) under ``schedule``.

    * naive: the whole batch as one micro-batch, forward then backward;
    * gpipe: all M forwards, then all M backwards (Huang et al., 2019);
    * 1f1b: K-1-k warm-up forwards, then alternate one forward and one backward, then drain the
      remaining backwards (Narayanan et al., 2021).  Stage k never holds more than K-k
      micro-batches.
    """
    check_schedule_args(schedule, stages, micro_batches)
    if not 0 <= stage < stages:
        raise ValueError(f"stage must be in [0, {stages}), got {stage}")
    M = micro_batches
    if schedule in ("naive", "gpipe"):
        return [("F", m) for m in range(M)] + [("B", m) for m in range(M)]
    warmup = min(stages - 1 - stage, M)
    actions = [("F", m) for m in range(warmup)]
    for i in range(M - warmup):
        actions += [("F", warmup + i), ("B", i)]
    return actions + [("B", m) for m in range(M - warmup, M)]


def max_in_flight(actions) -> int:
    """Most micro-batches whose forward has run and whose backward has not, at any moment."""
    live = peak = 0
    for op, _ in actions:
        live += 1 if op == "F" else -1
        peak = max(peak, live)
    return peak


def simulate(schedule: str, stages: int, micro_batches: int, t_f: float = 1.0, t_b: float = 2.0,
             t_comm: float = 0.0) -> list[list[tuple[str, int, float, float]]]:
    """Ideal timeline: per stage, ``(op, m, start, end)`` with every action as early as allowed.

    F(m) on stage k waits for F(m) on stage k-1; B(m) on stage k waits for B(m) on stage k+1;
    each stage runs its actions in schedule order, one at a time; a message takes ``t_comm``.
    """
    K = stages
    actions = [schedule_actions(schedule, K, micro_batches, k) for k in range(K)]
    done: dict[tuple[str, int, int], float] = {}
    timeline: list[list] = [[] for _ in range(K)]
    free = [0.0] * K
    pointer = [0] * K
    remaining = sum(len(a) for a in actions)
    while remaining:
        progressed = False
        for k in range(K):
            while pointer[k] < len(actions[k]):
                op, m = actions[k][pointer[k]]
                if op == "F":
                    dep = None if k == 0 else ("F", m, k - 1)
                else:
                    dep = ("F", m, k) if k == K - 1 else ("B", m, k + 1)
                if dep is not None and dep not in done:
                    break
                ready = 0.0 if dep is None else done[dep] + (t_comm if dep[2] != k else 0.0)
                start = max(free[k], ready)
                end = start + (t_f if op == "F" else t_b)
                done[(op, m, k)] = free[k] = end
                timeline[k].append((op, m, start, end))
                pointer[k] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            raise RuntimeError(f"schedule {schedule!r} deadlocks for K={K}, M={micro_batches}")
    return timeline


def predicted_bubble(stages: int, micro_batches: int) -> float:
    """(K-1)/(M+K-1): the idle share of K stages' time in one GPipe or 1F1B step."""
    return (stages - 1) / (micro_batches + stages - 1)


def measured_bubble(events_per_stage) -> dict:
    """Bubble fraction from timestamped events (seconds since the common start of the step).

    ``events_per_stage[k]`` is stage k's list of ``(op, m, start, end)``.  The step lasts
    T = the latest end over all stages; stage k is busy for the sum of its events' durations.
    The bubble fraction is the idle share of the K·T stage-seconds the step occupied:
    ``1 - sum_k busy_k / (K·T)``.
    """
    K = len(events_per_stage)
    step = max(e[3] for events in events_per_stage for e in events)
    busy = [sum(e[3] - e[2] for e in events) for events in events_per_stage]
    return {"step_s": step, "busy_s": busy, "idle_s": [step - b for b in busy],
            "bubble": 1.0 - sum(busy) / (K * step)}
