"""Three context-parallel attentions run for real, side by side: ring, all-gather, Ulysses.

``check_context_parallel`` is the rank function the chapter and tests launch: for each case it
runs ``ring_attention`` (contiguous blocks, K/V passed around a ring), ``all_gather_attention``
(Llama 3's: head-and-tail chunks, K/V all-gathered) and ``ulysses_attention`` (all-to-all to a
head shard and back) forward and backward, asserts that each output and each q, k, v gradient
equal single-process causal attention (itself checked against PyTorch's
``scaled_dot_product_attention``), and returns the bytes each moved.  ``bytes_report`` sets
them beside the formulas; ``shape_table`` evaluates the formulas for a large model.
``python -m playground.systems_map.cp_runs --nproc N`` runs the default case.
"""

from __future__ import annotations

import torch

from playground import comm
from playground.launch import device
from playground.launch_cli import cli
from playground.systems_map import all_gather_cp, ring_attention, ulysses
from playground.systems_map.all_gather_cp import all_gather_attention, load_balanced_split
from playground.systems_map.ring_attention import attention_reference, split_sequence
from playground.systems_map.ulysses import ulysses_attention

__all__ = ["check_context_parallel", "check_cases", "bytes_report", "shape_table", "ALGORITHMS",
           "predicted", "report"]

ALGORITHMS = ("ring", "all_gather", "ulysses")
DEFAULT_CASE = dict(batch=1, heads=4, kv_heads=4, seq_len=32, head_dim=8, dtype="float64", seed=0)


def _kv_heads(case):
    return case.get("kv_heads", case["heads"])


def _algorithms(case):
    """The ring of ``ring_attention`` is written for q, k, v of one shape: no GQA."""
    chosen = case.get("algorithms", ALGORITHMS)
    return [a for a in chosen if a != "ring" or _kv_heads(case) == case["heads"]]


def check_cases(cases, world_size: int) -> None:
    """Every size problem of every case, raised as one ValueError before any rank communicates."""
    for case in cases:
        unknown = set(case.get("algorithms", ALGORITHMS)) - set(ALGORITHMS)
        if unknown:
            raise ValueError(f"unknown CP algorithms {sorted(unknown)}; choose from {ALGORITHMS}")
        if case["seq_len"] % world_size:
            raise ValueError(f"seq_len {case['seq_len']} does not split evenly over {world_size} ranks")
        if case["heads"] % _kv_heads(case):
            raise ValueError(f"{case['heads']} query heads do not share {_kv_heads(case)} "
                             "key/value heads evenly")
        if "all_gather" in _algorithms(case):
            all_gather_cp.check_chunks(case["seq_len"], world_size)
        if "ulysses" in _algorithms(case):
            ulysses.check_heads(case["heads"], _kv_heads(case), world_size)


def _reference(q, k, v):
    """Single-process causal attention in fp64, key/value heads repeated for GQA."""
    g = q.shape[1] // k.shape[1]
    return attention_reference(q, k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1))


def _inputs(case, dev):
    g = torch.Generator().manual_seed(case["seed"])
    dtype = getattr(torch, case["dtype"])
    shape = lambda h: (case["batch"], h, case["seq_len"], case["head_dim"])  # noqa: E731
    q, k, v, dout = (torch.randn(shape(h), generator=g, dtype=torch.float64).to(dtype).to(dev)
                     for h in (case["heads"], _kv_heads(case), _kv_heads(case), case["heads"]))
    return q, k, v, dout


def check_context_parallel(rank: int, world_size: int, cases=None) -> list[dict]:
    """For each case and each algorithm: this rank's output and q, k, v gradients equal the
    matching positions of single-process causal attention (``assert_close``).  Returns per case
    {algorithm: {"forward", "backward": comm summaries, "tiles": score tiles computed or None}}.
    """
    cases = cases or [DEFAULT_CASE]
    check_cases(cases, world_size)  # every rank refuses, before any of them sends a byte
    dev, results = device(), []
    for case in cases:
        q, k, v, dout = _inputs(case, dev)
        dtype = q.dtype
        full = [t.to(torch.float64, copy=True).requires_grad_() for t in (q, k, v)]
        ref = _reference(*full)
        ref.backward(dout.double())
        sdpa = torch.nn.functional.scaled_dot_product_attention(
            *full, is_causal=True, enable_gqa=_kv_heads(case) != case["heads"])
        torch.testing.assert_close(ref, sdpa)  # PyTorch's own attention agrees with the reference
        tol = dict(atol=2e-2, rtol=2e-2) if torch.finfo(dtype).bits <= 16 else {}
        out = {}
        for algorithm in _algorithms(case):
            if algorithm == "all_gather":
                cut = lambda t: load_balanced_split(t, rank, world_size)  # noqa: E731
            else:
                cut = lambda t: split_sequence(t, rank, world_size)  # noqa: E731
            mine = [cut(t).requires_grad_() for t in (q, k, v)]
            work: list = []
            with comm.count() as fwd:
                if algorithm == "ring":
                    o = ring_attention.ring_attention(*mine, causal=True, schedule=work)
                elif algorithm == "all_gather":
                    o = all_gather_attention(*mine, work=work)
                else:
                    o = ulysses_attention(*mine)
            with comm.count() as bwd:
                o.backward(cut(dout))
            where = lambda m, a=algorithm, w="output": f"{a} {w}: {m}"  # noqa: E731
            torch.testing.assert_close(o, cut(ref.detach()).to(dtype), **tol, msg=where)
            for name, t, ref_t in zip("qkv", mine, full):
                torch.testing.assert_close(t.grad, cut(ref_t.grad).to(dtype), **tol,
                                           msg=lambda m, a=algorithm, name=name: f"{a} grad {name}: {m}")
            # score work in tiles of c x c, c = s/(2n): a ring tile of (s/n) x (s/n) is 4 of them
            tiles = {"ring": lambda: 4 * sum(s["kind"] != "skipped" for s in work),
                     "all_gather": lambda: sum(work), "ulysses": lambda: None}[algorithm]()
            out[algorithm] = {"forward": fwd.summary(), "backward": bwd.summary(), "tiles": tiles}
        results.append(out)
    return results


# ----------------------------------------------------------------------------- formulas vs counts
def predicted(algorithm: str, case: dict, world_size: int) -> dict:
    """The formula of ``algorithm`` for ``case``: payload (what the counter records) and wire
    bytes sent per rank, forward and backward.  The ring is point-to-point: payload = wire."""
    dtype = getattr(torch, case["dtype"])
    shape = (case["batch"], case["heads"], case["seq_len"], case["head_dim"], world_size, dtype)
    if algorithm == "ring":
        p = ring_attention.predicted_bytes(case["batch"], _kv_heads(case), *shape[2:])
        return dict(p, forward_payload=p["forward"], backward_payload=p["backward"])
    module = all_gather_cp if algorithm == "all_gather" else ulysses
    return module.predicted_bytes(*shape, kv_heads=_kv_heads(case))


def _measured(summary: dict, algorithm: str) -> int:
    if algorithm == "ring":
        return summary["sent_bytes"]
    return sum(summary["payload_bytes"].values())


def bytes_report(ranks: list[dict], case: dict) -> tuple[str, bool]:
    """One case of ``check_context_parallel``, rank by rank: per algorithm the bytes each rank
    handed in (the ring: sent) forward and backward, beside the formula, then the wire bytes
    sent per rank the formulas give.  Returns (table, every rank's count equal to its formula)."""
    n = len(ranks)
    lines = ["payload handed in (ring: sent), B; wire = sent fwd+bwd, B; tiles per rank",
             "algorithm  | fwd counted | formula | bwd counted | formula |    wire | tiles"]
    match = True
    for algorithm in ranks[0]:
        pred = predicted(algorithm, case, n)
        fwd = {_measured(r[algorithm]["forward"], algorithm) for r in ranks}
        bwd = {_measured(r[algorithm]["backward"], algorithm) for r in ranks}
        match &= fwd == {pred["forward_payload"]} and bwd == {pred["backward_payload"]}
        tiles = [r[algorithm]["tiles"] for r in ranks]
        lines.append(f"{algorithm:<10} | {'/'.join(map(str, sorted(fwd))):>11} | "
                     f"{pred['forward_payload']:>7} | {'/'.join(map(str, sorted(bwd))):>11} | "
                     f"{pred['backward_payload']:>7} | {pred['step']:>7} | "
                     f"{tiles if tiles[0] is not None else 'a/n heads, full'}")
    lines.append(f"every rank's count == its formula: {match}")
    return "\n".join(lines), match


def shape_table(batch=1, heads=64, kv_heads=8, seq_len=131072, head_dim=128, dtype="bfloat16",
                cp_degrees=(2, 4, 8, 16)) -> str:
    """Wire bytes each rank sends per attention layer (forward + backward, MB = 10^6 B) from
    the three formulas, for a Llama-3-70B-like attention (GQA: 64 query, 8 key/value heads)."""
    case = dict(batch=batch, heads=heads, kv_heads=kv_heads, seq_len=seq_len, head_dim=head_dim,
                dtype=dtype)
    lines = [f"b={batch}, s={seq_len}, a={heads}, a_kv={kv_heads}, d_h={head_dim}, {dtype}:",
             "MB sent per rank per layer (fwd + bwd), accounted",
             "  CP | ring (K,V blocks) | all-gather K,V | Ulysses all-to-all"]
    for n in cp_degrees:
        cells = []
        for algorithm in ALGORITHMS:
            try:
                cells.append(f"{predicted(algorithm, case, n)['step'] / 1e6:,.0f}")
            except ValueError:
                cells.append(f"n/a ({kv_heads} kv heads)")
        lines.append(f"{n:>4} | {cells[0]:>17} | {cells[1]:>14} | {cells[2]:>18}")
    return "\n".join(lines)


def report(values) -> None:
    text, _ = bytes_report([v[0] for v in values], DEFAULT_CASE)
    print(f"ring, all-gather and Ulysses CP on {len(values)} ranks equal full causal attention "
          f"(outputs and q, k, v gradients)\n{text}")


if __name__ == "__main__":
    cli(check_context_parallel, default_world_size=4, report=report,
        check=lambda n: check_cases([DEFAULT_CASE], n))
