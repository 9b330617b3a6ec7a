"""A mixture-of-experts MLP with a top-k router: the single-process reference.

Each token is sent to the k experts its router scores highest and the outputs are mixed with
the router's probabilities (Shazeer et al. 2017; GShard, Lepikhin et al. 2020; Switch,
Fedus et al. 2021).  An expert accepts at most C = ceil(capacity_factor · T·k / E) of the T·k
(token, choice) assignments of a batch of T tokens; the rest are *dropped*: that assignment
contributes nothing (in a transformer block the residual still carries the token).  First
choices are served before second choices, earlier tokens before later ones.

The routing helpers here are shared with ``playground.systems_map.expert_parallel``, so the distributed
layer makes exactly the same decisions as this reference.
"""

from __future__ import annotations

import math
import numbers

import torch
import torch.nn.functional as F
from torch import nn

from playground.model import MLP

__all__ = ["MoE", "route", "expert_capacity", "queue_position", "within_capacity", "moe_reference",
           "load_balancing_loss", "predicted_drops", "drops_agree"]


def expert_capacity(tokens: int, n_experts: int, top_k: int, capacity_factor: float | None) -> int:
    """Slots per expert: ceil(cf · T·k / E); ``None`` means unlimited (no token is ever dropped)."""
    if capacity_factor is None:
        return tokens  # an expert is chosen at most once per token
    # a finite positive number: inf would overflow ceil(), a bool or a string is a slip
    if (isinstance(capacity_factor, bool) or not isinstance(capacity_factor, numbers.Real)
            or not 0 < capacity_factor < math.inf):
        raise ValueError(f"capacity_factor must be > 0 and finite (or None for no limit), "
                         f"got {capacity_factor!r}")
    return math.ceil(capacity_factor * tokens * top_k / n_experts)


def route(x: torch.Tensor, router_weight: torch.Tensor, top_k: int, normalize: bool = True):
    """(expert index, gate) for each of the k choices of each token; also the full probabilities.

    x: (T, h); router_weight: (E, h).  Gates are the softmax probabilities of the chosen
    experts, renormalised to sum to 1 over the k choices when ``normalize`` (and k > 1).
    """
    logits = x @ router_weight.t()
    probs = torch.softmax(logits, dim=-1, dtype=torch.promote_types(x.dtype, torch.float32))
    probs = probs.to(x.dtype)
    gates, experts = probs.topk(top_k, dim=-1)  # (T, k) each, best choice first
    if normalize and top_k > 1:
        gates = gates / gates.sum(dim=-1, keepdim=True)
    return experts, gates, probs


def queue_position(experts: torch.Tensor, n_experts: int) -> torch.Tensor:
    """(T, k): each assignment's place in its expert's queue (0 = served first).

    Places are handed out choice by choice (every first choice before any second choice), token
    by token within a choice: the priority GShard uses.
    """
    choice_major = experts.t().reshape(-1)  # (k·T,) in priority order
    one_hot = F.one_hot(choice_major, n_experts)
    position = (one_hot.cumsum(dim=0) * one_hot).sum(dim=-1) - 1
    return position.view(experts.shape[1], experts.shape[0]).t()


def within_capacity(experts: torch.Tensor, n_experts: int, capacity: int) -> torch.Tensor:
    """(T, k) bool: which assignments fit in their expert's ``capacity`` slots (``queue_position``)."""
    return queue_position(experts, n_experts) < capacity


def load_balancing_loss(experts: torch.Tensor, probs: torch.Tensor) -> torch.Tensor:
    """Switch Transformer's auxiliary loss E · Σ_e f_e · P_e (1 when perfectly balanced).

    f_e: fraction of tokens whose first choice is e; P_e: mean router probability of e.
    """
    n_experts = probs.shape[-1]
    f = torch.bincount(experts[:, 0], minlength=n_experts).to(probs.dtype) / experts.shape[0]
    return n_experts * (f * probs.mean(dim=0)).sum()


def moe_reference(x, router_weight, experts: nn.ModuleList, top_k: int,
                  capacity_factor: float | None = None, normalize: bool = True):
    """y = Σ_choices gate · expert(x) over the kept assignments; returns (y, stats).

    x: (T, h).  stats: capacity, assigned and kept assignments per expert, dropped count, aux loss.
    """
    n_experts = len(experts)
    idx, gates, probs = route(x, router_weight, top_k, normalize)
    capacity = expert_capacity(x.shape[0], n_experts, top_k, capacity_factor)
    kept = within_capacity(idx, n_experts, capacity)
    y = torch.zeros_like(x)
    for e, expert in enumerate(experts):
        token, choice = ((idx == e) & kept).nonzero(as_tuple=True)
        if token.numel():
            y = y.index_add(0, token, gates[token, choice].unsqueeze(-1) * expert(x[token]))
    stats = {"capacity": capacity,
             "assigned": torch.bincount(idx.reshape(-1), minlength=n_experts).tolist(),
             "kept": torch.bincount(idx[kept], minlength=n_experts).tolist(),
             "dropped": int((~kept).sum()),
             "aux_loss": load_balancing_loss(idx, probs)}
    return y, stats


class MoE(nn.Module):
    """Mixture-of-experts MLP: router (E x h, no bias) + E copies of the course's ``MLP``.

    ``forward(x)`` takes any (..., h) tensor, treats every position as a token, and leaves the
    statistics of the call (capacity, per-expert load, drops, aux loss) in ``self.last_stats``.
    """

    def __init__(self, d_model: int, d_ff: int, n_experts: int, top_k: int = 2,
                 capacity_factor: float | None = None, normalize: bool = True):
        super().__init__()
        for name, value in (("d_model", d_model), ("d_ff", d_ff), ("n_experts", n_experts),
                            ("top_k", top_k)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"MoE {name} must be a positive integer, got {value!r}")
        if top_k > n_experts:
            raise ValueError(f"top_k={top_k} cannot exceed n_experts={n_experts}")
        expert_capacity(1, n_experts, top_k, capacity_factor)  # validates the factor
        self.top_k, self.capacity_factor, self.normalize = top_k, capacity_factor, normalize
        self.router = nn.Linear(d_model, n_experts, bias=False)
        self.experts = nn.ModuleList(MLP(d_model, d_ff) for _ in range(n_experts))
        self.last_stats: dict = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.router.in_features:
            raise ValueError(f"MoE expects last dimension {self.router.in_features}, got {x.shape[-1]}")
        y, self.last_stats = moe_reference(x.reshape(-1, x.shape[-1]), self.router.weight,
                                           self.experts, self.top_k, self.capacity_factor,
                                           self.normalize)
        return y.view(x.shape)


def _sampled_drops(tokens: int, n_experts: int, top_k: int, capacity: int, trials: int,
                   seed: int) -> torch.Tensor:
    """Dropped assignments in ``trials`` independent batches of uniformly random routing.

    Each of the T tokens picks a uniformly random k-subset of the E experts; the loads are drawn
    expert by expert without drawing the tokens one by one: a token with r choices still to
    place among the E' experts not yet visited picks the next one with probability r/E'.  That
    is the exact joint law of the loads, whose sum is always T·k (the queues are *not*
    independent), and each expert drops max(0, load − C), as ``within_capacity`` does.
    """
    g = torch.Generator().manual_seed(seed)
    waiting = torch.zeros(trials, top_k + 1, dtype=torch.float64)  # tokens by choices left
    waiting[:, top_k] = tokens
    left = torch.arange(top_k + 1, dtype=torch.float64)
    drops = torch.zeros(trials, dtype=torch.float64)
    for remaining in range(n_experts, 0, -1):
        # r > E' cannot happen (no token is waiting there): clamp only keeps torch's law valid
        chance = (left / remaining).clamp(max=1.0).expand_as(waiting)
        picked = torch.binomial(waiting, chance, generator=g)
        waiting = waiting - picked
        waiting[:, :-1] += picked[:, 1:]
        drops += (picked.sum(dim=1) - capacity).clamp(min=0)
    return drops


def predicted_drops(tokens: int, n_experts: int, top_k: int, capacity_factor: float,
                    ranks: int = 1, trials: int = 4000, seed: int = 0) -> tuple:
    """(mean, sd) of the assignments dropped on ``ranks`` ranks of ``tokens`` tokens each, when
    every token picks k distinct experts uniformly at random (capacity counted per rank).

    Mean, exact: each expert's load is Binomial(T, k/E), so E[drops] = E · E[max(0, N − C)] per
    rank, by linearity, whatever the correlations.  Sd: the loads of one rank sum to T·k, so
    they are anti-correlated and the variance is *not* E times one queue's; it comes from a
    seeded Monte Carlo of the exact joint law (``trials`` batches), times √ranks (ranks are
    independent).  It is 0 when every expert overflows in every batch (c_f well below 1) or
    none ever does.
    """
    if not 1 <= top_k <= n_experts:
        raise ValueError(f"need 1 <= top_k <= n_experts, got top_k={top_k}, n_experts={n_experts}")
    for name, value in (("ranks", ranks), ("trials", trials)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    capacity = expert_capacity(tokens, n_experts, top_k, capacity_factor)
    p = top_k / n_experts
    if p >= 1:  # every token picks every expert: loads are exactly T
        return float(ranks * n_experts * max(0, tokens - capacity)), 0.0
    log_pmf = lambda j: (math.lgamma(tokens + 1) - math.lgamma(j + 1) - math.lgamma(tokens - j + 1)
                         + j * math.log(p) + (tokens - j) * math.log1p(-p))
    mean = n_experts * sum(math.exp(log_pmf(j)) * (j - capacity)  # log space: no overflow
                           for j in range(capacity + 1, tokens + 1))
    sd = _sampled_drops(tokens, n_experts, top_k, capacity, trials, seed).std().item()
    return ranks * mean, math.sqrt(ranks) * sd


def drops_agree(measured: int, mean: float, sd: float) -> bool:
    """Measured drops within 3 sd of the prediction, plus half a count: the measurement is an
    integer, so where the sd is 0 it must be the integer nearest the mean."""
    return abs(measured - mean) <= 3 * sd + 0.5
