"""Routed experts' weights live on their expert-DP group: the ranks EP x ETP apart that hold the same
experts.  Their gradients reduce there and, under FSDP, their weights are gathered there, on that
group's link; and a transfer on another stream hides behind a layer's collectives as well as its
compute."""

from dataclasses import replace

import pytest

from playground.planner.comm_costs import (allgather_time, data_parallel_link, expert_data_parallel_link,
                                           fsdp_exposed_time, pass_windows)
from playground.planner.layout import EFFICIENCY, Cluster, Layout
from playground.planner.presets import preset
from playground.planner.step_time import predict

H100 = Cluster.of("H100")
MIXTRAL = preset("mixtral-8x7b")


@pytest.mark.parametrize("ep, nics", [(8, 1), (4, 2), (2, 4), (1, 8)])
def test_expert_dp_crosses_nodes_on_the_nics_its_members_hold_in_a_node(ep, nics):
    """64 GPUs, 8 a node, TP 1: with EP filling the node, each expert-DP member is alone on its node and
    rides its own NIC; with EP 1 the expert-DP group is the DP group, eight NICs (NVLink binds first)."""
    layout = Layout.today(1, 1, 64, ep=ep, micro_batch=1, global_batch=64)
    name, bw = expert_data_parallel_link(layout, H100)
    assert name == ("network" if nics < 8 else data_parallel_link(layout, H100)[0])
    if nics < 8:
        assert bw == nics * H100.network_bytes_per_s
    else:
        assert (name, bw) == data_parallel_link(layout, H100)


def test_expert_gradients_reduce_at_one_nic_when_ep_fills_the_node():
    """The distributed optimizer's reduce-scatter and gather: the dense part over all 64 ranks, the
    experts' over their 8 expert-DP ranks, one a node, at one NIC's rate."""
    layout = Layout.today(1, 1, 64, ep=8, micro_batch=1, global_batch=64)
    p = predict(MIXTRAL, H100, layout)
    from playground.planner.memory import stage_params
    dense, experts = stage_params(MIXTRAL, layout, 0, MIXTRAL.layers, 0)
    dp_name, dp_bw = data_parallel_link(layout, H100)
    nic = H100.network_bytes_per_s
    expected = sum(allgather_time(n_params * b, group, bw, EFFICIENCY, link)
                   for n_params, group, bw, link in ((dense, 64, dp_bw, dp_name), (experts, 8, nic, "network"))
                   for b in (layout.grad_bytes, 2))
    assert p["dp_comm_s"] == pytest.approx(expected)


def test_fsdp_does_not_gather_experts_a_rank_holds_whole():
    """FSDP 8 with EP 8 on one node: each rank holds its experts whole (an expert shard group of 1), so
    only the dense weights are gathered; with EP 2 the experts are sharded over four ranks, gathered too."""
    whole = Layout.today(1, 1, 8, ep=8, micro_batch=1, global_batch=8, zero_stage=3)
    assert (whole.expert_sharding_degree, replace(whole, ep=2).expert_sharding_degree) == (1, 4)
    cost = {"forward": 1e-4, "backward": 2e-4, "recompute": 0.0}   # too short to hide anything

    def exposed(experts):
        return fsdp_exposed_time(cost, 1e8, 8, 1e11, H100.gpu, EFFICIENCY, whole, experts=experts)
    assert exposed((4e8, 1, 1e11, "nvlink")) == exposed(None)
    assert exposed((4e8, 4, 1e11, "nvlink")) > exposed(None) + 3 * allgather_time(4e8, 4, 1e11, EFFICIENCY) * 0.9


def test_a_transfer_hides_behind_the_layers_collectives_too():
    cost = {"forward": 1.0, "backward": 3.0, "recompute": 0.0, "tp": 0.4, "cp": 0.0, "ep": 0.4}
    forward, backward = pass_windows(cost)
    assert (forward, backward) == pytest.approx((1.2, 3.6))
    assert pass_windows({"forward": 1.0, "backward": 2.0, "recompute": 1.0}) == (1.0, 3.0)


def test_the_report_names_the_link_each_group_rides():
    """The step-time report says where the bytes go: the experts' DP ring on one NIC when EP fills a node."""
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-m", "playground.step_time", "--model", "mixtral-8x7b", "--gpu", "H100",
                           "--gpus", "64", "--ep", "8", "--micro-batch-size", "1", "--global-batch", "64"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("links"))
    assert "EP 8 over nvlink" in line and "experts' DP 8 ring bound by network (50 GB/s)" in line
    assert "DP 64 ring bound by nvlink (450 GB/s)" in line   # eight NICs outrun an H100's NVLink


def test_hsdp_shards_experts_inside_its_shard_group_and_reduces_them_across_replicas():
    """HSDP over 8 of 64 ranks with EP 4: an expert is sharded over the 2 of its 16 expert-DP ranks inside one
    shard group and all-reduced across the 8 replicas; memory holds a half of its states, not a sixteenth."""
    from playground.planner.memory import memory_per_gpu
    fsdp = Layout.today(1, 1, 64, ep=4, micro_batch=1, global_batch=64, zero_stage=3)
    hsdp = replace(fsdp, shard_group=8)
    assert (fsdp.expert_sharding_degree, hsdp.expert_sharding_degree) == (16, 2)
    assert memory_per_gpu(MIXTRAL, hsdp)["model_states"] > memory_per_gpu(MIXTRAL, fsdp)["model_states"]
    from playground.planner.memory import stage_params
    from playground.planner.comm_costs import allreduce_time, replica_link
    dense, experts = stage_params(MIXTRAL, hsdp, 0, MIXTRAL.layers, 0)
    name, bw = replica_link(hsdp, H100)
    expected = (allreduce_time(dense * hsdp.grad_bytes / 8, 8, bw, EFFICIENCY, name)
                + allreduce_time(experts * hsdp.grad_bytes / 2, 8, bw, EFFICIENCY, name))
    assert predict(MIXTRAL, H100, hsdp)["dp_comm_s"] == pytest.approx(expected)
