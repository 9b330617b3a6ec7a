"""How one GPU runs its experts: four ways a MoE layer's routed rows can reach the expert GEMMs.

One expert-parallel rank holds ``local`` of the E experts (SwiGLU, stacked as a grouped MLP stacks
them, each matrix stored output by input as ``nn.Linear`` stores it: ``w_in`` (local, 2f, h),
``w_out`` (local, h, f); a grouped GEMM takes them transposed, column-major) and routes its own T
tokens over all E.  The dispatch all-to-all is not run here: with balanced routing a rank receives
as many rows as it sends, so the rows addressed to expert e stand in for those its local expert
``e mod local`` would receive (``local_expert``).  Each local expert then sees T k / local rows on
average, the shapes of a real EP rank, on one device.  What differs between the paths is only how
the rows reach the GEMMs:

* ``"grouped"``: one grouped GEMM per matrix (``torch._grouped_mm``), the group boundaries a device
  tensor: no host synchronisation, dropless (what a device-initiated grouped GEMM and DeepEP's
  dispatch aim at).
* ``"grouped_sync"``: the same kernels, but each expert's row count is first copied to the host, as
  a dropless all-to-all dispatcher must to size its buffers (Megatron-Core's ``alltoall``
  dispatcher turns its splits into Python lists): the GPU drains, then waits for the host.
* ``"loop_sync"``: the counts on the host, then one GEMM per expert over its slice (Megatron-Core's
  sequential MLP; Transformer Engine's grouped linear also takes its splits as a host list).
* ``"capacity"``: each expert gets C = ceil(cf T k / E) slots (GShard, Switch: token dropping);
  rows past them are dropped, empty slots computed as zeros; one batched GEMM per matrix, every
  shape fixed ahead, no synchronisation.

``expert_reference`` computes the same layer token by token; the tests hold every path to it.
``playground.bench.moe`` times them.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["PATHS", "RoutedExperts", "expert_reference", "local_expert"]

PATHS = ("grouped", "grouped_sync", "loop_sync", "capacity")


def local_expert(experts: torch.Tensor, local: int) -> torch.Tensor:
    """The local expert standing in for each routed expert: ``e mod local`` (see the module)."""
    return experts % local


def _route(x, router_weight, top_k):
    """(local expert index, gate) per (token, choice): softmax in fp32, top-k, gates renormalised."""
    probs = torch.softmax((x @ router_weight.t()).float(), dim=-1)
    gates, experts = probs.topk(top_k, dim=-1)
    return experts, (gates / gates.sum(dim=-1, keepdim=True)).to(x.dtype)


def _swiglu(h):
    gate, up = h.chunk(2, dim=-1)
    return F.silu(gate) * up


class RoutedExperts(nn.Module):
    """The routed experts of one MoE layer on one EP rank, run by ``path`` (one of ``PATHS``)."""

    def __init__(self, hidden: int, width: int, experts: int, local: int, top_k: int, path: str = "grouped",
                 capacity_factor: float = 1.0, device=None, dtype=torch.bfloat16):
        super().__init__()
        if path not in PATHS:
            raise ValueError(f"path must be one of {', '.join(PATHS)}; got {path!r}")
        if not 1 <= local <= experts or experts % local:
            raise ValueError(f"local experts must divide the {experts} experts; got {local}")
        if not 1 <= top_k <= experts:
            raise ValueError(f"top_k must be in [1, {experts}]; got {top_k}")
        if not capacity_factor > 0:
            raise ValueError(f"capacity_factor must be > 0; got {capacity_factor}")
        self.experts, self.local, self.top_k, self.path = experts, local, top_k, path
        self.capacity_factor = capacity_factor
        g = torch.Generator().manual_seed(0)
        init = lambda *shape, fan_in: (torch.randn(*shape, generator=g) / math.sqrt(fan_in)).to(device, dtype)  # noqa: E731
        self.router = nn.Parameter(init(experts, hidden, fan_in=hidden))
        self.w_in = nn.Parameter(init(local, 2 * width, hidden, fan_in=hidden))
        self.w_out = nn.Parameter(init(local, hidden, width, fan_in=width))
        self.last_counts: list[int] | None = None   # per local expert, when the path brought them to the host

    def capacity(self, tokens: int) -> int:
        """Slots per local expert on the ``"capacity"`` path: ceil(cf T k / local)."""
        return math.ceil(self.capacity_factor * tokens * self.top_k / self.local)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        experts, gates = _route(x, self.router, self.top_k)
        flat = local_expert(experts, self.local).reshape(-1)
        order = torch.argsort(flat, stable=True)        # the permutation: rows grouped by expert
        token = order // self.top_k
        rows = x[token]
        # rows per local expert, counted on the device without a sync (bincount sizes its output on the host)
        counts = torch.zeros(self.local, dtype=torch.long, device=x.device).scatter_add_(0, flat, torch.ones_like(flat))
        if self.path == "capacity":
            out, kept = self._capacity(rows, flat[order], counts, x.shape[0])
            weight = gates.reshape(-1)[order] * kept
        else:
            out, weight = self._dropless(rows, counts), gates.reshape(-1)[order]
        return torch.zeros_like(x).index_add(0, token, out * weight.unsqueeze(-1))   # unpermute and combine

    def _dropless(self, rows, counts):
        w_in, w_out = self.w_in.transpose(-2, -1), self.w_out.transpose(-2, -1)
        if self.path != "grouped":
            self.last_counts = counts.tolist()           # the host waits for the device here
        if self.path == "loop_sync":
            pieces = rows.split(self.last_counts)
            return torch.cat([_swiglu(p @ w_in[e]) @ w_out[e] for e, p in enumerate(pieces)])
        offsets = torch.cumsum(counts, 0, dtype=torch.int32)
        return torch._grouped_mm(_swiglu(torch._grouped_mm(rows, w_in, offs=offsets)), w_out, offs=offsets)

    def _capacity(self, rows, expert_of_row, counts, tokens):
        """Rows past an expert's C slots go to a spare slot C, computed and then weighted by zero."""
        slots = self.capacity(tokens)
        start = torch.cumsum(counts, 0) - counts
        position = torch.arange(rows.shape[0], device=rows.device) - start[expert_of_row]
        kept = (position < slots).to(rows.dtype)
        slot = position.clamp(max=slots)
        buffer = rows.new_zeros(self.local, slots + 1, rows.shape[1])
        buffer = buffer.index_put((expert_of_row, slot), rows * kept.unsqueeze(-1), accumulate=True)
        out = torch.bmm(_swiglu(torch.bmm(buffer, self.w_in.transpose(-2, -1))), self.w_out.transpose(-2, -1))
        return out[expert_of_row, slot], kept


def expert_reference(layer: RoutedExperts, x: torch.Tensor) -> torch.Tensor:
    """The same layer token by token in fp32: each token's k choices, each through its local expert,
    mixed by the gates; on the capacity path only the first C rows of each expert (token order) count."""
    experts, gates = _route(x, layer.router, layer.top_k)
    local = local_expert(experts, layer.local)
    seen = [0] * layer.local
    slots = layer.capacity(x.shape[0]) if layer.path == "capacity" else None
    w_in, w_out = layer.w_in.float().transpose(-2, -1), layer.w_out.float().transpose(-2, -1)
    y = torch.zeros_like(x, dtype=torch.float32)
    for t in range(x.shape[0]):
        for j in range(layer.top_k):
            e = int(local[t, j])
            seen[e] += 1
            if slots is not None and seen[e] > slots:
                continue
            y[t] += gates[t, j].float() * (_swiglu(x[t].float() @ w_in[e]) @ w_out[e])
    return y.to(x.dtype)
