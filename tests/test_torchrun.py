"""Demos and benchmarks run unchanged under torchrun (here on CPU with gloo; NCCL on GPUs)."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"]


def _torchrun(*args):
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    return subprocess.run([*TORCHRUN, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=180)


def test_a_demo_under_torchrun_reports_once_from_rank_zero():
    out = _torchrun("-m", "playground.ring_pass")
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("predicted 4096 B sent per rank, measured [4096]") == 1


def test_a_benchmark_under_torchrun_uses_the_job_as_its_ranks():
    out = _torchrun("-m", "playground.bench", "launch", "--repeats", "1", "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)          # one JSON object: only rank 0 printed
    assert result["nproc"] == 2 and result["provenance"]["backend"] == "gloo"


def test_a_demo_whose_report_launches_more_runs_under_torchrun():
    """systems_map's report runs further collective jobs: every rank must take part in them."""
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "4",
                          "-m", "playground.systems_map.placement"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.count("TP + SP        counted") == 1 and "DIFFERENT" not in out.stdout


def test_a_world_size_the_demo_cannot_use_is_refused_by_every_rank_in_one_line():
    out = _torchrun("-m", "playground.systems_map.compose")   # a 2 x 2 grid on a job of 2
    assert out.returncode != 0
    ours = [l for l in out.stderr.splitlines() if "compose_runs" in l]
    # each rank refuses before it communicates; torchrun stops the job when the first one exits, so
    # the other says it too unless the agent's SIGTERM reaches it first (a race, not a second message)
    assert 1 <= len(ours) <= 2, out.stderr
    assert set(ours) == {"error: compose_runs lays out a 2 x 2 grid: it needs 4 ranks, got 2"}, out.stderr
    assert "[rank0]: Traceback" not in out.stderr    # torchrun's own summary follows, not ours


def test_two_nodes_joined_by_c10d_rendezvous_run_one_job():
    """The multi-node command of the README, with both "nodes" on this machine."""
    import socket
    with socket.socket() as s:  # a free port for the rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "2",
               "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}",
               "-m", "playground.ring_pass"]
    nodes = [subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        outputs = [node.communicate(timeout=180) for node in nodes]
    finally:
        for node in nodes:
            node.kill()
    assert [node.returncode for node in nodes] == [0, 0], [err[-2000:] for _, err in outputs]
    stdout = "".join(out for out, _ in outputs)
    # 4 ranks over 2 nodes; rank 0 (on one of them) reports once
    assert stdout.count("4 ranks, one float32 tensor of 1024 elements each: predicted 12288 B sent "
                        "per rank, measured [12288]") == 1
