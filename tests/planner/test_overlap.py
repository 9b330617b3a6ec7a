"""When communication hides: each threshold is the break-even of the step-time model's own costs."""

import math
from dataclasses import replace

import pytest

from playground import hardware
from playground.planner import EFFICIENCY, allreduce_time, data_parallel_tokens, fsdp_tokens, hiding_thresholds
from playground.planner import tensor_parallel_hidden
from playground.planner.costs import allgather_time, peak_flops, sustained_rate
from playground.planner.layout import Efficiency

NO_LATENCY = Efficiency(latency_s=0.0)


def compute_s(flops, gpu):   # at the rate a GPU holds through a run, as the step-time model charges it
    return flops / (NO_LATENCY.gemm * sustained_rate(gpu, NO_LATENCY) * peak_flops(gpu))


@pytest.mark.parametrize("name", ["A100", "H100", "H200"])
def test_dp_threshold_is_where_the_gradient_allreduce_equals_backward(name):
    gpu, psi, n = hardware.gpu(name), 7e9, 64
    tokens = data_parallel_tokens(gpu, "network", n=n, eff=NO_LATENCY)
    reduce = allreduce_time(2 * psi, n, gpu.network_bytes_per_s, NO_LATENCY, "network")
    assert math.isclose(reduce, compute_s(4 * psi * tokens, gpu), rel_tol=1e-12)


def test_fsdp_threshold_is_where_one_units_gather_equals_its_forward():
    gpu, psi_unit, n = hardware.gpu("H100"), 2e8, 8
    tokens = fsdp_tokens(gpu, "nvlink", n=n, eff=NO_LATENCY)
    gather = allgather_time(2 * psi_unit, n, gpu.nvlink_bytes_per_s, NO_LATENCY)
    assert math.isclose(gather, compute_s(2 * psi_unit * tokens, gpu), rel_tol=1e-12)


def test_tp_threshold_is_where_a_layers_allreduces_equal_its_gemms():
    gpu, t, b, s = hardware.gpu("H100"), 8, 1, 4096
    h = tensor_parallel_hidden(gpu, t, "nvlink", eff=NO_LATENCY)
    comm = 2 * allreduce_time(2 * b * s * h, t, gpu.nvlink_bytes_per_s, NO_LATENCY)
    assert math.isclose(comm, compute_s(24 * b * s * h * h / t, gpu), rel_tol=1e-12)


def test_thresholds_depend_on_hardware_not_model_and_network_is_the_hard_one():
    rows = {r["gpu"]: r for r in hiding_thresholds()}
    assert set(rows) == {"A100-80GB", "H100", "H200"}
    for r in rows.values():
        assert r["fsdp_tokens_network"] > 5 * r["fsdp_tokens_nvlink"]
        assert r["tp_hidden_network"] > 5 * r["tp_hidden_nvlink"]
    # the H100 computes 3.2x faster than the A100 but its NIC is only 2x: harder to hide
    assert rows["H100"]["dp_tokens_network"] > rows["A100-80GB"]["dp_tokens_network"]
    assert EFFICIENCY.gemm > 0


def test_bad_link_and_tp_are_refused():
    with pytest.raises(ValueError, match="link must be"):
        data_parallel_tokens("H100", "pcie")
    with pytest.raises(ValueError, match="tp >= 2"):
        tensor_parallel_hidden("H100", 1)


def test_fsdp_over_whole_nodes_shares_the_crossing_over_every_nic():
    """NCCL runs a ring per NIC, so a group of whole nodes crosses on all eight at once.  On an A100
    node those eight (8 x 25 GB/s at 0.94) stay under NVLink (300 at 0.80) and bind; on an H100 node
    they outrun it (8 x 50 at 0.94 against 450 at 0.80), and NVLink binds the ring instead."""
    from playground.planner.comm_costs import ring_crossing
    from playground.planner.costs import Cluster, Layout, data_parallel_link, shard_link
    a100, psi_unit, n = hardware.gpu("A100"), 2e8, 64
    link, per_node = ring_crossing(a100.nvlink_bytes_per_s, a100.network_bytes_per_s, 8)
    assert link == "network" and per_node == 8 * a100.network_bytes_per_s
    tokens = fsdp_tokens(a100, "network", n=n, per_node=8, eff=NO_LATENCY)
    gather = allgather_time(2 * psi_unit, n, per_node, NO_LATENCY, "network")
    assert math.isclose(gather, compute_s(2 * psi_unit * tokens, a100), rel_tol=1e-12)
    assert math.isclose(fsdp_tokens(a100, "network", per_node=8), fsdp_tokens(a100, "network") / 8)
    h100 = hardware.gpu("H100")
    assert ring_crossing(h100.nvlink_bytes_per_s, h100.network_bytes_per_s, 8) == ("nvlink", h100.nvlink_bytes_per_s)
    assert math.isclose(fsdp_tokens(h100, "network", per_node=8), fsdp_tokens(h100, "nvlink"))
    # the step-time model rides the same link: FSDP over 8 nodes, and DP with one GPU (or four) per node
    a, h = Cluster.of("A100-80GB"), Cluster.of("H100")
    assert shard_link(Layout(1, 1, 64, zero_stage=3), a) == ("network", per_node)
    assert shard_link(Layout(1, 1, 64, zero_stage=3), h) == ("nvlink", h100.nvlink_bytes_per_s)
    assert data_parallel_link(Layout(8, 1, 8), h) == ("network", h100.network_bytes_per_s)
    assert data_parallel_link(Layout(2, 1, 32), h) == ("network", 4 * h100.network_bytes_per_s)

def test_the_binding_link_is_chosen_at_the_rates_the_prediction_runs_at():
    """A results file that measured slower NICs moves the choice: at NCCL's sourced 0.94 an H100
    node's eight NICs outrun NVLink, at half that they bind the ring over whole nodes."""
    from playground.planner.costs import Cluster, Layout, shard_link
    h100, fsdp = Cluster.of("H100"), Layout(1, 1, 64, zero_stage=3)
    assert shard_link(fsdp, h100)[0] == "nvlink"
    slow_nics = replace(EFFICIENCY, network=EFFICIENCY.network / 2)
    assert shard_link(fsdp, h100, slow_nics) == ("network", 8 * h100.network_bytes_per_s)
    with pytest.raises(ValueError, match="link must be one of"):
        fsdp_tokens("H100", "infiniband")
