"""Ring attention run for real: each rank's block against full attention, bytes and schedule.

``check_ring_attention`` is the rank function the chapter, tests and figures launch: it runs
``playground.systems_map.ring_attention`` on this rank's sequence block, forward and backward, asserts that
the output and the q, k, v gradients equal single-process attention, and returns the bytes moved,
the bytes kept for backward and the schedule the ring followed.  ``map_rows`` gives the
context-parallel row of the systems map.  ``layer_report`` and ``memory_report`` set the measurements beside the formulas for the chapter.
``python -m playground.systems_map.ring_attention_runs --nproc N`` runs the check and prints measured vs predicted bytes.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from playground import comm
from playground.launch import device, run
from playground.launch_cli import cli
from playground.memory import SavedActivations
from playground.systems_map.ring_attention import (attention_reference, predicted_blocks, predicted_bytes,
                                       predicted_naive_saved_bytes, predicted_saved_bytes,
                                       ring_attention, split_sequence)

__all__ = ["check_ring_attention", "check_demo_world_size", "map_rows", "report", "layer_report",
           "memory_report"]


def _make_qkv(batch, heads, seq_len, head_dim, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(batch, heads, seq_len, head_dim, generator=g, dtype=torch.float64).to(dtype)
            for _ in range(4)]  # q, k, v and the upstream gradient


DEMO_SEQ_LEN = 32  # the default case's sequence: one block of it per rank


def check_demo_world_size(world_size: int) -> None:
    """The command-line demo cuts a sequence of DEMO_SEQ_LEN tokens into one block per rank."""
    if DEMO_SEQ_LEN % world_size:
        raise ValueError(f"the demo's sequence of {DEMO_SEQ_LEN} tokens does not split evenly over "
                         f"{world_size} ranks: use a number of ranks that divides {DEMO_SEQ_LEN}")


def check_ring_attention(rank: int, world_size: int, cases=None, group_size: int | None = None):
    """For each case: ring attention on this rank's block vs full attention on one process.

    ``cases``: dicts with batch, heads, seq_len, head_dim, causal, dtype (name), seed.  Asserts
    equality of the output block and of the q, k, v gradient blocks (``assert_close``); returns,
    per case, the bytes moved forward/backward, the bytes saved for backward, and the schedule.
    ``group_size``: run independent rings over consecutive ranks of that size (a CP group inside
    a larger grid) instead of one ring over all ranks.
    """
    cases = cases or [dict(batch=2, heads=2, seq_len=DEMO_SEQ_LEN, head_dim=8, causal=True,
                           dtype="float64", seed=0)]
    group = None
    if group_size is not None:
        if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
            raise ValueError(f"group_size must be a positive integer, got {group_size!r}")
        if world_size % group_size:
            raise ValueError(f"group_size {group_size} does not divide world_size {world_size}")
        for first in range(0, world_size, group_size):  # every rank must create every group
            members = dist.new_group(list(range(first, first + group_size)))
            if first <= rank < first + group_size:
                group = members
        rank, world_size = rank % group_size, group_size
    dev, results = device(), []
    for case in cases:
        dtype = getattr(torch, case["dtype"])
        q, k, v, dout = (t.to(dev) for t in _make_qkv(case["batch"], case["heads"], case["seq_len"],
                                                       case["head_dim"], dtype, case["seed"]))
        # single-process ground truth on the full sequence (every rank can afford it here),
        # in float64: a 16-bit reference would be less exact than the ring (which accumulates
        # in fp32), so compare both against the exact answer rounded to the case's dtype
        full = [t.to(torch.float64, copy=True).requires_grad_() for t in (q, k, v)]
        ref = attention_reference(*full, causal=case["causal"])
        ref.backward(dout.double())
        mine = [split_sequence(t, rank, world_size).requires_grad_() for t in (q, k, v)]
        schedule: list = []
        saved = SavedActivations()  # what this layer keeps for backward: q, k, v, out, lse
        with comm.count() as fwd, saved:
            out = ring_attention(*mine, causal=case["causal"], group=group, schedule=schedule)
        with comm.count() as bwd:
            out.backward(split_sequence(dout, rank, world_size))
        # 16-bit: a few units in the last place of the result (bf16 has 8 bits of mantissa)
        tol = dict(atol=2e-2, rtol=2e-2) if torch.finfo(dtype).bits <= 16 else {}
        torch.testing.assert_close(out, split_sequence(ref.detach().to(dtype), rank, world_size),
                                   **tol)
        for name, t, ref_t in zip("qkv", mine, full):
            torch.testing.assert_close(t.grad, split_sequence(ref_t.grad.to(dtype), rank, world_size),
                                       **tol, msg=lambda m, name=name: f"grad of {name}: {m}")
        # PyTorch's own single-process attention agrees with the reference too
        sdpa = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=case["causal"])
        torch.testing.assert_close(ref.detach().to(dtype), sdpa, **tol)
        results.append({**case, "forward": fwd.summary(), "backward": bwd.summary(),
                        "saved_bytes": saved.bytes, "schedule": schedule,
                        "computed_blocks": sum(s["kind"] != "skipped" for s in schedule)})
    return results


def _shape(case: dict) -> tuple:
    return case["batch"], case["heads"], case["seq_len"], case["head_dim"]


def layer_report(ranks: list[dict]) -> tuple[str, bool]:
    """Per rank: bytes sent forward and backward, bytes kept for backward and score tiles
    computed, then the formulas' row (bytes sent, bytes kept, tiles).  ``ranks``:
    one case of ``check_ring_attention``, rank by rank.  Returns (table, every count equal)."""
    n, case = len(ranks), ranks[0]
    dtype = getattr(torch, case["dtype"])
    sent = predicted_bytes(*_shape(case), n, dtype)
    kept = predicted_saved_bytes(*_shape(case), n, dtype)
    tiles = predicted_blocks(n, case["causal"])
    lines = ["rank | sent fwd (B) | sent bwd (B) | kept for bwd (B) | tiles computed"]
    for rank, got in enumerate(ranks):
        lines.append(f"{rank:>4} | {got['forward']['sent_bytes']:>12} | "
                     f"{got['backward']['sent_bytes']:>12} | {got['saved_bytes']:>16} | "
                     f"{got['computed_blocks']:>14}")
    lines.append(f"pred | {sent['forward']:>12} | {sent['backward']:>12} | {kept:>16} | "
                 f"{str(tiles):>14}")
    match = all(g["forward"]["sent_bytes"] == sent["forward"]
                and g["backward"]["sent_bytes"] == sent["backward"]
                and g["saved_bytes"] == kept and g["computed_blocks"] == tiles[r]
                for r, g in enumerate(ranks))
    lines.append(f"counted == formulas (bytes sent, bytes kept, tiles), every rank: {match}")
    return "\n".join(lines), match


def memory_report(case: dict, per_rank_saved: int, n: int) -> tuple[str, bool]:
    """Bytes kept for backward on this process by textbook attention on the whole sequence and
    by ring attention with a single block (n = 1, no process group), beside the formulas, and
    beside ``per_rank_saved``, what one of ``n`` ranks kept.  Returns (lines, all as predicted:
    each count equal to its formula, and the one-block ring keeping exactly n times a rank's)."""
    dtype = getattr(torch, case["dtype"])
    q, k, v = (t.requires_grad_() for t in _make_qkv(*_shape(case), dtype, case["seed"])[:3])
    naive, one_block = SavedActivations(), SavedActivations()
    with naive:
        attention_reference(q, k, v, causal=case["causal"])
    with one_block:
        ring_attention(q, k, v, causal=case["causal"])
    want = (predicted_naive_saved_bytes(*_shape(case), case["causal"], dtype),
            predicted_saved_bytes(*_shape(case), 1, dtype),
            predicted_saved_bytes(*_shape(case), n, dtype))
    got = (naive.bytes, one_block.bytes, per_rank_saved)
    lines = [f"{label:<36}: {g:>9} B   bytes-kept formula: {w}" for label, g, w in zip(
        ("textbook s x s attention, 1 process", "ring attention, n = 1",
         f"ring attention, per rank, n = {n}"), got, want)]
    ok = got == want and one_block.bytes == n * per_rank_saved
    lines.append(f"n = 1 / n = {n}: {one_block.bytes / per_rank_saved:.2f} (predicted {n}); "
                 f"textbook / ring per rank: {naive.bytes / per_rank_saved:.0f}x")
    return "\n".join(lines), ok


def map_rows(measure: bool = False, world_size: int = 4) -> list[dict]:
    """The context-parallel row of the systems map (``bytes_predicted``: the formula's value).

    ``bytes_measured`` is None unless ``measure=True``: then a real ``world_size``-rank run of one
    attention layer (b=1, a=4, s=64n, d=16, fp32) fills it with the bytes rank 0 sent in one
    forward+backward, to set beside the formula evaluated for the same shape.
    """
    # 64 positions per rank (s = 256 on 4 ranks): the sequence splits evenly on any n
    shape = dict(batch=1, heads=4, seq_len=64 * world_size, head_dim=16)
    measured = None
    if measure:
        case = dict(shape, causal=True, dtype="float32", seed=0)
        values = run(check_ring_attention, world_size, [case], quiet=True)
        r0 = values[0][0]
        measured = r0["forward"]["sent_bytes"] + r0["backward"]["sent_bytes"]
    formula = predicted_bytes(**shape, world_size=world_size)["step"]
    return [{
        "strategy": "CP (ring)",
        "replicated": "weights, optimizer state; gradients, reduced over the d·c ranks",
        "sharded": "the sequence: every activation (s/n per rank)",
        "collective": "ring send/recv of K, V (and dK, dV backward); gradients all-reduced "
                      "over DP × CP",
        "bytes_per_step_formula": "ring, per layer: fwd 2(n−1)·b·a·(s/n)·d_h·q, bwd the same "
                                  f"+ 2n·b·a·(s/n)·d_h·4 (one layer, s={shape['seq_len']}, fp32)",
        "bytes_predicted": formula,
        "bytes_measured": measured,
        "link": "NVLink or next node",
        "buys": "sequence length: activations per rank ∝ s/n",
        "cite": "liu2023ringattention",
    }]


def report(values) -> None:
    n = len(values)
    case = values[0][0]
    pred = predicted_bytes(case["batch"], case["heads"], case["seq_len"], case["head_dim"], n,
                           getattr(torch, case["dtype"]))
    sent = [(v[0]["forward"]["sent_bytes"], v[0]["backward"]["sent_bytes"]) for v in values]
    print(f"ring attention on {n} ranks equals full attention (outputs and q/k/v gradients); "
          f"bytes sent per rank fwd/bwd: predicted {pred['forward']}/{pred['backward']}, "
          f"measured {sorted(set(sent))}")


if __name__ == "__main__":
    cli(check_ring_attention, default_world_size=4, report=report, check=check_demo_world_size)
