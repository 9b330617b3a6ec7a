"""Two-axis layouts on 4 ranks train exactly like one process (asserted inside the ranks),
and each axis moves exactly the bytes its formula says; so do the DP and ZeRO rows of the map."""

import pytest

from playground.compose import stage_bounds
from playground.model import ModelConfig


def test_dp_tp_and_dp_pp_match_single_process_training_and_the_map_rows_hold():
    from playground.launch import run
    from playground.systems_map import map_runs
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
    from playground.compose import report
    assert report([v["compose"] for v in values], cfg)[1]  # what the chapter prints holds


def test_key_bias_gradient_is_rounding_noise_that_adam_would_blow_up():
    """Why the runs use SGD: the key bias's gradient is ~1e-9 (its true value is 0), six orders
    below the other parameters'; Adam's first step |g|/(|g| + eps) is still percents of lr."""
    from playground.compose import key_bias_gradients
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
    from playground.compose import train_dp_pp, train_dp_tp
    fn = train_dp_tp if kind == "tp" else train_dp_pp
    with pytest.raises(ValueError, match=match):  # no process group needed: nothing ran yet
        fn(0, 1, **kwargs)


def test_stage_bounds():
    assert stage_bounds(6, 2) == [0, 3, 6]
    assert stage_bounds(6, 4) == [0, 2, 3, 4, 6]  # near-equal, consecutive, covering
    with pytest.raises(ValueError, match="cannot cut 6 layers into 7"):
        stage_bounds(6, 7)
