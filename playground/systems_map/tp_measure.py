"""Tensor and sequence parallelism measured: the formulas, and one real run that checks them.

``layer_traffic`` predicts the collectives of one layer; ``block_activation_bytes`` the bytes
autograd saves for one of our blocks; ``korthikanti_bytes`` is the published per-layer formula
(Korthikanti et al. 2022) for the block with dropout and an s x s softmax.  ``check_block`` runs
TP, SP and PyTorch's DTensor TP and SP on the same weights and returns what was counted.
"""

from __future__ import annotations

import numbers

import torch

from playground.systems_map.tensor_parallel import (TPBlock, check_tp_divisible, dtensor_block,
                                         dtensor_local_grads)

__all__ = ["layer_traffic", "korthikanti_bytes", "block_activation_bytes", "check_block", "check_tp_sizes",
           "single_block_activation_bytes", "traffic_report", "activation_report"]


# ----------------------------------------------------------------------------- formulas
def layer_traffic(b: int, s: int, h: int, t: int, elem_bytes: int = 4,
                  sequence_parallel: bool = False, recompute_gather: bool = True) -> dict:
    """Predicted collectives of one layer (forward, backward): {op: (calls, payload bytes)}.

    Payload is what ``playground.comm`` records: the full b*s*h activation for all-reduce and
    reduce-scatter, this rank's 1/t shard for all-gather.  Under SP the backward gathers each
    column-parallel input again (``recompute_gather``): two more all-gathers.
    """
    if isinstance(t, bool) or not isinstance(t, numbers.Integral) or t < 1:
        raise ValueError(f"tensor-parallel size t must be a positive integer, got {t!r}")
    if sequence_parallel and s % t:
        raise ValueError(f"sequence parallelism needs s divisible by t, got s={s}, t={t}")
    full = b * s * h * elem_bytes
    if t == 1:
        return {"forward": {}, "backward": {}}
    if not sequence_parallel:
        return {"forward": {"all_reduce": (2, 2 * full)}, "backward": {"all_reduce": (2, 2 * full)}}
    ag = 4 if recompute_gather else 2
    return {"forward": {"all_gather_into_tensor": (2, 2 * full // t),
                        "reduce_scatter_tensor": (2, 2 * full)},
            "backward": {"all_gather_into_tensor": (ag, ag * full // t),
                         "reduce_scatter_tensor": (2, 2 * full)}}


def korthikanti_bytes(s: int, b: int, h: int, a: int, t: int = 1, sequence_parallel: bool = False,
                      dropout: bool = True) -> float:
    """Activation bytes of one layer in Korthikanti et al. (2022), 16-bit activations.

    With dropout (their Eq. 1-4): sbh(34 + 5as/h) on one rank, sbh(10 + 24/t + 5as/(ht)) with TP,
    sbh/t (34 + 5as/h) with TP+SP.  Without dropout the three 1-byte masks and the dropout output
    (2as^2b) go away: 34 -> 32, 10 -> 8, 5as^2b -> 2as^2b.
    """
    sbh, att = s * b * h, (5 if dropout else 2) * a * s * s * b
    whole = (34 if dropout else 32) * sbh + att
    if t == 1 or sequence_parallel:
        return whole / t
    return (10 if dropout else 8) * sbh + 24 * sbh / t + att / t


def block_activation_bytes(s: int, b: int, h: int, a: int, t: int = 1,
                           sequence_parallel: bool = False, elem_bytes: int = 4,
                           stat_bytes: int | None = None, recompute_gather: bool = True,
                           d_ff: int | None = None, lse_bytes: int | None = None) -> float:
    """Bytes autograd saves for one of *our* blocks (no dropout, fused attention kernel).

    Replicated under TP: the inputs of both norms, of q|k|v and of fc1 (4sbh elements) and the
    norms' mean and 1/std (4sb values, ``stat_bytes`` each: the activation dtype).  Split by t:
    q, k, v (3sbh), the attention output, which is also the input of ``o`` (sbh), GELU's input
    and fc2's input (sb*d_ff each, d_ff = 4h by default: 4sbh each), and the kernel's
    log-sum-exp per head and token (asb values, ``lse_bytes`` each: the kernel keeps it in fp32
    even for 16-bit activations) -- stored instead of the s x s softmax.
    SP divides the replicated part by t too (only the shards are kept).

    The attention terms are those of PyTorch's fused CPU kernel, whose output is laid out so that
    ``o`` reads it without a copy; other kernels (CUDA's memory-efficient attention pads the
    log-sum-exp and keeps RNG state) differ in the small ``asb`` term.
    """
    stat_bytes = elem_bytes if stat_bytes is None else stat_bytes
    lse_bytes = max(elem_bytes, 4) if lse_bytes is None else lse_bytes
    sbh, sb = s * b * h, s * b
    shared, shared_stats = 4 * sbh, 4 * sb * stat_bytes
    split, split_stats = 4 * sbh + 2 * sb * (4 * h if d_ff is None else d_ff), a * sb * lse_bytes
    if sequence_parallel:
        gathered = 0 if recompute_gather else 2 * sbh - 2 * sbh / t
        return (shared + split) * elem_bytes / t + gathered * elem_bytes + \
            (shared_stats + split_stats) / t
    return (shared + split / t) * elem_bytes + shared_stats + split_stats / t


# ----------------------------------------------------------------------------- one real run
def _saved_bytes(module, x):
    from playground.memory import SavedActivations
    saved = SavedActivations(exclude=list(module.parameters()))
    with saved:
        y = module(x)
    return y, saved.bytes


def single_block_activation_bytes(cfg=None, batch: int = 2,
                                  dtype: torch.dtype = torch.float32) -> int:
    """Bytes autograd saves for one forward of the shared model's Block, in this process (t = 1)."""
    from playground.model import ModelConfig, build_model
    cfg = cfg or ModelConfig()
    block = build_model(cfg, seed=0, dtype=dtype).layers[1]
    x = torch.randn(batch, cfg.seq_len, cfg.d_model, dtype=dtype, requires_grad=True)
    return _saved_bytes(block, x)[1]


def _close_16bit(got, want, msg="", rel: float = 2e-2) -> None:
    """16-bit check: the relative error of the whole tensor, ‖got − want‖ ≤ rel·‖want‖.

    Elementwise tolerances do not fit bf16 (8 bits of mantissa): each rank rounds its partial
    sums before the all-reduce adds them, and a gradient summed over many tokens cancels down
    to values far smaller than its terms, so single elements legitimately differ by 10 % while
    a wrong shard or a missing reduction is off by 100 %.
    """
    err = (got.double() - want.double()).norm().item()
    bound = rel * want.double().norm().item() + 1e-6
    if not err <= bound:
        text = f"relative error {err / max(want.double().norm().item(), 1e-30):.3g} > {rel}"
        raise AssertionError(msg(text) if callable(msg) else f"{msg}: {text}")


def check_tp_sizes(world_size: int, tp_sizes=None, cfg=None) -> tuple:
    """The TP sizes ``check_block`` runs (default: every size > 1 that tiles the job), or a
    ValueError naming the first one the job or the model cannot be split into."""
    from playground.model import ModelConfig
    cfg = cfg or ModelConfig()
    if tp_sizes is None:
        tp_sizes = tuple(t for t in range(2, world_size + 1) if world_size % t == 0)
    for t in tp_sizes:
        check_tp_divisible(cfg.n_heads, cfg.d_model, cfg.d_ff, t)
        if world_size % t:
            raise ValueError(f"tensor-parallel size {t} does not divide world size {world_size}")
        if cfg.seq_len % t:
            raise ValueError(f"sequence parallelism cuts seq_len={cfg.seq_len} into t={t} equal "
                             f"shards: use a seq_len that is a multiple of {t}")
    return tuple(tp_sizes)


def check_block(rank: int, world_size: int, tp_sizes=None, cfg=None, batch: int = 2,
                dtype: torch.dtype = torch.float32, recompute_gather: bool = True) -> dict:
    """Rank worker: for each t, run one block with TP, with SP and with DTensor on groups of t.

    Asserts (``assert_close``) that outputs, input gradients and every gradient shard equal the
    single-process block's, and PyTorch's DTensor TP and SP on the same weights; returns, per t,
    the collectives counted in forward and backward, the activation bytes saved on this rank,
    and the largest elementwise differences it found: ``max_diff[mode][against]`` (mode "tp" or
    "sp", against "single_process" or "dtensor") = {"output", "input_grad", "weight_grads"}.
    """
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Shard

    from playground import comm
    from playground.systems_map.grid import RankGrid
    from playground.launch import device
    from playground.model import ModelConfig, build_model

    cfg, dev = cfg or ModelConfig(), device()
    # Refuse every bad size before the first collective: all ranks raise the same clear error,
    # instead of gloo aborting on shards of unequal length half-way through.
    tp_sizes = check_tp_sizes(world_size, tp_sizes, cfg)
    close = _close_16bit if torch.finfo(dtype).bits <= 16 else torch.testing.assert_close
    block = build_model(cfg, seed=0, dtype=dtype, device=dev).layers[1]
    g = torch.Generator().manual_seed(1)
    x = torch.randn(batch, cfg.seq_len, cfg.d_model, generator=g, dtype=dtype).to(dev)
    dy = torch.randn(batch, cfg.seq_len, cfg.d_model, generator=g, dtype=dtype).to(dev)
    xr = x.clone().requires_grad_()
    y_ref = block(xr)
    y_ref.backward(dy)
    report = {}

    def compare(diffs, what, got, want, msg):
        close(got, want, msg=msg)  # raises, naming the tensor, when beyond the tolerance
        gap = (got.double() - want.double()).abs().max().item() if got.numel() else 0.0
        diffs[what] = max(diffs.get(what, 0.0), gap)

    for t in tp_sizes:
        grid = RankGrid(dp=world_size // t, tp=t)  # the other axis just replicates here
        group = grid.groups(rank).group("tp")
        r = grid.coords(rank)["tp"]
        out = {"label": grid.label(rank), "batch": batch,
               "max_diff": {"tp": {"single_process": {}, "dtensor": {}},
                            "sp": {"single_process": {}, "dtensor": {}}}}
        for sp in (False, True):
            diffs = out["max_diff"]["sp" if sp else "tp"]["single_process"]
            tpb = TPBlock(block, group, sequence_parallel=sp, recompute_gather=recompute_gather)
            cut = (lambda z: z.chunk(t, dim=1)[r]) if sp else (lambda z: z)
            xin = cut(x).clone().requires_grad_()
            with comm.count() as fwd:
                y, act = _saved_bytes(tpb, xin)
            with comm.count() as bwd:
                y.backward(cut(dy))
            with comm.count() as sync:
                tpb.finish_gradients()
            compare(diffs, "output", y, cut(y_ref), "output")
            compare(diffs, "input_grad", xin.grad, cut(xr.grad), "input grad")
            want = tpb.expected_local(block, grads=True)
            for name, p in tpb.named_parameters():
                compare(diffs, "weight_grads", p.grad, want[name], lambda m, n=name: f"{n}: {m}")
            out["sp" if sp else "tp"] = {"forward": fwd.summary(), "backward": bwd.summary(),
                                         "grad_sync": sync.summary(), "activation_bytes": act}
        # PyTorch's own TP (and SP) on the same weights: the production reference
        mesh = init_device_mesh(dev.type, (world_size // t, t), mesh_dim_names=("dp", "tp"))
        for sp in (False, True):
            diffs = out["max_diff"]["sp" if sp else "tp"]["dtensor"]
            cut = (lambda z: z.chunk(t, dim=1)[r]) if sp else (lambda z: z)
            dblock = dtensor_block(block, mesh["tp"], sequence_parallel=sp)
            xd = cut(x).clone().requires_grad_()
            yd = dblock(DTensor.from_local(xd, mesh["tp"], [Shard(1)]) if sp else xd)
            yd = yd.to_local() if sp else yd
            yd.backward(cut(dy))
            tpb = TPBlock(block, group, sequence_parallel=sp)
            xt = cut(x).clone().requires_grad_()
            yt = tpb(xt)
            yt.backward(cut(dy))
            tpb.finish_gradients()
            compare(diffs, "output", yd, yt, "DTensor output")
            compare(diffs, "input_grad", xd.grad, xt.grad, "DTensor input grad")
            mine = dict(tpb.named_parameters())
            for name, grad in dtensor_local_grads(dblock).items():
                compare(diffs, "weight_grads", mine[name].grad, grad,
                        lambda m, n=name: f"DTensor {n}: {m}")
        # True once every DTensor comparison has run (each raises beyond its tolerance); how
        # large the differences were is in max_diff
        out["dtensor_equal"] = all(len(d["dtensor"]) == 3 for d in out["max_diff"].values())
        report[t] = out
    return report


# ----------------------------------------------------------------------------- what the chapter prints
_SHORT = {"all_reduce": "AR", "all_gather_into_tensor": "AG", "reduce_scatter_tensor": "RS"}


def _calls(summary: dict) -> str:
    return ", ".join(f"{_SHORT.get(op, op)} x{n} ({summary['payload_bytes'][op]:,} B)"
                     for op, n in summary["calls"].items()) or "nothing"


def traffic_report(values: list, cfg=None, batch: int = 2, elem_bytes: int = 4,
                   recompute_gather: bool = True) -> str:
    """Per t and mode: the collectives counted in one layer beside ``layer_traffic``; raises if
    any rank's count differs from the formula.  Pass the ``check_block`` run's settings."""
    from playground.model import ModelConfig
    from playground.systems_map.tp_comm import ring_wire_bytes
    cfg = cfg or ModelConfig()
    lines = ["AR all-reduce, AG all-gather, RS reduce-scatter (payload); every rank = formula"]
    for t in sorted(values[0]):
        for mode in ("tp", "sp"):
            want = layer_traffic(batch, cfg.seq_len, cfg.d_model, t, elem_bytes, mode == "sp",
                                 recompute_gather)
            for phase in ("forward", "backward"):
                expect = {op: c for op, (c, _) in want[phase].items()}
                payload = {op: p for op, (_, p) in want[phase].items()}
                for v in values:
                    got = v[t][mode][phase]
                    if got["calls"] != expect or got["payload_bytes"] != payload:
                        raise AssertionError(f"t={t} {mode} {phase}: counted {got}, formula {want[phase]}")
                short = "fwd" if phase == "forward" else "bwd"
                lines.append(f"t={t} {mode.upper():2s} {short}: {_calls(values[0][t][mode][phase])}")
            wire = sum(ring_wire_bytes(op, p, t) for ph in want.values() for op, (_, p) in ph.items())
            lines.append(f"t={t} {mode.upper():2s} ring wire bytes per rank per layer: {wire:,.0f} B")
    return "\n".join(lines)


def activation_report(values: list, t1_bytes: int, cfg=None, batch: int = 2,
                      elem_bytes: int = 4, recompute_gather: bool = True) -> str:
    """Activation bytes per rank per layer: measured, our formula, and Korthikanti's (16-bit,
    scaled to ``elem_bytes``: x2 for fp32; no dropout); raises if a measurement differs from
    our formula.  Pass the ``check_block`` run's settings."""
    from playground.model import ModelConfig
    cfg = cfg or ModelConfig()
    s, h, a = cfg.seq_len, cfg.d_model, cfg.n_heads
    rows = [(1, "-", t1_bytes)]
    for t in sorted(values[0]):
        for mode in ("tp", "sp"):
            got = {v[t][mode]["activation_bytes"] for v in values}
            if len(got) != 1:
                raise AssertionError(f"t={t} {mode}: ranks saved different bytes {got}")
            rows.append((t, mode.upper(), got.pop()))
    scale = elem_bytes / 2  # the paper counts 16-bit activations
    lines = [f"{'t':>2} {'mode':4} {'measured':>9} {'our formula':>12} "
             f"{f'Korthikanti x{scale:g}':>15}"]
    for t, mode, got in rows:
        sp = mode == "SP"
        ours = block_activation_bytes(s, batch, h, a, t, sp, elem_bytes,
                                      recompute_gather=recompute_gather, d_ff=cfg.d_ff)
        paper = scale * korthikanti_bytes(s, batch, h, a, t, sp, dropout=False)
        if got != ours:
            raise AssertionError(f"t={t} {mode}: measured {got} B, formula {ours} B")
        lines.append(f"{t:>2} {mode:4} {got:>9,} {ours:>12,.0f} {paper:>15,.0f}   measured = our formula")
    return "\n".join(lines)


def _report(values) -> None:
    print(traffic_report(values))
    print(activation_report(values, single_block_activation_bytes()))


if __name__ == "__main__":
    from playground.launch_cli import cli
    cli(check_block, default_world_size=4, report=_report, check=check_tp_sizes)
