"""Mixture of experts and expert parallelism: the spec.

The single-process MoE is checked against a dense computation and hand-worked routing; the
expert-parallel layer equals it on every rank (outputs, input, router and expert gradients),
with and without dropped tokens; the all-to-all payload is exactly the formula; drop counts
follow the model of uniformly random routing (binomial loads that sum to T·k), and a
wrong prediction, or a skewed router, is told apart from it.
"""

import math

import pytest
import torch

from playground.systems_map import expert_parallel as ep
from playground.systems_map import expert_parallel_runs as ep_runs
from playground.launch import run
from playground.systems_map import (MoE, drops_agree, expert_capacity, load_balancing_loss, predicted_drops,
                                    route, within_capacity)

CASES = [  # tokens are per rank
    dict(tokens=24, d_model=8, d_ff=16, n_experts=8, top_k=2, capacity_factor=None,
         dtype="float64", seed=0),
    dict(tokens=24, d_model=8, d_ff=16, n_experts=8, top_k=2, capacity_factor=1.0,
         dtype="float64", seed=1),
    dict(tokens=30, d_model=6, d_ff=12, n_experts=4, top_k=1, capacity_factor=0.75,
         dtype="float32", seed=2),
    # 2 tokens, 1 choice each: on 2 and on 4 ranks some rank's experts receive no row at all,
    # and that rank must still join both backward all-to-alls
    dict(tokens=2, d_model=4, d_ff=8, n_experts=4, top_k=1, capacity_factor=None,
         dtype="float64", seed=8),
    # three choices per token, a capacity that drops most of them, 16-bit
    dict(tokens=12, d_model=8, d_ff=8, n_experts=8, top_k=3, capacity_factor=0.25,
         dtype="bfloat16", seed=5),
]
EMPTY_RANK_CASE = 3


# ----------------------------------------------------------------------------- single process
def test_capacity_formula():
    assert expert_capacity(64, 8, 2, 1.0) == 16
    assert expert_capacity(64, 8, 2, 1.25) == 20
    assert expert_capacity(10, 4, 1, 1.0) == 3  # ceil(2.5)
    assert expert_capacity(10, 4, 1, None) == 10


def test_first_choices_are_served_before_second_choices():
    experts = torch.tensor([[0, 1], [1, 0], [0, 1], [0, 2]])  # (T=4, k=2)
    kept = within_capacity(experts, n_experts=3, capacity=2)
    # expert 0: first choices of tokens 0, 2 fill it; token 3's first choice and token 1's
    # second choice are dropped.  expert 1: token 1 (first), token 0 (second); token 2's second
    # is third in line.  expert 2: token 3's second choice.
    assert kept.tolist() == [[True, True], [True, False], [True, False], [False, True]]


def test_dense_mixture_when_every_expert_is_chosen():
    """top_k = E and no capacity: y = Σ_e p_e · expert_e(x), the plain softmax mixture."""
    torch.manual_seed(0)
    moe = MoE(6, 12, n_experts=3, top_k=3).double()
    x = torch.randn(5, 2, 6, dtype=torch.float64)
    probs = torch.softmax(x @ moe.router.weight.t(), dim=-1)
    dense = sum(probs[..., e:e + 1] * moe.experts[e](x) for e in range(3))
    torch.testing.assert_close(moe(x), dense)
    assert moe.last_stats["dropped"] == 0 and sum(moe.last_stats["kept"]) == 30


def test_top1_gate_is_the_router_probability_and_trains_the_router():
    torch.manual_seed(0)
    moe = MoE(4, 8, n_experts=4, top_k=1).double()
    x = torch.randn(7, 4, dtype=torch.float64)
    experts, gates, probs = route(x, moe.router.weight, top_k=1)
    torch.testing.assert_close(gates[:, 0], probs.max(dim=-1).values)
    moe(x).sum().backward()
    assert moe.router.weight.grad.abs().sum() > 0


def test_top2_gates_are_renormalised_and_mix_the_two_chosen_experts():
    """k = 2 < E = 4, worked by hand.  With the identity as router the logits are the tokens
    themselves: token 0 = (2, 1, 0, -1) picks experts 0 and 1 with softmax probabilities
    p_0 = e^2 / Z and p_1 = e / Z; renormalised over the two, the gates are
    p_0 / (p_0 + p_1) = 1 / (1 + e^-1) = sigmoid(1) = 0.731 and sigmoid(-1) = 0.269, whatever Z.
    y = gate_0 · expert_0(x) + gate_1 · expert_1(x); the other experts contribute nothing."""
    torch.manual_seed(0)
    moe = MoE(4, 8, n_experts=4, top_k=2).double()
    with torch.no_grad():
        moe.router.weight.copy_(torch.eye(4))
    x = torch.tensor([[2.0, 1.0, 0.0, -1.0],     # experts 0, 1
                      [0.0, -1.0, 3.0, 0.5],     # experts 2, 3
                      [-2.0, 1.5, 0.0, 1.0]],    # experts 1, 3
                     dtype=torch.float64)
    experts, gates, probs = route(x, moe.router.weight, top_k=2)
    assert experts.tolist() == [[0, 1], [2, 3], [1, 3]]
    p_top2 = probs.gather(1, experts)
    torch.testing.assert_close(gates, p_top2 / p_top2.sum(-1, keepdim=True))
    torch.testing.assert_close(gates.sum(-1), torch.ones(3, dtype=torch.float64))
    sig = lambda z: 1 / (1 + math.exp(-z))  # noqa: E731
    torch.testing.assert_close(gates[0], torch.tensor([sig(1.0), sig(-1.0)], dtype=torch.float64))
    assert gates[0, 0].item() == pytest.approx(0.7311, abs=1e-4)
    assert p_top2[0].sum().item() < 0.96  # unnormalised, the two would not sum to 1
    # without renormalisation the gates are the raw probabilities
    _, raw, _ = route(x, moe.router.weight, top_k=2, normalize=False)
    torch.testing.assert_close(raw, p_top2)

    y = moe(x)
    manual = torch.stack([sum(gates[t, j] * moe.experts[experts[t, j].item()](x[t])
                              for j in range(2)) for t in range(3)])
    torch.testing.assert_close(y, manual)
    assert moe.last_stats["dropped"] == 0 and moe.last_stats["kept"] == [1, 2, 1, 2]


def test_load_balancing_loss_is_one_when_balanced():
    experts = torch.tensor([[0], [1], [2], [3]])
    probs = torch.full((4, 4), 0.25)
    assert load_balancing_loss(experts, probs).item() == pytest.approx(1.0)
    skewed = torch.tensor([[0], [0], [0], [0]])
    peaked = torch.tensor([[1.0, 0, 0, 0]] * 4)
    assert load_balancing_loss(skewed, peaked).item() == pytest.approx(4.0)


def _routed_drops(tokens, n_experts, top_k, cf, trials, seed=0):
    """Drops of uniformly random k-subsets, counted by the routing code itself."""
    g = torch.Generator().manual_seed(seed)
    capacity = expert_capacity(tokens, n_experts, top_k, cf)
    choice = torch.rand(trials, tokens, n_experts, generator=g).topk(top_k, dim=-1).indices
    return torch.tensor([int((~within_capacity(c, n_experts, capacity)).sum()) for c in choice],
                        dtype=torch.float64)


@pytest.mark.parametrize("cf", [0.75, 1.0, 1.25])
def test_drop_prediction_matches_random_routing(cf):
    """Mean and spread of the drops of uniformly random routing (Monte Carlo through
    ``within_capacity``) vs ``predicted_drops``: the mean is exact, the sd is that of the
    anti-correlated queues (their loads sum to T·k), not of independent ones."""
    tokens, n_experts, top_k, trials = 64, 8, 2, 2000
    drops = _routed_drops(tokens, n_experts, top_k, cf, trials)
    mean, sd = predicted_drops(tokens, n_experts, top_k, cf)
    assert abs(drops.mean().item() - mean) < 4 * max(sd, 0.1) / math.sqrt(trials)
    assert drops.std().item() == pytest.approx(sd, rel=0.15)


def test_drop_spread_is_zero_when_every_expert_overflows():
    # c_f = 0.5: every expert gets far more than C = 32 of the mean 64 assignments on every
    # batch, so exactly T·k − E·C drop, every time, on each of 4 ranks
    mean, sd = predicted_drops(256, 8, 2, 0.5, ranks=4)
    assert sd == 0.0 and round(mean) == 4 * (256 * 2 - 8 * 32)
    mean, sd = predicted_drops(256, 8, 2, 2.0)  # C = 128: an overflow is a 1-in-10^16 event
    assert sd == 0.0 and mean < 1e-9


def test_a_wrong_drop_prediction_is_rejected():
    """The check the chapter applies has teeth: real routing (one rank, no process group)
    agrees with its own prediction, and not with the prediction for a capacity factor 0.1 off,
    nor does a skewed router agree with the prediction for a uniform one."""
    cfs = (0.75, 1.0, 1.25)
    sweep = ep_runs.drop_sweep(0, 1, 256, 32, 8, 2, cfs)
    for i, cf in enumerate(cfs):
        uniform, skewed = sweep["uniform"][i]["dropped"], sweep["skewed"][i]["dropped"]
        assert drops_agree(uniform, *predicted_drops(256, 8, 2, cf)), cf
        assert not drops_agree(skewed, *predicted_drops(256, 8, 2, cf)), cf
        if cf < 1.25:  # above, both predictions are ~0 drops: nothing to tell apart
            for wrong in (cf - 0.1, cf + 0.1):
                assert not drops_agree(uniform, *predicted_drops(256, 8, 2, wrong)), (cf, wrong)


def test_drops_agree_allows_half_a_count_where_the_spread_is_zero():
    assert drops_agree(1024, 1024.0000004, 0.0)
    assert not drops_agree(1025, 1024.0, 0.0)
    assert drops_agree(100, 88.3, 12.6) and not drops_agree(130, 88.3, 12.6)


@pytest.mark.parametrize("kwargs, message", [
    (dict(top_k=5), "top_k=5 cannot exceed"),
    (dict(top_k=0), "top_k must be a positive integer"),
    (dict(capacity_factor=0.0), "capacity_factor must be > 0"),
    (dict(capacity_factor=float("inf")), "capacity_factor must be > 0 and finite"),
    (dict(capacity_factor="1"), "capacity_factor must be > 0 and finite"),
    (dict(n_experts=2.5), "n_experts must be a positive integer"),
])
def test_bad_configuration_is_named(kwargs, message):
    args = dict(d_model=4, d_ff=8, n_experts=4, top_k=2) | kwargs
    with pytest.raises(ValueError, match=message):
        MoE(**args)


def test_wrong_width_and_uneven_placement_are_named():
    with pytest.raises(ValueError, match="last dimension 4"):
        MoE(4, 8, 4)(torch.zeros(3, 5))
    with pytest.raises(ValueError, match="6 experts do not split evenly over 4 ranks"):
        ep.expert_placement(6, 4, 0)
    assert list(ep.expert_placement(8, 4, 1)) == [2, 3]


# ----------------------------------------------------------------------------- across ranks
def _check_bytes(values):
    for c, case in enumerate(CASES):
        dtype = getattr(torch, case["dtype"])
        for got in (v[c] for v in values):
            pred = ep.predicted_bytes(case["tokens"], case["d_model"], case["top_k"],
                                      case["n_experts"], dtype, got["dropped"], sum(got["recv_rows"]))
            assert got["forward"]["payload_bytes"]["all_to_all_single"] == pred["forward"]
            assert got["backward"]["payload_bytes"]["all_to_all_single"] == pred["backward"]
            assert got["forward"]["calls"]["all_to_all_single"] == 3   # counts, dispatch, combine
            assert got["backward"]["calls"]["all_to_all_single"] == 2  # combine, dispatch reversed
        assert sum(sum(v[c]["recv_rows"]) for v in values) == sum(sum(v[c]["send_rows"]) for v in values)
        dropped = sum(v[c]["dropped"] for v in values)
        assert (dropped == 0) == (case["capacity_factor"] is None), (case, dropped)


@pytest.mark.parametrize("world_size", [2, 4])
def test_expert_parallel_equals_single_process_moe(world_size):
    values = run(ep_runs.check_expert_parallel, world_size, CASES, quiet=True, timeout_s=60)
    _check_bytes(values)
    assert any(sum(v[EMPTY_RANK_CASE]["recv_rows"]) == 0 for v in values)
    heavy = sum(v[-1]["dropped"] for v in values)
    assert heavy > world_size * 12 * 3 // 2  # more than half of all assignments dropped


def test_all_to_all_equals_pytorch_differentiable_all_to_all():
    assert run(ep_runs.check_all_to_all, 3, quiet=True) == [True, True, True]


def test_map_row_has_the_agreed_keys():
    (row,) = ep_runs.map_rows()
    assert {"strategy", "replicated", "sharded", "collective", "bytes_per_step_formula",
            "bytes_measured", "link", "buys", "cite"} <= set(row)
    assert row["bytes_predicted"] > 0
