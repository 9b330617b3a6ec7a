"""A job that loses a rank and is restarted by torchrun's elastic agent, resuming from a checkpoint.

Run as ``python -m torch.distributed.run --standalone --nproc-per-node 2 --max-restarts 1 -m
playground.failures.restart_runs --workdir DIR``: each rank is one process of the job, joined
through the course launcher's torchrun path.  On the first attempt rank 1 kills itself
(``os._exit``) at the start of step ``--fail-step``, once (a marker file in ``DIR`` remembers it);
its peer's next collective fails, the agent stops the group and starts it again
(``TORCHELASTIC_RESTART_COUNT`` = 1), and training resumes from the last checkpoint.  Rank 0 logs
every step it completes to ``DIR/steps.log``, so the work lost is read from the log.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path

from playground.launch import run, torchrun_world_size
from playground.failures.checkpoint import CHECKPOINT_CFG, load, save, sharded_model
from playground.failures.checkpoint_runs import train_step

__all__ = ["elastic_train", "lost_steps", "launch_torchrun", "read_log"]


def elastic_train(rank, world_size, workdir, steps, interval, fail_step, batch_size=8):
    """Train ``steps`` steps, checkpointing every ``interval``; resume from the newest checkpoint."""
    workdir, cfg = Path(workdir), CHECKPOINT_CFG
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", 0))
    model, optimizer = sharded_model(cfg)
    latest = workdir / "latest"
    start = int(latest.read_text()) if latest.exists() else 0
    if start:
        load(model, optimizer, workdir / f"step{start}")
    losses = []
    for step in range(start, steps):
        marker = workdir / "failed_once"
        if rank == 1 and step == fail_step and not marker.exists():
            marker.write_text(f"rank 1 exited at the start of step {step}\n")
            os._exit(1)                          # no goodbye: what a crashed host looks like to its peers
        losses.append(train_step(model, optimizer, cfg, step, rank, world_size, batch_size))
        if rank == 0:
            with open(workdir / "steps.log", "a") as log:
                log.write(f"{attempt} {step} {losses[-1]!r}\n")
        if (step + 1) % interval == 0 and step + 1 < steps:
            save(model, optimizer, workdir / f"step{step + 1}")
            if rank == 0:                        # a checkpoint counts only once every rank wrote it
                latest.write_text(str(step + 1))
    return {"attempt": attempt, "start": start, "losses": losses}


def read_log(workdir) -> list[tuple[int, int, float]]:
    """(attempt, step, loss) for every step rank 0 completed, in order."""
    rows = (line.split() for line in (Path(workdir) / "steps.log").read_text().splitlines())
    return [(int(a), int(s), float(loss)) for a, s, loss in rows]


def lost_steps(log) -> list[int]:
    """Steps done on an earlier attempt and done again on a later one: the work a failure lost."""
    later = {}
    for attempt, step, _ in log:
        later.setdefault(step, []).append(attempt)
    return sorted(step for step, attempts in later.items() if len(attempts) > 1)


def launch_torchrun(workdir, *, steps: int = 8, interval: int = 3, fail_step: int = 5, nproc: int = 2,
                    max_restarts: int = 1, timeout_s: float = 120.0) -> subprocess.CompletedProcess:
    """Run the job under ``torchrun --max-restarts`` in a subprocess; its completed process."""
    if not (0 < interval and 0 <= fail_step < steps):
        raise ValueError(f"need interval > 0 and 0 <= fail_step < steps, got {interval}, {fail_step}, {steps}")
    if nproc < 2:
        raise ValueError(f"the failing rank is rank 1: need nproc >= 2, got {nproc}")
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
               "--max-restarts", str(max_restarts), "--monitor-interval", "0.2",
               "-m", "playground.failures.restart_runs", "--workdir", str(workdir), "--steps", str(steps),
               "--interval", str(interval), "--fail-step", str(fail_step)]
    # its own session, so that on a timeout the agent and every worker it started go together
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)   # workers a killed agent left behind, if any
        except ProcessLookupError:
            pass
        proc.wait()
    return subprocess.CompletedProcess(command, proc.returncode, out, err)


def _join_this_attempt(world_size: int) -> None:
    """Join the group in a namespace of the agent's store that is this attempt's own: the store
    outlives a restart, and a new rank reading a dead rank's address from the last attempt would
    fail to connect ("Connection refused")."""
    import datetime
    import torch.distributed as dist
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world_size,
                          is_master=False, timeout=datetime.timedelta(seconds=60))
    dist.init_process_group("gloo", store=dist.PrefixStore(f"attempt{attempt}", store),
                            rank=int(os.environ["RANK"]), world_size=world_size,
                            timeout=datetime.timedelta(seconds=60))


def main() -> None:
    parser = argparse.ArgumentParser(description="train under torchrun; rank 1 fails once")
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--interval", type=int, default=3)
    parser.add_argument("--fail-step", type=int, default=5)
    opts = parser.parse_args()
    world_size = torchrun_world_size()
    if world_size is None:
        parser.error("run me under torchrun (python -m torch.distributed.run ... -m playground.failures.restart_runs)")
    _join_this_attempt(world_size)
    # under ``-m`` this file is ``__main__``; the launcher wants the function by its importable name
    from playground.failures.restart_runs import elastic_train as train
    values = run(train, world_size, opts.workdir, opts.steps, opts.interval, opts.fail_step)
    if int(os.environ["RANK"]) == 0:
        print(f"attempt {values[0]['attempt']} resumed at step {values[0]['start']}, finished step {opts.steps - 1}")


if __name__ == "__main__":
    main()
