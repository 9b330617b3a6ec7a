"""Turning pipeline runs into the chapter's tables: bubbles, memory, and equality checks.

The measurements come from ``playground.pipeline_parallel.engine.run_pipeline``; this module only groups them
(medians of interleaved repetitions), sets them beside their formulas, and checks results
against single-process training and ``torch.distributed.pipelining``.
"""

from __future__ import annotations

import statistics

import torch

from playground.model import ModelConfig, build_model, synthetic_batch, train_step
from playground.pipeline_parallel.engine import DEFAULT_DEVICE_TIME_S, PipeSpec
from playground.pipeline_parallel.schedules import (WEIGHT_SHARE, max_in_flight, measured_bubble,
                                                    predicted_bubble, predicted_zb_bubble, schedule_actions,
                                                    simulate)

__all__ = ["reference_step", "timing_specs", "bubble_rows", "timed_rows", "check_equal", "memory_rows",
           "print_bubble_table", "print_memory_table", "print_interleaved_comparison",
           "print_zero_bubble_memory", "formula_bubble", "bubble_explorer"]


def reference_step(spec: PipeSpec) -> dict:
    """Single-process, full-batch training step on the same model and batch: the ground truth."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model: more threads only add contention (10x slower here)
    try:
        model = build_model(spec.cfg, spec.seed, dtype=spec.dtype)
        optimizer = torch.optim.SGD(model.parameters(), lr=spec.lr)
        batch = synthetic_batch(spec.cfg, spec.batch_size, spec.step, spec.seed)
        loss = train_step(model, optimizer, batch)
    finally:
        torch.set_num_threads(threads)
    return {"loss": loss,
            "grads": {n: p.grad.detach().clone() for n, p in model.named_parameters()},
            "params": {n: p.detach().clone() for n, p in model.named_parameters()}}


def timing_specs(stages=(2, 4), micro_batches=(1, 2, 4, 8), schedules=("gpipe",), repeats: int = 3,
                 device_time_s="auto", chunks: int = 1, **kw) -> list[PipeSpec]:
    """Every (schedule, K, M) once per repetition, repetitions interleaved (noise hits all alike).

    ``chunks`` applies to the interleaved schedule (the others run one chunk); the model gets
    enough blocks for every rank to hold ``chunks`` of them unless ``cfg`` is given."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    if "cfg" not in kw:
        kw["cfg"] = ModelConfig(n_layers=max([4] + [K * chunks for K in stages]))
    return [PipeSpec(s, stages=K, micro_batches=M, batch_size=max(8, M), step=r,
                     device_time_s=device_time_s, chunks=chunks if s == "interleaved" else 1, **kw)
            for r in range(repeats) for K in stages for M in micro_batches for s in schedules]


def timed_rows(specs, world_size: int = 4, attempts: int = 3) -> list[dict]:
    """``bubble_rows`` of one launch of ``specs``, launched again (up to ``attempts`` times) while
    any action overran its emulated device time: on a loaded machine the emulation can break
    (real compute outlasts the padding), and then the timings test the load, not the schedule."""
    from playground.pipeline_parallel.engine import run_pipeline
    for _ in range(attempts):
        rows = bubble_rows(run_pipeline(specs, world_size=world_size))
        if not any(r["overruns"] for r in rows):
            break
    return rows


def formula_bubble(schedule: str, K: int, M: int, V: int = 1, device_time_s=None) -> float:
    """The bubble formula of a schedule: (K-1)/(V·M+K-1), or for ZB-H1 Eq. (eq-pp-zb-bubble)
    with the emulated (T_F, T_B) cut into B and W by WEIGHT_SHARE (the default: equal costs)."""
    if schedule != "zb":
        return predicted_bubble(K, M, V)
    T_F, T_B = DEFAULT_DEVICE_TIME_S if device_time_s in (None, "auto") else device_time_s
    return predicted_zb_bubble(K, M, T_F, (1 - WEIGHT_SHARE) * T_B, WEIGHT_SHARE * T_B)


def bubble_rows(records) -> list[dict]:
    """Median measured bubble per (schedule, K, M, V) beside its formula and their ratio."""
    groups: dict = {}
    for rec in records:
        s = rec["spec"]
        groups.setdefault((s.schedule, s.stages, s.micro_batches, s.chunks), []).append(rec)
    rows = []
    for (schedule, K, M, V), recs in groups.items():
        measured = statistics.median(r["bubble"] for r in recs)
        formula = formula_bubble(schedule, K, M, V, recs[0]["spec"].device_time_s)
        step = statistics.median(r["step_s"] for r in recs)
        work = _emulated_stage_time(recs[0])  # T_F + T_B, when the device time was emulated
        # actions on the critical path: 2 per slot of (V·M+K-1); ZB-H1: K-1 forwards, then the
        # last stage's 3M F, B and W back to back
        on_path = 3 * M + K - 1 if schedule == "zb" else 2 * (V * M + K - 1)
        rows.append({"schedule": schedule, "K": K, "M": M, "V": V, "measured": round(measured, 4),
                     "formula": round(formula, 4), "ratio": round(measured / formula, 3),
                     "step_s": round(step, 4),
                     # busy time over the busy share: (V·M+K-1)/(V·M)·(T_F+T_B) for Eq.
                     # (eq-pp-step) and its interleaved form, (T_F+T_B)/(1-bubble) for ZB-H1
                     "step_formula_s": None if work is None else round(work / (1 - formula), 4),
                     # the fixed cost c per action that explains the excess: each action on the
                     # critical path lasts c longer, T_step = (V·M+K-1)·((t_f+t_b)/V + 2c)
                     "handoff_s": (None if work is None
                                   else round((step - work / (1 - formula)) / on_path, 5)),
                     "repeats": len(recs),
                     "overruns": sum(st["overruns"] for r in recs for st in r["stages"])})
    return rows


def _emulated_stage_time(record) -> float | None:
    """T_F + T_B of one stage on the whole mini-batch (s) when every stage emulated device time."""
    if not all(st.get("emulated") for st in record["stages"]):
        return None
    dt = record["spec"].device_time_s
    return float(sum(DEFAULT_DEVICE_TIME_S if dt == "auto" else dt))


def check_equal(records, against_torch=None) -> list[str]:
    """assert_close every run's gradients and parameters with the single-process step.

    ``against_torch``: optional {(schedule, K, M): record of engine 'torch'}, compared too.
    Returns one verdict per run (a continuation line when compared with PyTorch too);
    raises AssertionError on the first difference.
    """
    lines = []
    for rec in records:
        spec = rec["spec"]
        ref = reference_step(spec)
        if set(rec["grads"]) != set(ref["grads"]):
            raise AssertionError(f"{spec.schedule}: stages cover {len(rec['grads'])} of "
                                 f"{len(ref['grads'])} parameters")
        for name in ref["grads"]:
            _assert_close(rec["grads"][name], ref["grads"][name])
            _assert_close(rec["params"][name], ref["params"][name])
        what = "torch" if spec.engine == "torch" else "ours"
        chunks = f" v={spec.chunks}" if spec.chunks > 1 else ""
        line = (f"{spec.schedule} p={spec.stages} m={spec.micro_batches}{chunks}"
                f"{' recompute' if spec.recompute else ''} ({what}): gradients and parameters "
                f"= single-process step")
        if spec.dtype in (torch.bfloat16, torch.float16):
            line += "\n    (to 4 units of the last place)"
        other = (against_torch or {}).get((spec.schedule, spec.stages, spec.micro_batches))
        if (other is not None and spec.engine == "playground"
                and (other["spec"].dtype, other["spec"].chunks) == (spec.dtype, spec.chunks)):
            for name in ref["grads"]:
                _assert_close(rec["grads"][name], other["grads"][name])
                _assert_close(rec["params"][name], other["params"][name])
            line += "\n    and torch.distributed.pipelining's step"
        lines.append(line)
    return lines


def _assert_close(actual: torch.Tensor, expected: torch.Tensor) -> None:
    """``assert_close``; in bfloat16/float16 within a few units of the last place of the tensor's
    largest entry: M micro-batch gradients summed one by one round differently from one
    full-batch gradient, and a 7- or 10-bit mantissa makes that visible."""
    if expected.dtype in (torch.bfloat16, torch.float16):
        eps = torch.finfo(expected.dtype).eps
        scale = float(expected.abs().max()) if expected.numel() else 0.0
        torch.testing.assert_close(actual, expected, rtol=4 * eps, atol=4 * eps * scale)
    else:
        torch.testing.assert_close(actual, expected)


def memory_rows(records) -> list[dict]:
    """Per run and stage: bytes autograd saved for one micro-batch, and the peak held at once."""
    rows = []
    for rec in records:
        s = rec["spec"]
        for k, st in enumerate(rec["stages"]):
            rows.append({"schedule": s.schedule, "M": s.micro_batches, "recompute": s.recompute,
                         "stage": k, "per_micro_batch": max(st["saved_bytes"]),
                         "kept_per_micro_batch": max(st["kept_bytes"]),
                         "peak": st["peak_bytes"], "forward_flops": st["flops"]["F"],
                         "backward_flops": st["flops"]["B"]})
    return rows


def bubble_explorer(p: int = 4, m: int = 8, schedule: str = "gpipe", v: int = 2):
    """An interactive view of the ideal GPipe, 1F1B, interleaved or ZB-H1 step as p, m and v
    change (JupyterLab; ipywidgets).  It starts at the chapter's example, p = 4 stages and
    m = 8 micro-batches of GPipe ({numref}`fig-pipeline-bubble-map`), drawn at once."""
    import ipywidgets as widgets
    import matplotlib.pyplot as plt
    from IPython.display import display

    from playground.pipeline_parallel.gantt import draw_gantt

    out = widgets.Output(layout=widgets.Layout(width="100%"))
    style = {"description_width": "initial"}
    sliders = {"p": widgets.IntSlider(p, 1, 8, description="p stages", style=style,
                                      layout=widgets.Layout(width="320px")),
               "m": widgets.IntSlider(m, 1, 32, description="m micro-batches", style=style,
                                      layout=widgets.Layout(width="360px")),
               "schedule": widgets.ToggleButtons(options=["gpipe", "1f1b", "interleaved", "zb"],
                                                 value=schedule, description="schedule",
                                                 style={**style, "button_width": "90px"}),
               "v": widgets.IntSlider(v, 2, 4, description="v chunks (interleaved)",
                                      style=style, layout=widgets.Layout(width="360px"))}

    def show(change=None):
        P, M, name = sliders["p"].value, sliders["m"].value, sliders["schedule"].value
        V = sliders["v"].value if name == "interleaved" else 1
        with out:
            out.clear_output(wait=True)
            try:
                timeline = simulate(name, P, M, 1.0, 2.0, chunks=V)
            except ValueError as err:  # e.g. interleaved with m not a multiple of p, zb with m < p
                print(err)
                return
            fig, ax = plt.subplots(figsize=(8, 0.5 + 0.45 * P), layout="constrained")
            draw_gantt(ax, timeline)
            ax.set_xlabel("time (units of T_F; T_B = 2 T_F)")
            ax.set_title(f"{name}, p={P}, m={M}, v={V}: formula bubble "
                         f"{formula_bubble(name, P, M, V, (1.0, 2.0)):.3f} (simulated "
                         f"{measured_bubble(timeline)['bubble']:.3f})")
            display(fig)
            plt.close(fig)

    for control in sliders.values():
        control.observe(show, names="value")
    show()  # the first view, at the text's values, before any control moves
    return widgets.VBox([widgets.HBox([sliders["p"], sliders["m"]],
                                      layout=widgets.Layout(flex_flow="row wrap")),
                         sliders["schedule"], sliders["v"], out])


def print_bubble_table(rows) -> None:
    """The bubble sweep as a table, all in EMULATED device time: the median bubble beside
    (p-1)/(v·m+p-1), the step beside busy time / (1 - bubble), and the per-action hand-off cost
    c behind the gap."""
    print("emulated device time: real ranks, sends and order; compute padded to set durations")
    print(f"{'schedule':11s} {'p':>2s} {'m':>2s} {'v':>2s} {'bubble':>7s} {'formula':>8s} "
          f"{'ratio':>6s} {'step (ms)':>10s} {'formula':>8s} {'c (ms)':>7s} {'overruns':>8s}")
    order = {s: i for i, s in enumerate(("gpipe", "1f1b", "interleaved", "zb"))}
    for r in sorted(rows, key=lambda r: (order.get(r["schedule"], 9), r["K"], r["M"], r["V"])):
        predicted = "-" if r["step_formula_s"] is None else f"{1e3 * r['step_formula_s']:.1f}"
        handoff = "-" if r["handoff_s"] is None else f"{1e3 * r['handoff_s']:.2f}"
        print(f"{r['schedule']:11s} {r['K']:2d} {r['M']:2d} {r['V']:2d} {r['measured']:7.3f} "
              f"{r['formula']:8.3f} {r['ratio']:6.2f} {1e3 * r['step_s']:10.1f} {predicted:>8s} "
              f"{handoff:>7s} {r['overruns']:8d}")
    print("bubble: median emulated idle share; formula (p-1)/(v·m+p-1),\n"
          "  zb: (p-1)(T_F+T_B-T_W)/(m(T_F+T_B+T_W)+(p-1)(T_F+T_B-T_W))\n"
          "step: median emulated step; formula: busy time / (1 - bubble)\n"
          "c: fixed cost per action on the critical path that would explain the gap,\n"
          "  2(v·m+p-1) actions (zb: 3m+p-1)\n"
          "overruns: actions whose real compute outlasted the emulated time (0 = valid)")


def print_memory_table(records) -> None:
    """Per stage: bytes saved for one micro-batch, and the peak held, for each run (KiB)."""
    rows = memory_rows(records)
    runs = [(r["spec"].schedule, r["spec"].recompute) for r in records]
    names = [f"{s}{'+re' if re else ''}" for s, re in runs]
    print("peak saved activations per stage, counted (KiB)")
    print(f"{'stage':5s} {'one micro-b.':>13s} " + " ".join(f"{n:>10s}" for n in names))
    for k in range(records[0]["spec"].stages):
        mine = [r for r in rows if r["stage"] == k]
        print(f"{k:5d} {mine[0]['per_micro_batch'] / 1024:13.1f} "
              + " ".join(f"{r['peak'] / 1024:10.1f}" for r in mine))


def print_interleaved_comparison(plain, interleaved) -> None:
    """Per rank, 1F1B beside interleaved on the same model: bytes and messages sent (against the
    boundary directions the rank's pieces cross) and peak saved activations (against
    Eq. (eq-pp-interleaved-mem) over Eq. (eq-pp-1f1b)); then the whole pipeline's totals."""
    K, V, M = (interleaved["spec"].stages, interleaved["spec"].chunks,
               interleaved["spec"].micro_batches)
    totals = {"plain": [0, 0], "interleaved": [0, 0]}
    for k in range(K):
        a, b = plain["stages"][k], interleaved["stages"][k]
        pieces = [v * K + k for v in range(V)]
        crossings = sum((c < K * V - 1) + (c > 0) for c in pieces)
        plain_crossings = (k < K - 1) + (k > 0)  # 1F1B: the stage's own one or two boundaries
        sent = [st["traffic"]["sent_bytes"] for st in (a, b)]
        messages = [st["traffic"]["calls"].get("isend", 0) for st in (a, b)]
        for name, nbytes, n in zip(totals, sent, messages):
            totals[name][0] += nbytes
            totals[name][1] += n
        held = max_in_flight(schedule_actions("interleaved", K, M, k, V)) / V  # micro-batches
        formula = held / min(K - k, M)
        print(f"rank {k}: pieces {pieces} cross {crossings} boundary directions "
              f"(1F1B's stage: {plain_crossings})\n"
              f"  sends {sent[0]} B -> {sent[1]} B ({sent[1] / sent[0]:.1f}x) in "
              f"{messages[0]} -> {messages[1]} messages (counted)\n"
              f"  peak saved {a['peak_bytes'] / 1024:.0f} KiB -> {b['peak_bytes'] / 1024:.0f} KiB "
              f"({b['peak_bytes'] / a['peak_bytes']:.2f}x; equations: {held:g}/{min(K - k, M)} "
              f"micro-batches = {formula:.2f}x)")
    (b0, n0), (b1, n1) = totals["plain"], totals["interleaved"]
    print(f"all ranks: {b0} B -> {b1} B in {n0} -> {n1} messages: {b1 / b0:.3f}x and "
          f"{n1 / n0:.3f}x;\n  (pv-1)/(p-1) = {K * V - 1}/{K - 1} = {(K * V - 1) / (K - 1):.3f}")


def print_zero_bubble_memory(plain, zb) -> None:
    """Per stage r, 1F1B beside ZB-H1 on the same model: peak saved bytes against
    Eq. (eq-pp-zb-mem), p·M_a + (r+1)·M_g, where 1F1B holds (p-r)·M_a; and the FLOPs B and W split."""
    K = zb["spec"].stages
    for k in range(K):
        a_st, z_st = plain["stages"][k], zb["stages"][k]
        a = z_st["saved_bytes"][0]          # one micro-batch's saved activations, bytes
        g = z_st["w_input_bytes"][0]        # the output gradients one W starts from, bytes
        M = zb["spec"].micro_batches
        formula = min(K, M) * a + (k + 1) * g
        print(f"stage {k}: M_a = {a / 1024:.1f} KiB, M_g = {g / 1024:.1f} KiB (counted)\n"
              f"  peak 1F1B {a_st['peak_bytes'] / 1024:.1f} KiB = {K - k}M_a: "
              f"{a_st['peak_bytes'] == (K - k) * a}; ZB-H1 {z_st['peak_bytes'] / 1024:.1f} KiB = "
              f"{K}M_a + {k + 1}M_g: {z_st['peak_bytes'] == formula} "
              f"(+{(z_st['peak_bytes'] - a_st['peak_bytes']) / 1024:.1f} KiB)")
    flops = [zb["stages"][k]["flops"] for k in range(K)]
    full = [plain["stages"][k]["flops"]["B"] for k in range(K)]
    print(f"FLOPs: B + W = 1F1B's backward on every stage: "
          f"{all(f['B'] + f['W'] == b for f, b in zip(flops, full))}; W's share "
          f"{flops[0]['W'] / full[0]:.3f} (stage 0)")
