"""bench moe: one EP rank's routed experts by four execution paths, each equal to a token-by-token reference."""

import json

import pytest
import torch

from playground.bench.__main__ import main as bench_main
from playground.bench.moe import SHAPES, modelled
from playground.hardware import gpu
from playground.planner.architecture import Model
from playground.planner.costs import gemm_time, layer_gemms, EFFICIENCY
from playground.systems_map.expert_execution import PATHS, RoutedExperts, expert_reference


def _layer(path, capacity_factor=1.0, local=4):
    return RoutedExperts(16, 16, 8, local, 2, path, capacity_factor)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("capacity_factor", [0.5, 4.0])
def test_every_path_equals_the_token_by_token_reference(path, capacity_factor):
    x = torch.randn(40, 16, generator=torch.Generator().manual_seed(3)).bfloat16()
    layer = _layer(path, capacity_factor)
    torch.testing.assert_close(layer(x).float(), expert_reference(layer, x).float(), rtol=2e-2, atol=2e-2)


def test_the_dropless_paths_agree_in_backward_and_capacity_does_when_nothing_is_dropped():
    x = torch.randn(40, 16, generator=torch.Generator().manual_seed(4)).bfloat16()
    grads = {}
    for path in PATHS:
        layer = _layer(path, capacity_factor=4.0)   # 4 x the mean: 8 experts, top-2, no expert that full
        xx = x.clone().requires_grad_()
        layer(xx).float().square().sum().backward()
        grads[path] = (xx.grad.float(), layer.w_in.grad.float(), layer.w_out.grad.float(), layer.router.grad.float())
    for path in PATHS[1:]:
        for got, want in zip(grads[path], grads["grouped"]):
            torch.testing.assert_close(got, want, rtol=3e-2, atol=3e-2)


def test_capacity_drops_rows_past_each_experts_slots_and_sync_paths_leave_the_counts_on_the_host():
    x = torch.randn(64, 16, generator=torch.Generator().manual_seed(5)).bfloat16()
    tight, roomy = _layer("capacity", 0.25), _layer("capacity", 4.0)
    assert tight.capacity(64) == 8 and roomy.capacity(64) == 128
    assert not torch.allclose(tight(x).float(), roomy(x).float(), atol=1e-2)
    synced = _layer("loop_sync")
    synced(x)
    assert sum(synced.last_counts) == 64 * 2 and len(synced.last_counts) == 4
    grouped = _layer("grouped")
    grouped(x)
    assert grouped.last_counts is None     # the device-side path never waits for the host


@pytest.mark.parametrize("bad", [dict(path="scatter"), dict(local=3), dict(capacity_factor=0)])
def test_a_layer_that_cannot_be_built_says_why(bad):
    args = dict(hidden=16, width=16, experts=8, local=4, top_k=2, path="grouped") | bad
    with pytest.raises(ValueError):
        RoutedExperts(**args)


def test_the_models_price_is_its_own_gemms_and_bytes():
    # qwen3-30b-a3b at EP 8: 16 local experts, each 4096 x 8 x 8 / 128 = 2,048 rows on average
    h200, price = gpu("H200"), modelled("qwen3-30b-a3b", 4096, gpu("H200"))
    model = Model(2, 2048, 16, seq_len=4096, experts=128, top_k=8, moe_ffn=768, gated_mlp=True)
    experts_in = [g for g in layer_gemms(model, 1, 1, ep=8, moe=True) if g[0] == "experts_in"][0]
    assert experts_in[1:] == (16, 2048, 1536, 2048)
    assert price["gemm_s"] > 3 * gemm_time(*experts_in[1:], h200, EFFICIENCY)   # forward + 2 backward, 3 GEMMs
    assert price["layer_s"] == pytest.approx(price["gemm_s"] + price["elementwise_s"])
    assert set(SHAPES) >= {"qwen3-30b-a3b", "deepseek-v3", "tiny"}


def test_the_cpu_run_reports_every_path_beside_the_grouped_one(capsys):
    assert bench_main(["moe", "--json", "--repeats", "1", "--warmup", "0", "--layers", "1"]) == 0
    r = json.loads(capsys.readouterr().out)
    row = r["rows"][0]
    assert row["shape"] == "tiny" and set(row["paths"]) == set(PATHS)
    assert all(v["agrees_with_grouped"] in (True, None) for v in row["paths"].values())
    assert set(row["over_grouped"]) == set(PATHS) - {"grouped"} and r["provenance"]["device"]


@pytest.mark.parametrize("flags", [["--tokens", "0"], ["--capacity-factor", "-1"], ["--shapes", "gpt-5"]])
def test_bad_flags_are_one_line_and_exit_2(flags, capsys):
    assert bench_main(["moe", *flags]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
