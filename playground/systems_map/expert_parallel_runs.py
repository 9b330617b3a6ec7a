"""Expert parallelism run for real: the layer against the single-process MoE, drops, bytes.

``check_expert_parallel`` is the rank function the chapter and tests launch: it runs
``playground.systems_map.expert_parallel.ExpertParallelMoE`` forward and backward on this rank's tokens,
asserts that outputs and gradients equal the single-process ``playground.systems_map.moe.MoE``, and returns
the routing statistics and the all-to-all bytes.  ``drop_sweep`` measures who gets dropped at
several capacity factors, ``check_all_to_all`` holds our all-to-all against PyTorch's, and
``map_rows`` gives the expert-parallel row of the systems map.
``bytes_report`` and ``drop_report`` set those measurements beside the formulas for the chapter.
``python -m playground.systems_map.expert_parallel_runs --nproc N`` runs the check and prints measured vs predicted payload.
"""

from __future__ import annotations

import torch

from playground import comm
from playground.systems_map.expert_parallel import ExpertParallelMoE, all_to_all, predicted_bytes
from playground.launch import device, run
from playground.launch_cli import cli
from playground.systems_map.moe import MoE, drops_agree, expert_capacity, predicted_drops

__all__ = ["check_expert_parallel", "drop_sweep", "check_all_to_all", "map_rows", "report",
           "case_bytes", "bytes_report", "drop_report"]


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
        assert_layer_matches(layer, moe, y, y_ref, mine, x_ref, rank, world_size, dtype)
        results.append({**case, **layer.last_stats, "forward": fwd.summary(),
                        "backward": bwd.summary()})
    return results


def assert_layer_matches(layer, moe, y, y_ref, mine, x_ref, rank: int, world_size: int, dtype) -> None:
    """This rank's output and its input, router and expert gradients equal the one-process MoE's
    (16-bit dtypes to their rounding; an expert no token reached has no gradient anywhere)."""
    close = _close_16bit if torch.finfo(dtype).bits <= 16 else torch.testing.assert_close
    close(y, y_ref.detach().chunk(world_size)[rank], msg=lambda m: f"output: {m}")
    close(mine.grad, x_ref.grad.chunk(world_size)[rank], msg=lambda m: f"input grad: {m}")
    close(layer.router.weight.grad, moe.router.weight.grad, msg=lambda m: f"router grad: {m}")
    first = rank * layer.local
    for e, expert_mlp in enumerate(layer.experts):
        for (name, p), p_ref in zip(expert_mlp.named_parameters(), moe.experts[first + e].parameters()):
            if p_ref.grad is None:
                assert p.grad is None or not p.grad.any(), f"expert {first + e} {name}"
                continue
            close(p.grad, p_ref.grad, msg=lambda m, e=first + e, name=name: f"expert {e} {name}: {m}")


def drop_sweep(rank: int, world_size: int, tokens: int, d_model: int, n_experts: int,
               top_k: int, capacity_factors, routers=("uniform", "skewed"), seed: int = 0) -> dict:
    """Forward passes of one expert-parallel layer at several capacity factors: who got dropped.

    Returns {router: [last_stats per capacity factor]}.  The router's rows are orthonormal and
    the tokens Gaussian, so the logits of a token are i.i.d. standard normal: with ``"uniform"``
    each token's k experts are a uniformly random k-subset (the model of
    ``playground.systems_map.moe.predicted_drops``).  ``"skewed"`` shifts every token along the router rows
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


def case_bytes(case: dict, dropped: int = 0, received: int | None = None) -> dict:
    """``expert_parallel.predicted_bytes`` for a case dict (tokens, d_model, top_k, n_experts,
    dtype) of ``check_expert_parallel``."""
    return predicted_bytes(case["tokens"], case["d_model"], case["top_k"], case["n_experts"],
                           getattr(torch, case["dtype"]), dropped, received)


def bytes_report(ranks: list[dict]) -> tuple[str, bool]:
    """Per rank: rows sent and received, all-to-all payload forward and backward beside the
    ep-bytes formula, and the fraction of rows addressed to other ranks; then the mean over ranks
    beside the balanced prediction.  ``ranks``: one case of ``check_expert_parallel``, rank by
    rank.  Returns (table, every count equal to its formula)."""
    n = len(ranks)
    balanced = case_bytes(ranks[0])
    lines = ["all-to-all payload handed in, B; off-rank: fraction of rows sent to other ranks",
             "rank | rows out | rows in |   fwd | formula |   bwd | formula | off-rank"]
    match = True
    for rank, got in enumerate(ranks):
        pred = case_bytes(got, got["dropped"], sum(got["recv_rows"]))
        fwd = got["forward"]["payload_bytes"]["all_to_all_single"]
        bwd = got["backward"]["payload_bytes"]["all_to_all_single"]
        match &= fwd == pred["forward"] and bwd == pred["backward"]
        off = 1 - got["send_rows"][rank] / sum(got["send_rows"])
        lines.append(f"{rank:>4} | {sum(got['send_rows']):>8} | {sum(got['recv_rows']):>7} | "
                     f"{fwd:>5} | {pred['forward']:>7} | {bwd:>5} | {pred['backward']:>7} | "
                     f"{off:.2f}")
    mean_fwd = sum(g["forward"]["payload_bytes"]["all_to_all_single"] for g in ranks) / n
    match &= mean_fwd == balanced["forward"]
    lines.append(f"rows dispatched per rank b·s·k = {ranks[0]['tokens'] * ranks[0]['top_k']}; "
                 f"mean fwd payload {mean_fwd:.0f} B")
    lines.append(f"balanced prediction {balanced['forward']} B (bwd {balanced['backward']} B); "
                 f"off-rank {(n - 1) / n:.2f} if balanced")
    lines.append(f"counted == the ep-bytes formula on every rank, and on average: {match}")
    return "\n".join(lines), match


def drop_report(sweep: list[dict], tokens: int, n_experts: int, top_k: int,
                capacity_factors) -> tuple[str, bool]:
    """The drops of ``drop_sweep`` (one dict per rank) summed over the ranks, beside the
    ep-drops prediction for uniformly random routing (``moe.predicted_drops``, mean ± sd) with
    its verdict (``moe.drops_agree``), the skewed router's drops and the perfect-balance floor.
    Returns (table, every uniform count agrees)."""
    n = len(sweep)
    total = n * tokens * top_k
    lines = ["assignments dropped, all ranks; predicted: mean ± sd; floor: perfect balance",
             "  cf | cap | uniform        | predicted            | verdict | skewed       | floor"]
    ok, notes = True, []
    for i, cf in enumerate(capacity_factors):
        uniform = sum(v["uniform"][i]["dropped"] for v in sweep)
        skewed = sum(v["skewed"][i]["dropped"] for v in sweep)
        mean, sd = predicted_drops(tokens, n_experts, top_k, cf, ranks=n)
        agrees = drops_agree(uniform, mean, sd)
        ok &= agrees
        lines.append(f"{cf:4.2f} | {expert_capacity(tokens, n_experts, top_k, cf):>3} | "
                     f"{uniform:>5} ({100 * uniform / total:4.1f}%) | {mean:>6.1f} ± {sd:<4.1f} "
                     f"({100 * mean / total:4.1f}%) | {'agrees' if agrees else 'DIFFERS':>7} | "
                     f"{skewed:>4} ({100 * skewed / total:4.1f}%) | {100 * max(0, 1 - cf):4.1f}%")
        full = n * (tokens * top_k - n_experts * expert_capacity(tokens, n_experts, top_k, cf))
        if sd == 0 and full > 0 and round(mean) == full:  # every expert overflows, every time
            ok &= uniform == full
            notes.append(f"cf = {cf}, uniform router: every expert's cap slots full on every rank,\n"
                         f"so n(b·s·k - E·cap) = {full} must drop; counted {uniform}. Skewed router: "
                         f"{skewed},\nmore, because unpopular experts leave slots empty")
    return "\n".join(lines + notes), ok


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
        ranks = [v[0] for v in run(check_expert_parallel, world_size, [case], quiet=True)]
        measured = sum(r["forward"]["payload_bytes"]["all_to_all_single"]
                       + r["backward"]["payload_bytes"]["all_to_all_single"]
                       for r in ranks) // world_size
    formula = predicted_bytes(64, 32, 2, 2 * world_size)["step"]
    return [{
        "strategy": "EP (MoE)",
        "replicated": "router, attention, other non-expert weights; their gradients reduced "
                      "over the e·d ranks",
        "sharded": "the experts (E/n per rank) and their state; expert gradients reduced over "
                   "the ranks holding the same expert",
        "collective": "all-to-all: dispatch and combine, again backward; gradient reductions "
                      "as in the replicated column",
        "bytes_per_step_formula": "all-to-all payload per layer: 2(A_out + A_in)·h·q + 8E "
                                  f"(one layer, b·s = 64, E = {2 * world_size}, fp32)",
        "bytes_predicted": formula,
        "bytes_measured": measured,
        "link": "NVLink or network (DeepSeek-V3: 64-way over 8 nodes)",
        "buys": "parameters grow with E at the FLOPs of k experts per token",
        "cite": "lepikhin2020gshard; fedus2021switch",
    }]


def report(values) -> None:
    r = values[0][0]
    pred = case_bytes(r, r["dropped"], sum(r["recv_rows"]))
    print(f"expert-parallel MoE on {len(values)} ranks equals the single-process MoE "
          f"(outputs and gradients); all-to-all payload on rank 0 fwd/bwd: predicted "
          f"{pred['forward']}/{pred['backward']} B, measured "
          f"{r['forward']['payload_bytes']['all_to_all_single']}/"
          f"{r['backward']['payload_bytes']['all_to_all_single']} B")


if __name__ == "__main__":
    cli(check_expert_parallel, default_world_size=4, report=report)
