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

The model assumes each rank has its own link and can send and receive at full speed at the same
time, as GPUs with their own NVLink ports and NICs can.  On one CPU box the "links" are cores
copying bytes through the kernel: a message of m bytes keeps a sending and a receiving core busy
for about m·β each.  Every algorithm above sends 2(n-1)·S bytes in total (summed over ranks), so
on c cores no all-reduce can finish before the *shared-machine bound*

    (2 · 2(n-1)·S·β + (n-1)·S·γ) / c        (``machine_bound``; ``predict(..., cores=c)`` takes
                                             the larger of it and the per-link time)

With c >= 2n cores it never exceeds the ring's per-link time; with 4 ranks on 2 cores it rules.
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
           "busiest_rank_bytes"]

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
