"""The GPU path: the same code on CUDA with NCCL. Skipped (with the reason) where there is no GPU."""

import argparse

import pytest
import torch

from playground.launch import run
from playground.model import ModelConfig, build_model, synthetic_batch, train_step
from playground.ring_pass import pass_around_ring, predicted_bytes

pytestmark = pytest.mark.gpu


def _world():
    return min(torch.cuda.device_count(), 4)


def test_ring_pass_on_nccl_moves_the_predicted_bytes():
    n = _world()
    if n < 2:  # one rank sends nothing: (n-1)·S = 0 bytes would compare 0 with 0
        pytest.skip(f"a ring on NCCL needs >= 2 GPUs, this machine has {n}")
    values = run(pass_around_ring, n, 4096, backend="nccl", quiet=True)
    assert [v["sent_bytes"] for v in values] == [predicted_bytes(n, 4096)] * n
    assert [sorted(v["seen"]) for v in values] == [list(range(n))] * n


def test_a_training_step_on_the_gpu_matches_the_cpu():
    cfg = ModelConfig()
    batch = synthetic_batch(cfg, 8, 0)
    cpu = build_model(cfg, seed=3)
    gpu = build_model(cfg, seed=3, device="cuda")
    for model, b in ((cpu, batch), (gpu, tuple(t.cuda() for t in batch))):
        train_step(model, torch.optim.SGD(model.parameters(), lr=0.1), b)
    for p, q in zip(cpu.parameters(), gpu.parameters()):
        torch.testing.assert_close(p, q.cpu(), rtol=1e-3, atol=1e-4)


def test_mfu_benchmark_reports_a_plausible_mfu():
    from playground.bench import mfu
    args = argparse.Namespace(hidden=1024, layers=2, heads=8, seq_len=512, vocab=8192, batch=4,
                              steps=3, warmup=1, device="cuda")
    result = mfu.run(args)
    assert result["achieved_tflops"] > 0
    # on CUDA the GPU must be found in the hardware table, so that an MFU is claimed at all
    assert result["mfu"] is not None, (f"{torch.cuda.get_device_name()} not found in "
                                       "playground/hardware.py: no peak, no MFU")
    assert result["gpu_in_table"] is not None
    assert 0 < result["mfu"] <= 1
    assert result["mfu"] == pytest.approx(result["achieved_tflops"] / result["peak_tflops"], abs=1e-3)
    assert 0.8 < result["formula_over_counted"] < 1.25


def test_every_pipeline_schedule_on_nccl_equals_single_process():
    # NCCL matches point-to-point messages in order (no tags): this is where a schedule whose
    # send and receive orders disagreed would fail
    from playground.pipeline_parallel import PipeSpec, run_pipeline
    from playground.pipeline_parallel import reference_step
    if _world() < 2:
        pytest.skip(f"a pipeline on NCCL needs >= 2 GPUs, this machine has {_world()}")
    K = 2
    specs = [PipeSpec(s, stages=K, micro_batches=4, chunks=2 if s == "interleaved" else 1,
                      device_time_s=None, keep_state=True) for s in ("gpipe", "1f1b", "interleaved")]
    for rec in run_pipeline(specs, world_size=K):
        ref = reference_step(rec["spec"])
        for name, grad in ref["grads"].items():
            torch.testing.assert_close(rec["grads"][name], grad, rtol=1e-4, atol=1e-5)
