"""Figures of the pipeline-parallelism chapter, each drawn from real multi-process runs.

The timelines and bubbles are real processes, sends and order under EMULATED device time
(each action padded to a set duration, ``device_clock``): they say "emulated", never "measured".
The memory bars are bytes counted with saved-tensor hooks."""

from __future__ import annotations

from functools import lru_cache

from playground.figures import figure
from playground.pipeline_parallel.gantt import draw_gantt
from playground.plotting import COLORS, new_figure

K_GANTT, M_GANTT = 4, 4


@lru_cache(maxsize=1)
def _timing_runs():
    """One launch: the bubble sweep (p=2, 4; m=1..8; 3 interleaved repeats) and the Gantt runs
    (step 100 + r, so the two sets are told apart)."""
    from playground.model import ModelConfig
    from playground.pipeline_parallel.engine import PipeSpec, run_pipeline
    from playground.pipeline_parallel.report import timing_specs
    specs = timing_specs(stages=(2, 4), micro_batches=(1, 2, 4, 8), repeats=3)
    deep = ModelConfig(n_layers=8)  # interleaved: p·v = 8 pieces
    specs += [PipeSpec(s, stages=K_GANTT, micro_batches=M, batch_size=8, step=100 + r,
                       chunks=2 if s == "interleaved" else 1,
                       cfg=deep if s == "interleaved" else ModelConfig())
              for r in range(3) for s, M in (("naive", 1), ("gpipe", M_GANTT), ("1f1b", M_GANTT),
                                             ("interleaved", M_GANTT))]
    return run_pipeline(specs, world_size=4)


def _gantt_runs():
    return [r for r in _timing_runs() if r["spec"].step >= 100]


def _median_run(records, schedule):
    """Of the repetitions of ``schedule``, the one whose bubble is the median (not the best)."""
    runs = sorted((r for r in records if r["spec"].schedule == schedule), key=lambda r: r["bubble"])
    return runs[len(runs) // 2]


def _title(rec) -> str:
    from playground.pipeline_parallel.report import formula_bubble
    s = rec["spec"]
    chunks = f", v={s.chunks}" if s.chunks > 1 else ""
    formula = formula_bubble(s.schedule, s.stages, s.micro_batches, s.chunks, s.device_time_s)
    return (f"{s.schedule}: p={s.stages}, m={s.micro_batches}{chunks}, bubble "
            f"{rec['bubble']:.2f} emulated (formula {formula:.2f})")


def _two_gantts(runs, xlabel: str, rank_ticks: bool = True):
    """Two emulated-time timelines, one above the other, on a shared time axis."""
    fig, axes = new_figure(nrows=2, width=7.5, height=4.4, sharex=True)
    for ax, rec in zip(axes, runs):
        draw_gantt(ax, [st["events"] for st in rec["stages"]], scale=1e3)
        ax.set_title(_title(rec), fontsize=10)
        if rank_ticks:
            ax.set_yticks(range(4), [f"rank {k}" for k in range(4)])
    axes[-1].set_xlabel(xlabel)
    return fig


@lru_cache(maxsize=1)
def _zero_bubble_runs():
    """One launch: 1F1B and ZB-H1 on 4 ranks, m = 4, the same emulated device time, 3 repeats."""
    from playground.pipeline_parallel.engine import PipeSpec, run_pipeline
    return run_pipeline([PipeSpec(s, stages=K_GANTT, micro_batches=M_GANTT, batch_size=8, step=r)
                         for r in range(3) for s in ("1f1b", "zb")], world_size=4)


@figure("pipeline_zero_bubble.png")
def zero_bubble_gantt():
    """Timelines of 1F1B and ZB-H1 on 4 ranks, m = 4, in emulated device time."""
    return _two_gantts([_median_run(_zero_bubble_runs(), s) for s in ("1f1b", "zb")],
                       "emulated device time since the common start (ms); blue F, orange B "
                       "(1F1B: B and W), green W", rank_ticks=False)


@figure("pipeline_interleaved.png")
def interleaved_gantt():
    """Timelines of 1F1B and interleaved 1F1B (v = 2) on 4 ranks, m = 4, emulated device time."""
    fig = _two_gantts([_median_run(_gantt_runs(), s) for s in ("1f1b", "interleaved")],
                      "emulated device time since the common start (ms); blue forward, "
                      "orange backward")
    return fig


@figure("pipeline_gantt.png")
def gantt():
    """Timelines of naive, GPipe and 1F1B on 4 stages, emulated device time."""
    runs = [_median_run(_gantt_runs(), s) for s in ("naive", "gpipe", "1f1b")]
    fig, axes = new_figure(nrows=3, width=7.5, height=6.4, sharex=True)
    for ax, rec in zip(axes, runs):
        draw_gantt(ax, [st["events"] for st in rec["stages"]], scale=1e3)
        ax.set_title(_title(rec), fontsize=10)
    axes[-1].set_xlabel("emulated device time since the common start (ms); blue forward, "
                        "orange backward")
    return fig


@figure("pipeline_bubble.png")
def bubble_vs_micro_batches():
    """Median bubble fraction (emulated device time) over m for p = 2 and 4, beside (p-1)/(m+p-1)."""
    from playground.pipeline_parallel.report import bubble_rows
    rows = bubble_rows([r for r in _timing_runs() if r["spec"].step < 100])
    fig, ax = new_figure(width=6.4, height=3.8)
    for i, K in enumerate((2, 4)):
        mine = sorted((r["M"], r["measured"], r["formula"]) for r in rows if r["K"] == K)
        Ms = [m for m, _, _ in mine]
        ax.plot(Ms, [f for _, _, f in mine], "--", color=COLORS[i], label=f"(p-1)/(m+p-1), p={K}")
        ax.plot(Ms, [v for _, v, _ in mine], "o", color=COLORS[i], label=f"emulated, p={K}")
    ax.set_xscale("log", base=2)
    ax.set_xticks([1, 2, 4, 8], ["1", "2", "4", "8"])
    ax.set_xlabel("micro-batches per step, m")
    ax.set_ylabel("bubble fraction (idle / p·step)")
    ax.set_ylim(0, 0.85)
    ax.legend()
    return fig


@figure("pipeline_memory.png")
def saved_activations():
    """Peak saved-activation bytes per stage (counted): GPipe vs 1F1B, with and without recomputation."""
    from playground.pipeline_parallel.engine import PipeSpec, run_pipeline
    specs = [PipeSpec(s, stages=4, micro_batches=8, recompute=r, device_time_s=None)
             for s in ("gpipe", "1f1b") for r in (False, True)]
    runs = run_pipeline(specs)
    fig, ax = new_figure(width=6.4, height=3.8)
    width = 0.2
    for i, rec in enumerate(runs):
        s = rec["spec"]
        peaks = [st["peak_bytes"] / 2**10 for st in rec["stages"]]
        ax.bar([k + (i - 1.5) * width for k in range(4)], peaks, width, color=COLORS[i],
               label=f"{s.schedule}{' + recompute' if s.recompute else ''}")
    ax.set_xticks(range(4), [f"stage {k}" for k in range(4)])
    ax.set_ylabel("peak saved activations,\ncounted (KiB)")
    ax.set_title("p=4 stages, m=8 micro-batches of 1 sequence", fontsize=10)
    ax.set_ylim(0, 1.35 * max(runs[0]["stages"][-1]["peak_bytes"], 1) / 2**10)
    ax.legend(ncols=2, loc="upper center")
    return fig


@figure("pipeline_bubble_map.png")
def bubble_map():
    """What the chapter's explorer shows: the ideal GPipe timeline, and the formula over p and m."""
    from playground.pipeline_parallel.schedules import measured_bubble, predicted_bubble, simulate
    fig, (left, right) = new_figure(ncols=2, width=10, height=3.6)
    timeline = simulate("gpipe", 4, 8, 1.0, 2.0)
    draw_gantt(left, timeline)
    left.set_xlabel("time (units of T_F, with T_B = 2 T_F)")
    left.set_title(f"ideal GPipe, p=4, m=8: bubble {measured_bubble(timeline)['bubble']:.3f}",
                   fontsize=10)
    Ms = list(range(1, 65))
    for i, K in enumerate((2, 4, 8, 16)):
        right.plot(Ms, [predicted_bubble(K, M) for M in Ms], color=COLORS[i], label=f"p={K}")
        right.plot([4 * K], [predicted_bubble(K, 4 * K)], "o", color=COLORS[i])
    right.set_xscale("log", base=2)
    right.set_xlabel("micro-batches per step, m (dots: m = 4p)")
    right.set_ylabel("bubble (p-1)/(m+p-1)")
    right.legend()
    return fig
