"""bench profile: a training step's device time by kind of kernel, beside the step-time model."""

import json

import pytest

from playground.bench.__main__ import main as bench_main
from playground.bench.profile import OTHER, kernel_class

TINY = ["--device", "cpu", "--steps", "1", "--warmup", "1", "--hidden", "64", "--layers", "1", "--heads", "2",
        "--seq-len", "32", "--vocab", "128", "--batch", "2"]


def test_a_cpu_profile_puts_every_operator_in_one_class(capsys):
    assert bench_main(["profile", "--json", *TINY]) == 0
    r = json.loads(capsys.readouterr().out)
    assert sum(r["by_class_s"].values()) == pytest.approx(r["kernel_time_per_step_s"], abs=1e-3)
    assert r["by_class_s"]["matrix products"] > 0 and r["by_class_s"]["attention"] > 0
    assert r["groups_predicted_s"] is None and "no step-time model for a CPU" in r["note"]
    assert r["top_kernels"] and all(k["class"] == kernel_class(k["name"]) for k in r["top_kernels"])


@pytest.mark.parametrize("name,expected", [        # kernels a profile of the bench on an H200 named
    ("nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT", "matrix products"),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_26_64x64x128", "attention"),
    ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<FusedOptimizerTensorListMetadata>", "optimizer"),
    ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float>", "loss"),
    ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda>", OTHER),
    ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float, false>", OTHER),
    ("aten::addmm", "matrix products"), ("aten::gelu_backward", OTHER),
])
def test_each_kernel_falls_in_its_class_by_name(name, expected):
    assert kernel_class(name) == expected


def test_a_run_that_cannot_be_profiled_is_one_line_and_exit_2(capsys):
    assert bench_main(["profile", "--device", "cpu", "--steps", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and err.count("\n") == 1 and "--steps must be >= 1" in err
