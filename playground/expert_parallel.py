"""Expert parallelism: the experts of a mixture-of-experts layer spread over the ranks of a group.

With E experts on n ranks, rank r owns experts r·E/n … (r+1)·E/n − 1; the router is replicated.
Every rank routes its own T tokens (same rule and capacity as ``playground.moe``), then:

1. exchange how many rows each rank will send to each expert (a tiny all-to-all of E counts),
2. **dispatch**: one ``all_to_all_single`` with uneven split sizes moves each kept (token,
   choice) row to the rank that owns its expert,
3. each rank runs its local experts on the rows it received,
4. **combine**: the reverse all-to-all brings the outputs home, where they are mixed with the gates.

Backward is the same two all-to-alls run in reverse (``_AllToAll`` below).  The capacity is per
rank, as in GShard: an expert accepts at most C = ceil(cf · T·k / E) rows *from each rank*.
"""

from __future__ import annotations

import copy

import torch
import torch.distributed as dist
from torch import nn

from playground import comm
from playground.launch import cli, device
from playground.moe import MoE, expert_capacity, route, within_capacity

__all__ = ["ExpertParallelMoE", "expert_placement", "all_to_all", "predicted_bytes", "check_expert_parallel",
           "drop_sweep", "check_all_to_all", "map_rows"]


def _group_info(group):
    if not dist.is_initialized():
        return 0, 1
    return dist.get_rank(group), dist.get_world_size(group)


def expert_placement(n_experts: int, world_size: int, rank: int) -> range:
    """The experts rank ``rank`` owns: a contiguous E/n of them."""
    if n_experts % world_size:
        raise ValueError(f"{n_experts} experts do not split evenly over {world_size} ranks; "
                         f"use a multiple of {world_size} experts")
    local = n_experts // world_size
    return range(rank * local, (rank + 1) * local)


class _AllToAll(torch.autograd.Function):
    """Rows out by ``send_splits``, rows in by ``recv_splits``; backward swaps the two."""

    @staticmethod
    def forward(ctx, x, send_splits, recv_splits, group):
        ctx.splits, ctx.group = (send_splits, recv_splits), group
        out = x.new_empty((sum(recv_splits),) + tuple(x.shape[1:]))
        dist.all_to_all_single(out, x.contiguous(), recv_splits, send_splits, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        send_splits, recv_splits = ctx.splits
        grad_in = grad.new_empty((sum(send_splits),) + tuple(grad.shape[1:]))
        dist.all_to_all_single(grad_in, grad.contiguous(), send_splits, recv_splits, group=ctx.group)
        return grad_in, None, None, None


def all_to_all(x: torch.Tensor, send_splits: list[int], recv_splits: list[int], group=None):
    """Differentiable all-to-all of the rows of ``x``: ``send_splits[j]`` rows go to rank j."""
    if not dist.is_initialized():
        return x
    return _AllToAll.apply(x, list(send_splits), list(recv_splits), group)


class ExpertParallelMoE(nn.Module):
    """This rank's part of ``moe``: the replicated router and the experts this rank owns."""

    def __init__(self, moe: MoE, group=None):
        super().__init__()
        rank, n = _group_info(group)
        n_experts = len(moe.experts)
        owned = expert_placement(n_experts, n, rank)
        self.group, self.rank, self.world_size = group, rank, n
        self.n_experts, self.local = n_experts, len(owned)
        self.top_k, self.capacity_factor, self.normalize = moe.top_k, moe.capacity_factor, moe.normalize
        self.router = copy.deepcopy(moe.router)
        self.experts = nn.ModuleList(copy.deepcopy(moe.experts[e]) for e in owned)
        self.last_stats: dict = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.router.in_features:
            raise ValueError(f"expects last dimension {self.router.in_features}, got {x.shape[-1]}")
        xf = x.reshape(-1, x.shape[-1])
        n, local, group = self.world_size, self.local, self.group
        idx, gates, _ = route(xf, self.router.weight, self.top_k, self.normalize)
        capacity = expert_capacity(xf.shape[0], self.n_experts, self.top_k, self.capacity_factor)
        kept = within_capacity(idx, self.n_experts, capacity)
        token, choice = kept.nonzero(as_tuple=True)
        expert = idx[token, choice]
        order = torch.argsort(expert, stable=True)  # rows grouped by expert, hence by owner rank
        token, choice, expert = token[order], choice[order], expert[order]
        per_expert = torch.bincount(expert, minlength=self.n_experts)
        send_splits = per_expert.view(n, local).sum(dim=1).tolist()
        # 1. counts: row [source rank, local expert] of what this rank is about to receive
        incoming = torch.empty_like(per_expert)
        if n > 1:
            dist.all_to_all_single(incoming, per_expert, group=group)
        else:
            incoming = per_expert
        incoming = incoming.view(n, local)
        recv_splits = incoming.sum(dim=1).tolist()
        # 2. dispatch
        rows = all_to_all(xf[token], send_splits, recv_splits, group)
        # 3. local experts; received rows come source by source, expert by expert within a source
        owner = torch.arange(local, device=x.device).repeat(n).repeat_interleave(incoming.reshape(-1))
        out = torch.zeros_like(rows)
        for e, expert_mlp in enumerate(self.experts):
            # run every expert, even on zero rows: its (empty) output keeps ``out`` in the
            # autograd graph, so this rank joins both backward all-to-alls like its peers
            # (a rank that skipped them would leave the others waiting forever)
            mine = (owner == e).nonzero(as_tuple=True)[0]
            out = out.index_add(0, mine, expert_mlp(rows[mine]))
        # 4. combine
        back = all_to_all(out, recv_splits, send_splits, group)
        y = torch.zeros_like(xf).index_add(0, token, gates[token, choice].unsqueeze(-1) * back)
        self.last_stats = {
            "capacity": capacity, "tokens": xf.shape[0],
            "assigned": torch.bincount(idx.reshape(-1), minlength=self.n_experts).tolist(),
            "kept": per_expert.tolist(), "dropped": int((~kept).sum()),
            "send_rows": send_splits, "recv_rows": recv_splits,
            "received_per_expert": incoming.sum(dim=0).tolist()}
        return y.view(x.shape)

    def reduce_replicated_grads(self) -> None:
        """Sum the router's gradient over the group: it is replicated, its tokens are not."""
        if self.world_size > 1 and self.router.weight.grad is not None:
            dist.all_reduce(self.router.weight.grad, group=self.group)


# ----------------------------------------------------------------------------- formulas
def predicted_bytes(tokens: int, d_model: int, top_k: int, n_experts: int,
                    dtype: torch.dtype = torch.float32, dropped: int = 0,
                    received: int | None = None) -> dict:
    """All-to-all payload one rank hands in per MoE layer (``comm.count`` convention).

    Forward: E int64 counts; dispatch hands in the A_out = T·k − dropped kept rows (h elements
    each); combine hands back the A_in rows this rank's experts received (``received``; A_out
    when routing is balanced).  Backward: the same two row all-to-alls, reversed.  The slice a
    rank addresses to itself never leaves it: with balanced routing (n−1)/n crosses the network.
    """
    row = d_model * torch.empty((), dtype=dtype).element_size()
    rows_out = tokens * top_k - dropped
    rows_in = rows_out if received is None else received
    both = (rows_out + rows_in) * row
    return {"dispatch": rows_out * row, "combine": rows_in * row,
            "forward": n_experts * 8 + both, "backward": both, "step": n_experts * 8 + 2 * both}


# ----------------------------------------------------------------------------- the demos
def _case_moe(case):
    dtype = getattr(torch, case.get("dtype", "float64"))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(case.get("seed", 0))
        moe = MoE(case["d_model"], case["d_ff"], case["n_experts"], case["top_k"],
                  case.get("capacity_factor"))
    return moe.to(dtype)


def _case_tokens(case, world_size, dtype):
    g = torch.Generator().manual_seed(1000 + case.get("seed", 0))
    shape = (world_size * case["tokens"], case["d_model"])
    return (torch.randn(shape, generator=g, dtype=torch.float64).to(dtype),
            torch.randn(shape, generator=g, dtype=torch.float64).to(dtype))


def _close_16bit(got, want, msg):
    """16-bit: sums over tokens that cancel leave single elements a few % off; tolerate
    2 % of the tensor's largest magnitude (a wrong route or a lost reduction is off by ~100 %)."""
    scale = want.abs().max().item() if want.numel() else 0.0
    torch.testing.assert_close(got, want, atol=2e-2 * scale + 1e-6, rtol=2e-2, msg=msg)


def check_expert_parallel(rank: int, world_size: int, cases=None) -> list[dict]:
    """For each case: expert-parallel forward/backward vs the single-process MoE.

    case: tokens (per rank), d_model, d_ff, n_experts, top_k, capacity_factor (None = no drops),
    dtype, seed.  The reference runs the same MoE on each rank's tokens (capacity is per rank);
    with no capacity it is also the MoE on the whole batch at once.  Asserts (``assert_close``)
    equal outputs, input gradients, gradients of the experts this rank owns and of the router.
    Returns per case the routing statistics and the bytes counted forward and backward.
    """
    cases = cases or [dict(tokens=32, d_model=16, d_ff=32, n_experts=2 * world_size, top_k=2,
                           capacity_factor=None, dtype="float64", seed=0)]
    dev, results = device(), []
    for case in cases:
        moe = _case_moe(case).to(dev)
        dtype = moe.router.weight.dtype
        x, w = (t.to(dev) for t in _case_tokens(case, world_size, dtype))
        layer = ExpertParallelMoE(moe)
        # reference: every rank's tokens through the whole MoE, rank by rank
        x_ref = x.clone().requires_grad_()
        y_ref = torch.cat([moe(chunk) for chunk in x_ref.chunk(world_size)])
        if case.get("capacity_factor") is None:  # no capacity: one big batch is the same thing
            torch.testing.assert_close(y_ref, moe(x_ref))
        (y_ref * w).sum().backward()
        mine = x.chunk(world_size)[rank].clone().requires_grad_()
        with comm.count() as fwd:
            y = layer(mine)
        with comm.count() as bwd:
            (y * w.chunk(world_size)[rank]).sum().backward()
        layer.reduce_replicated_grads()
        close = _close_16bit if torch.finfo(dtype).bits <= 16 else torch.testing.assert_close
        close(y, y_ref.detach().chunk(world_size)[rank], msg=lambda m: f"output: {m}")
        close(mine.grad, x_ref.grad.chunk(world_size)[rank], msg=lambda m: f"input grad: {m}")
        close(layer.router.weight.grad, moe.router.weight.grad, msg=lambda m: f"router grad: {m}")
        first = rank * layer.local
        for e, expert_mlp in enumerate(layer.experts):
            for (name, p), p_ref in zip(expert_mlp.named_parameters(), moe.experts[first + e].parameters()):
                if p_ref.grad is None:  # an expert no token reached has no gradient anywhere
                    assert p.grad is None or not p.grad.any(), f"expert {first + e} {name}"
                    continue
                close(p.grad, p_ref.grad,
                      msg=lambda m, e=first + e, name=name: f"expert {e} {name}: {m}")
        results.append({**case, **layer.last_stats, "forward": fwd.summary(),
                        "backward": bwd.summary()})
    return results


def drop_sweep(rank: int, world_size: int, tokens: int, d_model: int, n_experts: int,
               top_k: int, capacity_factors, routers=("uniform", "skewed"), seed: int = 0) -> dict:
    """Forward passes of one expert-parallel layer at several capacity factors: who got dropped.

    Returns {router: [last_stats per capacity factor]}.  The router's rows are orthonormal and
    the tokens Gaussian, so the logits of a token are i.i.d. standard normal: with ``"uniform"``
    each token's k experts are a uniformly random k-subset (the model of
    ``playground.moe.predicted_drops``).  ``"skewed"`` shifts every token along the router rows
    so that expert e gets an extra logit from +0.5 (e = 0) down to −0.5 (e = E−1): a stand-in
    for a router that learned favourites.
    """
    unknown = set(routers) - {"uniform", "skewed"}
    if unknown:
        raise ValueError(f"routers must be 'uniform' or 'skewed', got {sorted(unknown)}")
    if n_experts > d_model:
        raise ValueError(f"orthonormal router rows need n_experts <= d_model, got {n_experts} > {d_model}")
    case = dict(tokens=tokens, d_model=d_model, d_ff=d_model, n_experts=n_experts, top_k=top_k,
                dtype="float32", seed=seed)
    moe = _case_moe(case)
    g = torch.Generator().manual_seed(seed)
    rows, _ = torch.linalg.qr(torch.randn(d_model, n_experts, generator=g))
    moe.router.weight.data.copy_(rows.t())
    moe = moe.to(device())
    tokens_here = _case_tokens(case, world_size, torch.float32)[0].chunk(world_size)[rank]
    out = {}
    with torch.no_grad():
        for router in routers:
            x = tokens_here
            if router == "skewed":
                x = x + torch.linspace(0.5, -0.5, n_experts) @ rows.t()
            x = x.to(device())
            out[router] = []
            for cf in capacity_factors:
                moe.capacity_factor = cf
                layer = ExpertParallelMoE(moe)
                layer(x)
                out[router].append({"capacity_factor": cf, **layer.last_stats})
    return out


def check_all_to_all(rank: int, world_size: int) -> bool:
    """``all_to_all`` equals PyTorch's differentiable ``all_to_all_single``: values and gradients."""
    from torch.distributed.nn.functional import all_to_all_single as torch_all_to_all
    send = [(rank + j) % 3 for j in range(world_size)]  # uneven, some empty
    recv = [(j + rank) % 3 for j in range(world_size)]  # rank j sends (j + rank) % 3 rows here
    x = torch.randn(sum(send), 5, dtype=torch.float64, device=device()).requires_grad_()
    x2 = x.detach().clone().requires_grad_()
    w = torch.randn(sum(recv), 5, dtype=torch.float64, device=device())
    mine = all_to_all(x, send, recv)
    theirs = torch_all_to_all(torch.empty_like(mine), x2, recv, send)
    (mine * w).sum().backward()
    (theirs * w).sum().backward()
    torch.testing.assert_close(mine, theirs)
    torch.testing.assert_close(x.grad, x2.grad)
    return True


def map_rows(measure: bool = False, world_size: int = 4) -> list[dict]:
    """The expert-parallel row of the systems map (``bytes_predicted``: the formula's value).

    ``bytes_measured`` is None unless ``measure=True``: then a real ``world_size``-rank run of one
    MoE layer (T=64 tokens per rank, h=32, E=2n, k=2, no drops, fp32) fills it with the
    all-to-all payload a rank handed in over one forward+backward (mean over ranks: which rank
    receives more rows depends on the routing, the mean does not).
    """
    case = dict(tokens=64, d_model=32, d_ff=64, n_experts=2 * world_size, top_k=2,
                capacity_factor=None, dtype="float32", seed=0)
    measured = None
    if measure:
        from playground.launch import run
        ranks = [v[0] for v in run(check_expert_parallel, world_size, [case], quiet=True)]
        measured = sum(r["forward"]["payload_bytes"]["all_to_all_single"]
                       + r["backward"]["payload_bytes"]["all_to_all_single"]
                       for r in ranks) // world_size
    formula = predicted_bytes(64, 32, 2, 2 * world_size)["step"]
    return [{
        "strategy": "EP (MoE)",
        "replicated": "router, attention and every non-expert weight",
        "sharded": "the experts (E/n per rank) and their optimizer state",
        "collective": "all-to-all (dispatch + combine; reversed in backward)",
        "bytes_per_step_formula": "all-to-all payload per MoE layer per rank (the 1/n a rank "
                                  "addresses to itself included): 2·(A_out + A_in)·h·e + 8E, "
                                  "A_out = T·k − dropped rows sent, A_in rows received "
                                  "(= A_out on average) "
                                  f"(our run: one layer, T=64, h=32, k=2, E={2 * world_size}, "
                                  f"n={world_size}, fp32, no drops)",
        "bytes_predicted": formula,
        "bytes_measured": measured,
        "link": "within a node preferred (all-to-all touches every rank of the group)",
        "buys": "parameters grow with E at constant FLOPs per token (each token sees k experts)",
        "cite": "lepikhin2020gshard; fedus2021switch",
    }]


def _report(values) -> None:
    r = values[0][0]
    pred = predicted_bytes(r["tokens"], r["d_model"], r["top_k"], r["n_experts"],
                           getattr(torch, r["dtype"]), r["dropped"], sum(r["recv_rows"]))
    print(f"expert-parallel MoE on {len(values)} ranks equals the single-process MoE "
          f"(outputs and gradients); all-to-all payload on rank 0 fwd/bwd: predicted "
          f"{pred['forward']}/{pred['backward']} B, measured "
          f"{r['forward']['payload_bytes']['all_to_all_single']}/"
          f"{r['backward']['payload_bytes']['all_to_all_single']} B")


if __name__ == "__main__":
    cli(check_expert_parallel, default_world_size=4, report=_report)
