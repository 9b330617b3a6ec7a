"""Pipeline schedules as plain data: who computes what, in which order, and what it predicts.

Nothing here talks to another process.  A schedule is, for every stage k, an ordered list of
actions ``("F", m)`` (forward of micro-batch m) and ``("B", m)`` (its backward).  From those lists
alone we can predict a step (``simulate``), count how many micro-batches a stage holds at once
(``max_in_flight``), and, given measured events, compute the bubble (``measured_bubble``).

The interleaved schedule gives each rank V *chunks* (virtual stages) of the model instead of one
slice: the chain is cut into K·V pieces and rank k holds pieces k, k+K, ..., k+(V-1)K.  Its
actions carry the chunk too: ``("F", m, v)`` and ``("B", m, v)``.

The zero-bubble schedule ZB-H1 (Qi et al., 2024) splits each backward in two: ``("B", m)`` now
computes only the gradient w.r.t. the stage input, and ``("W", m)`` the weight gradients, later.

Symbols used throughout the chapter: K stages, M micro-batches per step, V chunks per rank, t_f and
t_b the time one stage needs for the forward and the backward of one micro-batch (for ZB-H1 the
backward splits into t_b·(1-WEIGHT_SHARE) for B and t_w = t_b·WEIGHT_SHARE for W).
"""

from __future__ import annotations

SCHEDULES = ("naive", "gpipe", "1f1b", "interleaved", "zb")
# W's share of a backward: t_b = 2 t_f makes F, B and W cost the same, the paper's assumption
WEIGHT_SHARE = 0.5

__all__ = ["SCHEDULES", "stage_bounds", "schedule_actions", "action_chunk", "max_in_flight",
           "simulate", "predicted_bubble", "predicted_zb_bubble", "measured_bubble",
           "check_schedule_args", "WEIGHT_SHARE"]


def check_schedule_args(schedule: str, stages: int, micro_batches: int, chunks: int = 1) -> None:
    """One clear ``ValueError`` for a schedule request that cannot run."""
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown schedule {schedule!r}; choose one of {', '.join(SCHEDULES)}")
    for name, value in (("stages", stages), ("micro_batches", micro_batches), ("chunks", chunks)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    if schedule == "naive" and micro_batches != 1:
        raise ValueError(f"the naive schedule runs the whole batch at once (micro_batches=1), "
                         f"got micro_batches={micro_batches}; use 'gpipe' or '1f1b' to split it")
    if schedule != "interleaved" and chunks != 1:
        raise ValueError(f"only the 'interleaved' schedule gives a rank several chunks, got "
                         f"chunks={chunks} with {schedule!r}")
    if schedule == "interleaved":
        if stages < 2 or chunks < 2:
            raise ValueError(f"the interleaved schedule needs stages >= 2 and chunks >= 2, got "
                             f"stages={stages}, chunks={chunks}")
        if micro_batches % stages:
            # micro-batches go round the ranks in groups of K; a partial group deadlocks
            raise ValueError(f"the interleaved schedule needs micro_batches to be a multiple of "
                             f"stages, got micro_batches={micro_batches}, stages={stages}")
    if schedule == "zb" and micro_batches < stages:
        # stage k defers k weight passes into its drain: with M < K there are too few to fill it
        raise ValueError(f"the zero-bubble schedule (ZB-H1) needs micro_batches >= stages, got "
                         f"micro_batches={micro_batches} < stages={stages}: stage k defers k "
                         "weight-gradient passes (W) to fill its idle slots, and with fewer "
                         "micro-batches than stages the last stages have too few W to defer")


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


def schedule_actions(schedule: str, stages: int, micro_batches: int, stage: int,
                     chunks: int = 1) -> list[tuple]:
    """The ordered actions of ``stage`` (0-based) under ``schedule``.

    * naive: the whole batch as one micro-batch, forward then backward;
    * gpipe: all M forwards, then all M backwards (Huang et al., 2019);
    * 1f1b: K-1-k warm-up forwards, then alternate one forward and one backward, then drain the
      remaining backwards (Narayanan et al., 2021).  Stage k never holds more than K-k
      micro-batches.
    * interleaved: 1F1B over the rank's V chunks (``_interleaved_actions``).
    * zb: ZB-H1, 1F1B with every backward split into B and W (``_zero_bubble_actions``).
    """
    check_schedule_args(schedule, stages, micro_batches, chunks)
    if not 0 <= stage < stages:
        raise ValueError(f"stage must be in [0, {stages}), got {stage}")
    M = micro_batches
    if schedule == "interleaved":
        return _interleaved_actions(stages, M, chunks, stage)
    if schedule == "zb":
        return _zero_bubble_actions(stages, M, stage)
    if schedule in ("naive", "gpipe"):
        return [("F", m) for m in range(M)] + [("B", m) for m in range(M)]
    warmup = min(stages - 1 - stage, M)
    actions = [("F", m) for m in range(warmup)]
    for i in range(M - warmup):
        actions += [("F", warmup + i), ("B", i)]
    return actions + [("B", m) for m in range(M - warmup, M)]


def _interleaved_actions(K: int, M: int, V: int, k: int) -> list[tuple[str, int, int]]:
    """Interleaved 1F1B (Narayanan et al., 2021, Sec. 2.2.2) on rank k.

    The rank's M·V (micro-batch, chunk) forwards run in rounds: K micro-batches through chunk 0,
    the same K through chunk 1, ..., then the next K micro-batches.  Backwards take the same
    rounds with the chunks in reverse.  Warm-up: enough forwards that the last rank's first
    backward is ready, 2(K-1-k) + (V-1)K of them (all of them when M = K); then one forward,
    one backward; then the remaining backwards.
    """
    total = M * V

    def forward(i, reverse=False):
        group, within = divmod(i, K * V)
        v = within // K
        return group * K + within % K, V - 1 - v if reverse else v

    warmup = total if M == K else min(total, 2 * (K - 1 - k) + (V - 1) * K)
    actions = [("F", *forward(i)) for i in range(warmup)]
    for i in range(total - warmup):
        actions += [("F", *forward(warmup + i)), ("B", *forward(i, reverse=True))]
    return actions + [("B", *forward(i, reverse=True)) for i in range(total - warmup, total)]


def _zero_bubble_actions(K: int, M: int, k: int) -> list[tuple[str, int]]:
    """ZB-H1 (Qi et al., 2024, Sec. 3.1) on stage k: 1F1B's order of F and B, where B now yields
    only the input gradient; stage k runs its first k backwards without their W, then one W (the
    oldest pending) after every later B, and the last k W at the very end.

    Deferring k W lets B, the pass the previous stage waits for, run sooner on the later stages,
    and the k W fill the drain; the same order as PyTorch's ``ScheduleInterleavedZeroBubble``
    with one stage per rank.  A micro-batch stays in flight from F to W: stage k holds up to K of
    them (1F1B: K-k), of which up to k+1 wait only for their W."""
    warmup = K - 1 - k                              # M >= K (check_schedule_args)
    actions = [("F", m) for m in range(warmup)]
    backwards = weights = 0
    for m in range(M):
        if warmup + m < M:
            actions.append(("F", warmup + m))
        actions.append(("B", m))
        backwards += 1
        if backwards > k:                           # defer exactly k W
            actions.append(("W", weights))
            weights += 1
    return actions + [("W", m) for m in range(weights, M)]


def action_chunk(action: tuple) -> int:
    """The chunk an action runs on: its third entry, 0 for single-chunk schedules."""
    return action[2] if len(action) > 2 else 0


def max_in_flight(actions) -> int:
    """Most micro-batches (with chunks: (micro-batch, chunk) pairs) whose forward has run and
    whose backward has not (split backward: whose W has not), at any moment."""
    release = "W" if any(a[0] == "W" for a in actions) else "B"
    live = peak = 0
    for op, *_ in actions:
        live += 1 if op == "F" else -1 if op == release else 0
        peak = max(peak, live)
    return peak


def simulate(schedule: str, stages: int, micro_batches: int, t_f: float = 1.0, t_b: float = 2.0,
             t_comm: float = 0.0, chunks: int = 1) -> list[list[tuple]]:
    """Ideal timeline: per stage, ``(op, m, start, end)`` with every action as early as allowed.

    Number the chain's pieces c = v·K + k (piece c on rank c mod K; c = k without chunks).
    F(m) on piece c waits for F(m) on piece c-1; B(m) on piece c waits for B(m) on piece c+1 (or
    F(m) on the last piece); W(m) waits for B(m) on its own piece; each rank runs its actions in
    schedule order, one at a time; a message takes ``t_comm``.  A chunk's action lasts 1/V of
    the stage's t_f or t_b, and the interleaved schedule's events carry the chunk as a fifth
    entry.  With a split backward (zb) B lasts t_b·(1-WEIGHT_SHARE) and W t_b·WEIGHT_SHARE.
    """
    K, V = stages, chunks
    actions = [schedule_actions(schedule, K, micro_batches, k, chunks) for k in range(K)]
    split = WEIGHT_SHARE if schedule == "zb" else 0.0
    duration = {"F": t_f / V, "B": (1 - split) * t_b / V, "W": split * t_b / V}
    last = K * V - 1
    done: dict[tuple[str, int, int], float] = {}
    timeline: list[list] = [[] for _ in range(K)]
    free = [0.0] * K
    pointer = [0] * K
    remaining = sum(len(a) for a in actions)
    while remaining:
        progressed = False
        for k in range(K):
            while pointer[k] < len(actions[k]):
                action = actions[k][pointer[k]]
                op, m, v = action[0], action[1], action_chunk(action)
                c = v * K + k
                if op == "F":
                    dep = None if c == 0 else ("F", m, c - 1)
                elif op == "W":
                    dep = ("B", m, c)
                else:
                    dep = ("F", m, c) if c == last else ("B", m, c + 1)
                if dep is not None and dep not in done:
                    break
                ready = 0.0 if dep is None else done[dep] + (t_comm if dep[2] % K != k else 0.0)
                start = max(free[k], ready)
                end = start + duration[op]
                done[(op, m, c)] = free[k] = end
                timeline[k].append((op, m, start, end) + action[2:])
                pointer[k] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            raise RuntimeError(f"schedule {schedule!r} deadlocks for K={K}, M={micro_batches}")
    return timeline


def predicted_bubble(stages: int, micro_batches: int, chunks: int = 1) -> float:
    """(K-1)/(V·M+K-1): the idle share of K stages' time in one GPipe or 1F1B step (V = 1), or
    in an interleaved step with V chunks per rank (the fill and drain shrink V-fold)."""
    return (stages - 1) / (chunks * micro_batches + stages - 1)


def predicted_zb_bubble(stages: int, micro_batches: int, t_f: float = 1.0, t_b: float = 1.0,
                        t_w: float = 1.0) -> float:
    """ZB-H1's idle share, (K-1)(t_f+t_b-t_w) / (M(t_f+t_b+t_w) + (K-1)(t_f+t_b-t_w)), for
    per-micro-batch costs t_f, t_b (input gradient) and t_w (weight gradient), M >= K; it holds
    while a W fits in the slot of an F or a B, t_w <= min(t_f, t_b) (the simulation agrees there).
    (K-1)/(3M+K-1) for equal costs, where 1F1B's is (K-1)/(M+K-1)."""
    check_schedule_args("zb", stages, micro_batches)
    if not 0 <= t_w <= min(t_f, t_b):
        raise ValueError(f"the ZB-H1 formula needs 0 <= t_w <= min(t_f, t_b), got t_f={t_f}, "
                         f"t_b={t_b}, t_w={t_w}")
    idle = (stages - 1) * (t_f + t_b - t_w)
    return idle / (micro_batches * (t_f + t_b + t_w) + idle)


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
