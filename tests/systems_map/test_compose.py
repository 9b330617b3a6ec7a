"""Two-axis layouts on 4 ranks train exactly like one process (asserted inside the ranks), DP x TP
and DP x PP also exactly like PyTorch's 2-D DeviceMesh runs, and each axis moves exactly the bytes
its formula says; so do the DP and ZeRO rows of the map."""

import pytest

from playground.systems_map.compose import stage_bounds
from playground.model import ModelConfig


def test_dp_tp_and_dp_pp_match_single_process_training_and_the_map_rows_hold():
    from playground.launch import run
    from playground.systems_map.placement import map_runs
    cfg = ModelConfig()
    s, h, L, e, n = cfg.seq_len, cfg.d_model, cfg.n_layers, 4, 4
    values = run(map_runs, n, quiet=True)  # compose_runs (3 steps, batch 8) + one DP/ZeRO step
    for v in values:
        # DP, ZeRO-1, ZeRO-2 send 2(n-1)/n Psi e per step; ZeRO-3 3(n-1)/n Psi e
        psi_e = cfg.param_count() * e
        assert v["dp"]["sent"] == {0: 2 * (n - 1) * psi_e // n, 1: 2 * (n - 1) * psi_e // n,
                                   2: 2 * (n - 1) * psi_e // n, 3: 3 * (n - 1) * psi_e // n}
        tp, pp = v["compose"]["dp_tp"], v["compose"]["dp_pp"]
        assert tp["losses"] == pytest.approx(tp["reference_losses"], rel=1e-5)
        # the launch the chapter shows checks both layouts against PyTorch too
        assert tp["pytorch"]["max_param_diff"] < 1e-5 and pp["pytorch"]["max_param_diff"] < 1e-5
        per_dp = tp["batch"] // tp["dp"]
        # TP: 4 all-reduces of (b/dp) s h per layer per step; DP: one of the local parameters
        assert tp["dp_per_step"]["payload_bytes"] == {"all_reduce": tp["local_param_bytes"]}
        assert tp["all"]["calls"] == {"all_reduce": tp["steps"] * (4 * L + 1)}
        assert tp["all"]["payload_bytes"]["all_reduce"] == tp["steps"] * (
            4 * L * per_dp * s * h * e + tp["local_param_bytes"])
        # PP (2 stages): stage 0 sends activations, stage 1 gradients, (b/dp) s h each per step
        assert pp["all"]["sent_bytes"] == pp["steps"] * per_dp * s * h * e
        assert pp["all"]["received_bytes"] == pp["all"]["sent_bytes"]
        assert pp["dp_per_step"]["payload_bytes"] == {"all_reduce": pp["local_param_bytes"]}
    from playground.systems_map.compose import report
    assert report([v["compose"] for v in values], cfg)[1]  # what the chapter prints holds


def test_dp_tp_equals_pytorch_2d_mesh_dtensor_tp_with_fsdp2_dp():
    """PyTorch's production DP x TP: a 2-D DeviceMesh ("dp", "tp"), DTensor ColwiseParallel /
    RowwiseParallel on the tp sub-mesh, fully_shard (FSDP2) on the dp sub-mesh, trained from the
    same weights on the same batches with the same SGD + momentum.  Every rank asserts with
    assert_close that its losses and every parameter shard of ours equal PyTorch's (gathered
    with full_tensor()); here, what it reports."""
    import torch

    from playground.systems_map.compose import train_dp_tp
    from playground.launch import run
    L = ModelConfig().n_layers
    for ours in run(train_dp_tp, 4, 2, 2, quiet=True):  # dp=2, tp=2, 3 steps, batch 8
        theirs = ours["pytorch"]
        assert theirs["mesh"] == ("dp", "tp") and theirs["mesh_shape"] == (2, 2)
        # a TP weight really is split on both axes: rows over tp, and those rows again over dp
        assert len(theirs["fc1_placements"]) == 2
        assert all("Shard(dim=0" in p for p in theirs["fc1_placements"])
        torch.testing.assert_close(torch.tensor(theirs["losses"]), torch.tensor(ours["losses"]),
                                   rtol=1e-5, atol=1e-6)
        # every parameter tensor of ours: embedding 2, 12 per TP block (fused q|k|v), head 4
        assert theirs["params_checked"] == 2 + 12 * L + 4
        assert theirs["max_loss_diff"] < 1e-5 and theirs["max_param_diff"] < 1e-5


def test_dp_pp_equals_pytorch_2d_mesh_pipelining_gpipe_with_fsdp2_dp():
    """PyTorch's production DP x PP: a 2-D DeviceMesh ("dp", "pp"), torch.distributed.pipelining
    (PipelineStage of the same layer slice as ours, ScheduleGPipe with the same 2 micro-batches,
    gradients scaled by 1/2 as our loss is) on the pp sub-mesh's group, fully_shard (FSDP2) of the
    stage on the dp sub-mesh, trained from the same weights on the same batches with the same
    SGD + momentum.  Every rank asserts with assert_close that its losses and every parameter of
    its stage equal PyTorch's (gathered with full_tensor()); here, what it reports."""
    import torch

    from playground.systems_map.compose import stage_bounds, train_dp_pp
    from playground.launch import run
    from playground.model import build_model
    layers = build_model(ModelConfig()).layers
    cut = stage_bounds(len(layers), 2)
    values = run(train_dp_pp, 4, 2, 2, quiet=True)  # dp=2, pp=2, 3 steps, batch 8, 2 micro-batches
    for rank, ours in enumerate(values):
        theirs, k = ours["pytorch"], rank % 2  # grid (dp, pp): pp is the fast axis
        assert theirs["mesh"] == ("dp", "pp") and theirs["mesh_shape"] == (2, 2)
        assert theirs["schedule"] == "ScheduleGPipe" and theirs["micro_batches"] == 2
        assert theirs["dp_sharded"] == "DTensor"  # FSDP2 really sharded the stage over dp
        torch.testing.assert_close(torch.tensor(theirs["losses"]), torch.tensor(ours["losses"]),
                                   rtol=1e-5, atol=1e-6)
        # every parameter tensor of this rank's stage was compared
        stage_params = sum(1 for m in layers[cut[k]:cut[k + 1]] for _ in m.parameters())
        assert theirs["params_checked"] == stage_params
        assert theirs["max_loss_diff"] < 1e-5 and theirs["max_param_diff"] < 1e-5
    from playground.systems_map.compose_torch import pytorch_pp_report
    text, held = pytorch_pp_report([v["pytorch"] for v in values])
    assert held and f"all {sum(1 for _ in build_model(ModelConfig()).parameters())} parameter" in text


def test_key_bias_gradient_is_rounding_noise_that_adam_would_blow_up():
    """Why the runs use SGD: the key bias's gradient is ~1e-9 (its true value is 0), six orders
    below the other parameters'; Adam's first step |g|/(|g| + eps) is still percents of lr."""
    from playground.systems_map.compose import key_bias_gradients
    g = key_bias_gradients()
    assert g["count"] == 128 and g["max"] < 1e-7 < 1e-5 < g["other_median"]
    assert 0.01 < g["adam_median"] < g["adam_max"] < 1


@pytest.mark.parametrize("kind, kwargs, match", [
    ("tp", dict(dp=1, tp=2, steps=0), "steps must be a positive integer"),
    ("tp", dict(dp=3, tp=1, batch=8), "batch of 8 examples does not split evenly over dp=3"),
    ("pp", dict(dp=1, pp=2, micro_batches=0), "micro_batches must be a positive integer"),
    ("pp", dict(dp=2, pp=1, batch=8, micro_batches=3), "4 examples per DP rank do not split"),
    ("pp", dict(dp=1, pp=7), "cannot cut 6 layers into 7"),
])
def test_bad_layouts_are_refused_before_any_collective(kind, kwargs, match):
    from playground.systems_map.compose import train_dp_pp, train_dp_tp
    fn = train_dp_tp if kind == "tp" else train_dp_pp
    with pytest.raises(ValueError, match=match):  # no process group needed: nothing ran yet
        fn(0, 1, **kwargs)


def test_stage_bounds():
    assert stage_bounds(6, 2) == [0, 3, 6]
    assert stage_bounds(6, 4) == [0, 2, 3, 4, 6]  # near-equal, consecutive, covering
    with pytest.raises(ValueError, match="cannot cut 6 layers into 7"):
        stage_bounds(6, 7)
