"""Tensor and sequence parallelism: the spec.

On groups of t ranks, the TP block and the TP+SP block equal the single-process Block (outputs,
input gradients, every weight-gradient shard) and PyTorch's DTensor Colwise/RowwiseParallel
(with SequenceParallel and Shard(1) layouts for SP) on the same weights (asserted inside the ranks by
``tp_measure.check_block``, which returns the largest differences it found: rounding); the collectives
counted per layer are exactly ``layer_traffic``; the activation bytes saved are exactly
``block_activation_bytes``.
"""

import pytest
import torch

from playground.launch import run
from playground.model import ModelConfig, build_model
from playground.systems_map import TPBlock, check_tp_divisible, column_shard, row_shard
from playground.systems_map import ring_wire_bytes
from playground.systems_map.tp_measure import (activation_report, block_activation_bytes, check_block,
                                   korthikanti_bytes, layer_traffic, single_block_activation_bytes,
                                   traffic_report)


def _expected_counts(traffic):
    return ({op: c for op, (c, _) in traffic.items()}, {op: p for op, (_, p) in traffic.items()})


# The largest elementwise difference from the single-process block and from DTensor, by element
# size: rounding (sums split over ranks add in another order), ~100 units of roundoff in fp32
# and fp64 and ~10 in bf16 (each rank rounds its partial sums to 8 bits); a wrong shard or a
# missing reduction is off by the size of the values themselves, O(1).
ROUNDING = {8: 1e-13, 4: 2e-5, 2: 0.125}


def _check(values, cfg, batch, elem, recompute=True):
    s, h, a = cfg.seq_len, cfg.d_model, cfg.n_heads
    for per_rank in values:
        for t, out in per_rank.items():
            assert out["dtensor_equal"]
            for mode in ("tp", "sp"):
                for against in ("single_process", "dtensor"):
                    diffs = out["max_diff"][mode][against]
                    assert set(diffs) == {"output", "input_grad", "weight_grads"}, (t, mode, against)
                    assert max(diffs.values()) <= ROUNDING[elem], (t, mode, against, diffs)
            for sp in (False, True):
                got = out["sp" if sp else "tp"]
                want = layer_traffic(batch, s, h, t, elem, sp, recompute)
                for phase in ("forward", "backward"):
                    calls, payload = _expected_counts(want[phase])
                    assert got[phase]["calls"] == calls, (t, sp, phase)
                    assert got[phase]["payload_bytes"] == payload, (t, sp, phase)
                assert got["activation_bytes"] == block_activation_bytes(
                    s, batch, h, a, t, sp, elem, elem, recompute, cfg.d_ff), (t, sp)
                # SP: one all-reduce of the replicated parameters' gradients; TP (or t = 1): none
                assert got["grad_sync"]["calls"] == ({"all_reduce": 1} if sp and t > 1 else {})


def test_tp_and_sp_equal_single_process_and_dtensor_on_4_ranks():
    cfg = ModelConfig()
    values = run(check_block, 4, (2, 4), cfg, 2, quiet=True)
    _check(values, cfg, 2, 4)


def test_other_shapes_float64_and_saving_the_gathered_input():
    cfg = ModelConfig(d_model=24, n_heads=6, seq_len=6, ffn_mult=2, n_layers=2)
    values = run(check_block, 2, (2,), cfg, 3, torch.float64, False, quiet=True)
    _check(values, cfg, 3, 8, recompute=False)


def test_three_ranks_t1_and_t3_bfloat16_one_sequence():
    # 16-bit: the norms keep their statistics in bf16, the attention kernel its lse in fp32
    cfg = ModelConfig(d_model=24, n_heads=6, seq_len=9, ffn_mult=1, n_layers=1)
    values = run(check_block, 3, (1, 3), cfg, 1, torch.bfloat16, quiet=True, timeout_s=60)
    _check(values, cfg, 1, 2)
    traffic_report(values, cfg, batch=1, elem_bytes=2)  # each raises if a count differs
    t1 = single_block_activation_bytes(cfg, 1, torch.bfloat16)
    report = activation_report(values, t1, cfg, batch=1, elem_bytes=2)
    assert report.splitlines()[0].endswith("Korthikanti x1")  # the paper counts 16-bit bytes


def test_one_rank_block_is_the_block_and_its_bytes_are_the_formula():
    cfg = ModelConfig()
    block = build_model(cfg).layers[1]
    x = torch.randn(2, cfg.seq_len, cfg.d_model)
    torch.testing.assert_close(TPBlock(block)(x), block(x))
    for dtype, e in ((torch.float32, 4), (torch.bfloat16, 2), (torch.float16, 2), (torch.float64, 8)):
        assert single_block_activation_bytes(cfg, 2, dtype) == block_activation_bytes(
            cfg.seq_len, 2, cfg.d_model, cfg.n_heads, elem_bytes=e), dtype


def test_shards_tile_the_weight():
    w = torch.arange(24.0).view(6, 4)
    assert torch.equal(torch.cat([column_shard([w], r, 3) for r in range(3)]), w)
    assert torch.equal(torch.cat([row_shard(w, r, 2) for r in range(2)], dim=1), w)
    # fused q|k|v: rank r holds its rows of each, in that order
    q, k = torch.zeros(4, 2), torch.ones(4, 2)
    assert torch.equal(column_shard([q, k], 1, 2), torch.cat([q[2:], k[2:]]))


def test_korthikanti_formulas_match_the_paper():
    s, b, h, a, t = 2048, 1, 12288, 96, 8
    sbh = s * b * h
    assert korthikanti_bytes(s, b, h, a) == pytest.approx(sbh * (34 + 5 * a * s / h))
    assert korthikanti_bytes(s, b, h, a, t) == pytest.approx(sbh * (10 + 24 / t + 5 * a * s / (h * t)))
    assert korthikanti_bytes(s, b, h, a, t, True) == pytest.approx(sbh / t * (34 + 5 * a * s / h))
    assert korthikanti_bytes(s, b, h, a, t, True, dropout=False) == pytest.approx(
        sbh / t * (32 + 2 * a * s / h))


def test_ring_wire_factors():
    assert ring_wire_bytes("all_reduce", 100, 4) == 150
    assert ring_wire_bytes("reduce_scatter_tensor", 100, 4) == 75
    assert ring_wire_bytes("all_gather_into_tensor", 25, 4) == 75
    with pytest.raises(ValueError, match="no ring formula"):
        ring_wire_bytes("broadcast", 1, 2)


@pytest.mark.parametrize("world, t, cfg, match", [
    (2, 2, ModelConfig(seq_len=7), "seq_len=7 into t=2 equal shards"),
    (4, 3, ModelConfig(d_model=24, n_heads=6), "size 3 does not divide world size 4"),
    (3, 3, ModelConfig(), "n_heads=4 does not split"),
])
def test_check_block_refuses_bad_sizes_before_any_collective(world, t, cfg, match):
    with pytest.raises(ValueError, match=match):  # no process group needed: nothing ran yet
        check_block(0, world, (t,), cfg)


def test_bad_arguments_to_layers_and_formulas_are_named():
    from torch import nn

    from playground.systems_map import ColumnParallelLinear
    with pytest.raises(ValueError, match="all have a bias or all have none"):
        ColumnParallelLinear([nn.Linear(4, 4), nn.Linear(4, 4, bias=False)])
    with pytest.raises(ValueError, match="s divisible by t"):
        layer_traffic(1, 7, 8, 2, sequence_parallel=True)
    with pytest.raises(ValueError, match="positive integer"):
        layer_traffic(1, 8, 8, 0)
    with pytest.raises(ValueError, match="ring size n"):
        ring_wire_bytes("all_reduce", 100, 0)


@pytest.mark.parametrize("t, match", [(3, "n_heads=4 does not split"), (0, "positive integer"),
                                      (8, "n_heads=4 does not split")])
def test_bad_split_is_one_clear_error(t, match):
    with pytest.raises(ValueError, match=match):
        check_tp_divisible(4, 32, 128, t)
