"""Measurements of the all-reduce algorithms, shared by the chapter, its figures and the benchmark.

Rank functions (run them with ``playground.launch.run``):

* ``count_bytes``: each algorithm once on sub-groups of 2..n ranks, bytes counted by
  ``playground.comm``, result checked against ``dist.all_reduce``.
* ``time_all_reduces``: median wall time of each algorithm per message size, warmed up, with
  the algorithms interleaved round by round (so drifting load hits them all alike), each sample
  the slowest rank's time; plus, optionally, the α-β-γ calibration of ``cost_model`` and
  ``tiny_all_reduces``.
* ``tiny_all_reduces``: each algorithm on 2..n ranks with 4-byte messages, where only latency
  counts; ``ring_step_s`` turns the ring's time into what one step costs, to set beside α.

Bandwidths follow nccl-tests: algbw = S / t, busbw = algbw · 2(n-1)/n for an all-reduce.
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.distributed as dist

from playground import comm

from playground.data_parallel import cost_model
from playground.data_parallel.allreduce_baselines import (parameter_server_all_reduce,
                                            sharded_parameter_server_all_reduce, tree_all_reduce)
from playground.hardware import usable_cores
from playground.launch import device
from playground.data_parallel.ring import ring_all_reduce

__all__ = ["ALL_REDUCES", "count_bytes", "time_all_reduces", "tiny_all_reduces", "ring_step_s",
           "busbw_gb_s", "MB", "usable_cores", "cost_explorer", "quartiles"]

MB = 2 ** 20


def _builtin(tensor, group=None):
    dist.all_reduce(tensor, group=group)  # looked up at call time, so comm.count sees it
    return tensor


ALL_REDUCES = {
    "ring": ring_all_reduce,
    "parameter_server": parameter_server_all_reduce,
    "sharded_ps": sharded_parameter_server_all_reduce,
    "tree": tree_all_reduce,
    "builtin": _builtin,
}


def _pick(algorithms):
    unknown = [a for a in algorithms if a not in ALL_REDUCES]
    if unknown:
        raise ValueError(f"unknown all-reduce(s) {unknown}; expected some of {list(ALL_REDUCES)}")
    return {a: ALL_REDUCES[a] for a in algorithms}


def busbw_gb_s(size_bytes: float, seconds: float, n: int) -> float:
    """nccl-tests bus bandwidth of an all-reduce, GB/s (1e9 bytes/s)."""
    return size_bytes / seconds * 2 * (n - 1) / n / 1e9


def count_bytes(rank: int, world_size: int, numel: int, sizes: list[int] | None = None,
                algorithms=("ring", "parameter_server", "sharded_ps", "tree")) -> dict:
    """For every group size N in ``sizes`` (default 2..world_size), ranks 0..N-1 run each
    algorithm once on ``numel`` float32 elements; returns {N: {algorithm: [sent, received]}} for
    this rank (empty where it is not a member).  Each result is checked against the built-in.
    """
    chosen = _pick(algorithms)
    if isinstance(numel, bool) or not isinstance(numel, int) or numel < 0:
        raise ValueError(f"numel must be an integer >= 0, got {numel!r}")
    sizes = list(sizes or range(2, world_size + 1))
    bad = [N for N in sizes if isinstance(N, bool) or not isinstance(N, int)
           or not 1 <= N <= world_size]
    if bad:  # every rank refuses alike, before any group is created
        raise ValueError(f"group sizes must be integers from 1 to the {world_size} ranks, "
                         f"got {bad}")
    out = {}
    for N in sizes:
        group = dist.new_group(list(range(N)))  # every rank must take part in creating it
        if rank >= N:
            continue
        x = torch.randn(numel, generator=torch.Generator().manual_seed(rank)).to(device())
        expected = x.clone()
        dist.all_reduce(expected, group=group)
        out[N] = {}
        for name, fn in chosen.items():
            y = x.clone()
            with comm.count() as moved:
                fn(y, group=group)
            torch.testing.assert_close(y, expected, msg=f"{name} on {N} ranks")
            out[N][name] = [moved.sent_bytes, moved.received_bytes]
    dist.barrier()
    return out


def quartiles(values: list[float]) -> tuple[float, float, float]:
    """(p25, median, p75) of the samples, each within [min, max]."""
    values = sorted(values)
    if len(values) == 1:
        return values[0], values[0], values[0]
    # "exclusive" quartiles extrapolate beyond the samples when there are only two (a p25 below
    # the fastest run, even negative); from three samples on they stay inside
    method = "exclusive" if len(values) > 2 else "inclusive"
    q1, med, q3 = statistics.quantiles(values, n=4, method=method)
    return q1, med, q3


def _check_rounds(repeats, warmup):
    for name, value, least in (("repeats", repeats, 1), ("warmup", warmup, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")


def _sync():
    if device().type == "cuda":
        torch.cuda.synchronize()


def time_all_reduces(rank: int, world_size: int, sizes_bytes: list[int],
                     algorithms=("ring", "builtin"), repeats: int = 7, warmup: int = 2,
                     calibrate: bool = False) -> dict:
    """Time each algorithm on float32 tensors of each size; rank 0 returns the summary.

    Per size: ``warmup`` untimed calls of every algorithm, then ``repeats`` rounds; round i runs
    the algorithms in an order rotated by i.  A sample is the slowest rank's time between a
    barrier and the end of the call.  Returns {"times": {size: {algorithm: {median_s, p25_s,
    p75_s, spread, busbw_gb_s}}}, "world_size": n, ...} and, with ``calibrate``, the fitted
    α-β-γ model under "alpha_beta" with the ping-pong data under "ping_pong", and
    ``tiny_all_reduces`` of the same algorithms under "tiny".
    """
    chosen = _pick(algorithms)
    bad = [s for s in sizes_bytes
           if isinstance(s, bool) or not isinstance(s, int) or s < 4 or s % 4]
    if bad:  # the tensors are float32: any other size would be timed as a different one
        raise ValueError(f"sizes_bytes must be positive multiples of 4 (float32), got {bad}")
    _check_rounds(repeats, warmup)
    names = list(chosen)
    samples = torch.zeros(len(sizes_bytes), len(names), repeats, dtype=torch.float64)
    for i, size in enumerate(sizes_bytes):
        x = torch.randn(size // 4, generator=torch.Generator().manual_seed(rank))
        x = x.to(device())
        work = torch.empty_like(x)
        for _ in range(warmup):
            for fn in chosen.values():
                work.copy_(x)
                fn(work)
        for r in range(repeats):
            for k in range(len(names)):
                j = (k + r) % len(names)
                work.copy_(x)
                _sync()
                dist.barrier()
                start = time.perf_counter()
                chosen[names[j]](work)
                _sync()
                samples[i, j, r] = time.perf_counter() - start
    samples = _slowest(samples)  # a collective ends when its slowest rank does
    times = {}
    for i, size in enumerate(sizes_bytes):
        times[size] = {}
        for j, name in enumerate(names):
            q1, med, q3 = quartiles(samples[i, j].tolist())
            times[size][name] = {"median_s": med, "p25_s": q1, "p75_s": q3,
                                 "spread": (q3 - q1) / med,
                                 "busbw_gb_s": busbw_gb_s(size, med, world_size)}
    out = {"world_size": world_size, "backend": dist.get_backend(), "repeats": repeats,
           "warmup": warmup, "times": times}
    if calibrate:
        one_way = cost_model.ping_pong(rank, [2 ** k for k in range(2, 25, 2)])
        gamma = cost_model.add_cost()
        tiny = tiny_all_reduces(rank, world_size, tuple(chosen))
        if rank == 0:
            out["ping_pong"] = one_way
            out["alpha_beta"] = cost_model.fit(one_way, gamma)
            out["tiny"] = tiny
    return out if rank == 0 else {}


def _slowest(samples: torch.Tensor) -> torch.Tensor:
    """Element-wise maximum over the ranks (on the rank's device, which NCCL needs)."""
    samples = samples.to(device())
    dist.all_reduce(samples, op=dist.ReduceOp.MAX)
    return samples.cpu()


def tiny_all_reduces(rank: int, world_size: int,
                     algorithms=("ring", "parameter_server", "sharded_ps", "tree"),
                     repeats: int = 30, warmup: int = 3) -> dict:
    """What small messages really cost: ranks 0..N-1 (N = 2 .. world_size) all-reduce N float32
    with each algorithm, so a ring message is 4 bytes and β does not count.  Median over
    ``repeats`` interleaved rounds of the slowest rank's time.  Every rank calls it; rank 0
    returns {N: {algorithm: seconds}}, the others {}."""
    chosen = _pick(algorithms)
    _check_rounds(repeats, warmup)
    if world_size < 2:  # no all-reduce to time
        raise ValueError("tiny_all_reduces needs at least 2 ranks")
    names = list(chosen)
    samples = torch.zeros(world_size + 1, len(names), repeats, dtype=torch.float64)
    for n in range(2, world_size + 1):
        group = dist.new_group(list(range(n)))  # every rank must take part in creating it
        if rank >= n:
            continue
        x = torch.ones(n, device=device())
        for _ in range(warmup):
            for fn in chosen.values():
                fn(x.fill_(1.0), group=group)
        for r in range(repeats):
            for k in range(len(names)):
                j = (k + r) % len(names)
                x.fill_(1.0)
                _sync()
                dist.barrier(group)
                start = time.perf_counter()
                chosen[names[j]](x, group=group)
                _sync()
                samples[n, j, r] = time.perf_counter() - start
    samples = _slowest(samples)
    if rank:
        return {}
    return {n: {name: statistics.median(samples[n, j].tolist()) for j, name in enumerate(names)}
            for n in range(2, world_size + 1)}


def ring_step_s(tiny: dict) -> dict:
    """Seconds per ring step, {N: t / 2(N-1)}, from ``tiny_all_reduces``: the latency the ring
    really pays per step, to set beside the ping-pong's α."""
    return {n: times["ring"] / (2 * (n - 1)) for n, times in tiny.items()}


def cost_explorer(model: cost_model.AlphaBeta | None = None, n_ranks: int = 4,
                  size_bytes: float = 16 * MB):
    """Sliders for n, S, α and 1/β; plots the α-β-γ time of ring, parameter server and tree
    against n.  Starts at exactly ``model``'s α and β (the chapter's fit) and the chapter's n and S,
    and draws at once.  Returns the widget (display it as a cell's last value in JupyterLab)."""
    import math

    import ipywidgets as widgets
    import matplotlib.pyplot as plt

    from playground.plotting import COLORS, new_figure

    model = model or cost_model.AlphaBeta(50e-6, 1e-9, 0.0)
    exact = {"n": n_ranks, "size": float(size_bytes), "alpha": model.alpha_s * 1e6,
             "bandwidth": model.bandwidth_gb_s}
    fit = dict(layout=widgets.Layout(width="330px"), style={"description_width": "initial"})
    sliders = {
        "n": widgets.IntSlider(value=n_ranks, min=2, max=512, description="ranks n", **fit),
        "size": widgets.FloatLogSlider(value=size_bytes, base=2, min=10, max=32, step=0.01,
                                       description="S (bytes)", **fit),
        "alpha": widgets.FloatLogSlider(value=exact["alpha"], base=10, min=-1, max=4, step=0.005,
                                        description="α (µs)", **fit),
        "bandwidth": widgets.FloatLogSlider(value=exact["bandwidth"], base=10, min=-1, max=3,
                                            step=0.005, description="1/β (GB/s)", **fit)}
    out = widgets.Output(layout=widgets.Layout(min_height="330px"))

    def draw():
        ab = cost_model.AlphaBeta(exact["alpha"] * 1e-6, 1e-9 / exact["bandwidth"],
                                  model.gamma_s_per_byte)
        n, size = exact["n"], exact["size"]
        ns = list(range(2, max(n, 4) * 2 + 1))
        with out:
            out.clear_output(wait=True)
            fig, ax = new_figure(width=7, height=3.6)
            for alg, color in zip(("parameter_server", "tree", "ring"), COLORS[1:4]):
                ax.loglog(ns, [cost_model.predict(ab, alg, k, size) * 1e3 for k in ns],
                          color=color, label=alg.replace("_", " "))
            ax.axvline(n, color="k", lw=0.8)
            best = min(("parameter_server", "tree", "ring"),
                       key=lambda a: cost_model.predict(ab, a, n, size))
            ax.set_title(f"n = {n}, S = {size / 2 ** 20:.3g} MiB: "
                         f"fastest is {best.replace('_', ' ')} (predicted)")
            ax.set_xlabel("ranks n")
            ax.set_ylabel("predicted time (ms)")
            ax.legend()
            plt.show()

    def moved(change, key):
        # the browser snaps a slider to its step and sends that value back: ignore such echoes,
        # so the first figure keeps the exact starting values the text quotes
        if key == "n" or not math.isclose(change["new"], exact[key], rel_tol=0.006):
            exact[key] = change["new"]
            draw()

    for key, slider in sliders.items():
        slider.observe(lambda change, key=key: moved(change, key), names="value")
    draw()
    s = sliders
    return widgets.VBox([widgets.HBox([s["n"], s["size"]]), widgets.HBox([s["alpha"], s["bandwidth"]]),
                         out])
