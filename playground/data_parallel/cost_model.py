"""The α-β(-γ) cost model of a collective, fitted on the machine it runs on.

A message of m bytes between two ranks costs α + m·β seconds: α is the fixed latency (software
stack, synchronisation), β the time per byte (1/β is the link bandwidth).  Reductions also cost
γ seconds per byte added.  ``ping_pong`` measures α and β between two ranks, ``add_cost``
measures γ, and ``predict`` turns them into the time of each all-reduce algorithm:

=====================  ======================================================
algorithm              time for S bytes on n ranks
=====================  ======================================================
ring                   2(n-1)·α + 2(n-1)/n·S·β + (n-1)/n·S·γ
parameter_server       2(n-1)·α + 2(n-1)·S·β + (n-1)·S·γ   (one server link)
sharded_ps (k)         2(n-1)·α + 2(n-1)/k·S·β + (n-1)/k·S·γ
tree                   2⌈log2 n⌉·(α + S·β) + ⌈log2 n⌉·S·γ
=====================  ======================================================

α is charged per message the busiest rank handles, a send and a receive in flight at the same time
paying one α: a ring step (one of each) pays one; the parameter server, which posts its n-1
receives at once and then its n-1 sends, pays 2(n-1), because posting messages together overlaps
their flight but not the handling of each one.  (On shared CPU cores the messages of all ranks add
up instead, like their bytes below: there the sharded server, which also posts two batches, is
measured nowhere near the 3x faster that one α per batch would give, see
``allreduce_lab.tiny_all_reduces``.)

The model assumes each rank has its own link and can send and receive at full speed at the same
time, as GPUs with their own NVLink ports and NICs can.  On one CPU box the "links" are cores
copying bytes through the kernel: a message of m bytes keeps a sending and a receiving core busy
for about m·β each.  Every algorithm above sends 2(n-1)·S bytes in total (summed over ranks), so
on c cores no all-reduce can finish before the *shared-machine bound*

    (2 · 2(n-1)·S·β + (n-1)·S·γ) / c        (``machine_bound``; ``predict(..., cores=c)`` takes
                                             the larger of it and the per-link time)

With c >= 2n cores it never exceeds the ring's per-link time; with 4 ranks on 2 cores it rules.

``against_measured`` sets measured all-reduce times beside these predictions and ``table`` prints
them.  ``exposed_after_backward`` is the bucketed-DDP schedule: buckets become ready at a steady
rate during backward, their all-reduces run one after another, and what is left when backward ends
is exposed.
"""

from __future__ import annotations

import math
import numbers
import statistics
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist

from playground.launch import device

__all__ = ["AlphaBeta", "ping_pong", "add_cost", "fit", "predict", "machine_bound", "ALGORITHMS",
           "busiest_rank_bytes", "exposed_after_backward", "against_measured", "table"]

ALGORITHMS = ("ring", "parameter_server", "sharded_ps", "tree")


@dataclass(frozen=True)
class AlphaBeta:
    alpha_s: float           # α, seconds per message
    beta_s_per_byte: float   # β, seconds per byte on a link
    gamma_s_per_byte: float = 0.0  # γ, seconds per byte reduced

    @property
    def bandwidth_gb_s(self) -> float:
        return 1e-9 / self.beta_s_per_byte


def _sync():
    if torch.cuda.is_available() and device().type == "cuda":
        torch.cuda.synchronize()


def ping_pong(rank: int, sizes_bytes: list[int], repeats: int = 9, group=None) -> dict[int, float]:
    """One-way time (best of ``repeats`` round trips, halved) between ranks 0 and 1 per size.

    The best round trip is the machine's own cost; slower ones add the wait for a busy scheduler
    to run the woken process, which is load, not α or β.  Every rank of the job must call it
    (the others wait at a barrier).  Returns {bytes: s} on rank 0 and {} elsewhere.
    """
    if dist.get_world_size(group) < 2:  # rank 0 would wait forever for a rank 1
        raise ValueError("ping_pong needs at least 2 ranks (it times messages between 0 and 1)")
    result = {}
    if rank in (0, 1):
        peer = 1 - rank
        for size in sizes_bytes:
            buf = torch.zeros(max(size, 1), dtype=torch.uint8, device=device())
            times = []
            for i in range(repeats + 1):  # the first round trip warms the connection up
                start = time.perf_counter()
                if rank == 0:
                    dist.send(buf, peer, group)
                    dist.recv(buf, peer, group)
                else:
                    dist.recv(buf, peer, group)
                    dist.send(buf, peer, group)
                _sync()
                if i:
                    times.append((time.perf_counter() - start) / 2)
            result[size] = min(times)
    dist.barrier(group)
    return result if rank == 0 else {}


def add_cost(numel: int = 1 << 22, repeats: int = 5) -> float:
    """γ: seconds per byte of ``a.add_(b)`` on this rank's device (float32)."""
    a = torch.zeros(numel, device=device())
    b = torch.ones(numel, device=device())
    times = []
    for _ in range(repeats + 1):
        _sync()
        start = time.perf_counter()
        a.add_(b)
        _sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:]) / (numel * a.element_size())


def fit(one_way: dict[int, float], gamma_s_per_byte: float = 0.0) -> AlphaBeta:
    """Least squares of t = α + m·β in *relative* error, so 4 B and 16 MB weigh alike."""
    if len(one_way) < 2:
        raise ValueError("fit needs one-way times for at least two message sizes")
    bad = {m: t for m, t in one_way.items() if not (m >= 0 and 0 < t < math.inf)}
    if bad:  # the fit divides by each time: a zero, negative or NaN time poisons α and β
        raise ValueError(f"fit needs sizes >= 0 and finite one-way times > 0, got {bad}")
    m = torch.tensor(list(one_way), dtype=torch.float64)
    t = torch.tensor(list(one_way.values()), dtype=torch.float64)
    design = torch.stack([torch.ones_like(m), m], 1) / t[:, None]
    alpha, beta = torch.linalg.lstsq(design, torch.ones_like(t)[:, None]).solution[:, 0].tolist()
    alpha = max(alpha, float(t.min()) * 0.5)  # never a negative latency
    beta = max(beta, 1e-15)
    return AlphaBeta(alpha, beta, gamma_s_per_byte)


def _check(n, size_bytes, algorithm=None, servers=None):
    """Refuse bad input up front (also where n = 1 would short-cut to 0 s): a typo in an
    algorithm's name or an impossible server count must not come back as a plausible time."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"world size must be an integer >= 1, got {n!r}")
    if isinstance(size_bytes, bool) or not isinstance(size_bytes, numbers.Real) \
            or not 0 <= size_bytes < math.inf:  # also refuses NaN
        raise ValueError(f"message size must be a finite number >= 0 bytes, got {size_bytes!r}")
    if algorithm is not None and algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r}; "
                         f"expected one of {', '.join(ALGORITHMS)}")
    if servers is not None and (isinstance(servers, bool) or not isinstance(servers, int)
                                or not 1 <= servers <= n):
        raise ValueError(f"servers must be an integer between 1 and the world size {n}, "
                         f"got {servers!r}")


def machine_bound(model: AlphaBeta, n: int, size_bytes: float, cores: int) -> float:
    """Least seconds any all-reduce needs when n ranks share ``cores`` CPU cores (see above)."""
    _check(n, size_bytes)
    if isinstance(cores, bool) or not isinstance(cores, int) or cores < 1:
        raise ValueError(f"cores must be an integer >= 1, got {cores!r}")
    S = size_bytes
    return (4 * (n - 1) * S * model.beta_s_per_byte + (n - 1) * S * model.gamma_s_per_byte) / cores


def predict(model: AlphaBeta, algorithm: str, n: int, size_bytes: float,
            servers: int | None = None, cores: int | None = None) -> float:
    """Predicted seconds of one all-reduce of ``size_bytes`` on ``n`` ranks (table above); with
    ``cores``, never less than the shared-machine bound of ``cores`` CPU cores."""
    _check(n, size_bytes, algorithm, servers)
    if n == 1:
        return 0.0
    link = _per_link(model, algorithm, n, size_bytes, servers)
    return link if cores is None else max(link, machine_bound(model, n, size_bytes, cores))


def _per_link(model, algorithm, n, size_bytes, servers):
    a, b, g, S = model.alpha_s, model.beta_s_per_byte, model.gamma_s_per_byte, size_bytes
    if algorithm == "ring":
        return 2 * (n - 1) * a + 2 * (n - 1) / n * S * b + (n - 1) / n * S * g
    if algorithm == "parameter_server":
        return 2 * (n - 1) * a + 2 * (n - 1) * S * b + (n - 1) * S * g
    if algorithm == "sharded_ps":
        k = servers or n
        return 2 * (n - 1) * a + 2 * (n - 1) / k * S * b + (n - 1) / k * S * g
    if algorithm == "tree":
        depth = math.ceil(math.log2(n))
        return 2 * depth * (a + S * b) + depth * S * g
    raise ValueError(f"unknown algorithm {algorithm!r}; expected one of {', '.join(ALGORITHMS)}")


def busiest_rank_bytes(algorithm: str, n: int, size_bytes: float,
                       servers: int | None = None) -> float:
    """Bytes the busiest rank sends in one all-reduce (n divides the size)."""
    _check(n, size_bytes, algorithm, servers)
    if n == 1:
        return 0.0
    S = size_bytes
    if algorithm == "ring":
        return 2 * (n - 1) / n * S
    if algorithm == "parameter_server":
        return (n - 1) * S
    if algorithm == "sharded_ps":
        k = servers or n
        return (n - 1) / k * S + (k - 1) / k * S
    if algorithm == "tree":
        return math.ceil(math.log2(n)) * S
    raise ValueError(f"unknown algorithm {algorithm!r}; expected one of {', '.join(ALGORITHMS)}")


def exposed_after_backward(backward_s: float, buckets: int, bucket_s: float) -> float:
    """Seconds of communication left when backward ends, if backward produces ``buckets`` equal
    buckets at a steady rate (bucket i ready at (i+1)/buckets of ``backward_s``) and each bucket's
    all-reduce takes ``bucket_s``, one after another: max(bucket_s, buckets·bucket_s - (buckets-1)
    ·backward_s/buckets).  When the all-reduces keep up with backward only the last is exposed;
    when they do not, the backlog is."""
    if isinstance(buckets, bool) or not isinstance(buckets, numbers.Integral) or buckets < 1:
        raise ValueError(f"buckets must be an integer >= 1, got {buckets!r}")
    for name, value in (("backward_s", backward_s), ("bucket_s", bucket_s)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) \
                or not 0 <= value < math.inf:
            raise ValueError(f"{name} must be a finite number of seconds >= 0, got {value!r}")
    return max(bucket_s, buckets * bucket_s - (buckets - 1) * backward_s / buckets)


def against_measured(timed: dict, cores: int) -> dict:
    """``allreduce_lab.time_all_reduces(..., calibrate=True)`` against this model, ``cores`` cores.

    "rows": per size and algorithm, measured median and spread, per-link prediction, prediction
    with the machine bound, measured / predicted ("builtin" predicted as a ring, as gloo runs);
    "misfit": the fit's worst relative error on the ping-pong; at the largest size, "bound_s",
    "over_bound" (measured / bound) and, if both ran, "ps_over_ring" (PS / ring: measured,
    per-link model, model with the bound)."""
    ab, n = timed["alpha_beta"], timed["world_size"]
    misfit = max(abs(ab.alpha_s + m * ab.beta_s_per_byte - t) / t
                 for m, t in timed["ping_pong"].items())
    rows = []
    for size, algs in timed["times"].items():
        for alg, t in algs.items():
            model_alg = "ring" if alg == "builtin" else alg
            link = predict(ab, model_alg, n, size)
            pred = predict(ab, model_alg, n, size, cores=cores)
            rows.append({"size": size, "algorithm": alg, "measured_s": t["median_s"],
                         "spread": t["spread"], "per_link_s": link, "predicted_s": pred,
                         "ratio": t["median_s"] / pred})
    size = max(timed["times"])
    big = {alg: t["median_s"] for alg, t in timed["times"][size].items()}
    bound = machine_bound(ab, n, size, cores)
    out = {"rows": rows, "misfit": misfit, "size": size, "cores": cores, "bound_s": bound,
           "over_bound": {alg: t / bound for alg, t in big.items()}, "alpha_beta": ab}
    if {"ring", "parameter_server"} <= set(big):
        out["ps_over_ring"] = {
            "measured": big["parameter_server"] / big["ring"],
            "per_link": (predict(ab, "parameter_server", n, size)
                         / predict(ab, "ring", n, size)),
            "shared": (predict(ab, "parameter_server", n, size, cores=cores)
                       / predict(ab, "ring", n, size, cores=cores))}
    return out


def table(check: dict) -> str:
    """``against_measured``'s result as the lines the chapter prints (none over 80 characters)."""
    ab, size = check["alpha_beta"], check["size"]
    lines = [f"ping-pong fit: alpha = {ab.alpha_s * 1e6:.0f} us, 1/beta = {ab.bandwidth_gb_s:.2f} "
             f"GB/s; add: 1/gamma = {1e-9 / ab.gamma_s_per_byte:.1f} GB/s",
             f"{check['cores']} usable cores; T = alpha + S beta against the ping-pong: worst "
             f"relative error {check['misfit']:.0%}",
             "times in ms (measured: median; predicted: max(per link, machine bound))",
             f"{'size':>7s} {'algorithm':16s} {'measured':>8s} {'spread':>6s} {'per link':>8s} "
             f"{'predict':>8s} {'m/p':>6s}"]
    for r in check["rows"]:
        lines.append(f"{r['size'] // 1024:>5d}Ki {r['algorithm']:16s} "
                     f"{r['measured_s'] * 1e3:8.2f} {r['spread']:6.2f} "
                     f"{r['per_link_s'] * 1e3:8.2f} {r['predicted_s'] * 1e3:8.2f} "
                     f"{r['ratio']:6.2f}")
    over = check["over_bound"].values()
    lines.append(f"{size / 2 ** 20:g} MiB: measured / machine bound ({check['bound_s'] * 1e3:.2f} ms)"
                 f" {min(over):.2f} to {max(over):.2f} over {len(check['over_bound'])} algorithms")
    if "ps_over_ring" in check:
        ps = check["ps_over_ring"]
        lines.append(f"{size / 2 ** 20:g} MiB: PS / ring measured {ps['measured']:.2f}; "
                     f"per-link model {ps['per_link']:.2f}; with the bound {ps['shared']:.2f}")
    return "\n".join(lines)
