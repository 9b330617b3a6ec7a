"""Run one function on N ranks: the course's single launcher.

``run(fn, world_size, *args)`` starts ``world_size`` processes, joins them into one
``torch.distributed`` process group and returns what ``fn(rank, world_size, *args)`` returned
on each rank, in rank order.  The same demo code also runs under ``torchrun`` (see ``playground.launch_cli``).

Design choices, each for a reason a reader will meet:

* Rendezvous through a ``TCPStore`` the parent holds on 127.0.0.1, port 0: the kernel picks a
  free port, so two notebooks (or a notebook and the test suite) never collide.
* One CPU thread per rank on gloo: two ranks per core already oversubscribe a laptop.
* Each rank's stdout/stderr is captured at the file-descriptor level and re-printed by the
  parent, rank by rank, so a cell prints the same thing under Jupyter and under pytest.
* A rank that raises, dies, or hangs ends the whole job with one error that names the rank;
  no child outlives the call, not even after the notebook's stop button.
"""

from __future__ import annotations

import atexit
import datetime
import faulthandler
import importlib
import multiprocessing as mp
import numbers
import os
import pickle
import signal
import sys
import tempfile
import threading
import time
import traceback
from contextlib import contextmanager
from pathlib import Path

import torch
import torch.distributed as dist

__all__ = ["run", "device", "torchrun_world_size", "is_main_process", "LaunchError", "RankFailedError", "LaunchTimeoutError"]

DEFAULT_TIMEOUT_S = 120.0
# Each local rank is a whole process (torch, a gloo mesh to every peer): far more than this
# would exhaust a machine's memory and file descriptors instead of failing with a message.
MAX_LOCAL_RANKS = 64
_RANK_TIMEOUT_GRACE_S = 10.0


from playground.launch_errors import (LaunchError, LaunchTimeoutError, RankFailedError, where_stuck,
                                      collect)

# ----------------------------------------------------------------------------- backend / device
def pick_backend(world_size: int) -> str:
    """NCCL when every rank can have its own GPU, gloo on CPU otherwise."""
    if torch.cuda.is_available() and torch.cuda.device_count() >= world_size:
        return "nccl"
    return "gloo"


def device() -> torch.device:
    """The device this rank computes on: ``cuda:LOCAL_RANK`` under NCCL, else the CPU."""
    if dist.is_initialized() and dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


# ----------------------------------------------------------------------------- input checks
def _check_function(fn) -> None:
    """Spawned children re-import ``fn`` by module and name: refuse what they cannot find."""
    if not callable(fn):
        raise LaunchError(f"fn must be a function, got {type(fn).__name__}")
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", "")
    if module in (None, "__main__") or "<lambda>" in qualname or "<locals>" in qualname:
        raise LaunchError(
            f"cannot launch {qualname or fn!r}: worker processes re-import the function by name, "
            "so it must be defined at module level in an importable module (a .py file), "
            "not in a notebook, a lambda or another function; put it in a module and import it"
        )
    try:
        found = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
    except Exception:  # noqa: BLE001 - any failure means the child cannot find it either
        found = None
    if found is not fn:
        raise LaunchError(f"cannot launch {qualname}: it is not importable as {module}.{qualname}; "
                          "put it at module level in an importable module")


def _check_world_size(world_size) -> int:
    if isinstance(world_size, bool) or not isinstance(world_size, int):
        raise LaunchError(f"world_size must be an integer >= 1, got {world_size!r}")
    if world_size < 1:
        raise LaunchError(f"world_size must be >= 1, got {world_size}")
    return world_size


# ----------------------------------------------------------------------------- the child
def _exit_when_orphaned(parent_pid: int) -> None:
    """If the parent dies without cleaning up (kernel killed), do not linger as an orphan."""
    while True:
        try:
            os.kill(parent_pid, 0)  # the launching process, not our fork server parent
        except ProcessLookupError:
            os._exit(1)
        time.sleep(0.5)


def _child(fn, rank, world_size, args, store_port, backend, timeout_s, log_dir, results,
           parent_pid):
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when children stop
    threading.Thread(target=_exit_when_orphaned, args=(parent_pid,), daemon=True).start()
    for fd, name in ((1, "out"), (2, "err")):
        f = open(Path(log_dir) / f"rank{rank}.{name}", "w")
        os.dup2(f.fileno(), fd)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)
    # On a timeout the parent asks each rank where it waits: SIGUSR1 dumps its Python stacks to
    # its stderr, even while it is blocked inside a C++ collective (see ``launch_errors.where_stuck``).
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    try:
        torch.set_num_threads(1)
        if backend == "nccl":
            torch.cuda.set_device(rank % torch.cuda.device_count())
        # The ranks' own timeouts outlast the launcher's deadline, so that a hang is reported
        # once, by the parent, as a timeout (not as a peer's "timed out waiting for recv").
        grace = datetime.timedelta(seconds=timeout_s + _RANK_TIMEOUT_GRACE_S)
        store = dist.TCPStore("127.0.0.1", store_port, world_size + 1, is_master=False,
                              timeout=grace)
        dist.init_process_group(backend, store=store, rank=rank, world_size=world_size,
                                timeout=grace)
        # Start only once every rank has joined: gloo connects the ranks pair by pair inside
        # init, and a rank whose fn returns at once would otherwise leave while a slower peer
        # is still connecting to it ("connectFullMesh failed"), failing a job that did no wrong.
        store.set(f"joined/{rank}", "1")
        store.wait([f"joined/{r}" for r in range(world_size)])
        value = fn(rank, world_size, *args)
        sys.stdout.flush()
        dist.destroy_process_group()
        try:
            payload = pickle.dumps(value)
        except Exception as exc:  # noqa: BLE001 - say what went wrong, not where pickle failed
            raise LaunchError(f"{getattr(fn, '__qualname__', fn)} returned a value the parent "
                              f"cannot receive (not picklable): {exc}") from None
        results.put((rank, "ok", time.time(), payload))
    except BaseException as exc:  # noqa: BLE001 - report everything, including SystemExit
        # Report before tearing the group down: the peers' "connection closed" errors are
        # consequences, and the parent tells them apart by when each exception happened.
        failed_at = time.time()
        tb = traceback.format_exc()
        print(tb, file=sys.stderr, end="")
        results.put((rank, "error", failed_at, f"{type(exc).__name__}: {exc}\n{tb}"))
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


# ----------------------------------------------------------------------------- the parent
def _context():
    """Fork ranks from a server that has already imported torch: a fresh interpreter per rank
    would import it again (~2 s each on a laptop).  Like spawn, a fork server runs a function
    it re-imports by name, and it starts no CUDA context of its own."""
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "torch.distributed", "playground.launch"])
    return ctx


@contextmanager
def _child_env():
    """Environment the children start with: one thread per rank, no stray rendezvous vars."""
    saved = dict(os.environ)
    os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        os.environ.pop(key, None)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _stop(procs, grace_s: float = 2.0) -> None:
    for p in procs:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + grace_s
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join()


def _replay_output(log_dir: str, world_size: int, quiet: bool) -> None:
    """Print each rank's captured output, whole lines, in rank order."""
    for rank in range(world_size):
        for name, stream in (("out", sys.stdout), ("err", sys.stderr)):
            path = Path(log_dir) / f"rank{rank}.{name}"
            if quiet or not path.exists():
                continue
            text = path.read_text(errors="replace")
            if text:
                lines = text.rstrip("\n").split("\n")
                stream.write("".join(f"[rank {rank}] {line}\n" for line in lines))
    sys.stdout.flush()
    sys.stderr.flush()


def run(fn, world_size: int, *args, timeout_s: float = DEFAULT_TIMEOUT_S,
        backend: str | None = None, quiet: bool = False) -> list:
    """Run ``fn(rank, world_size, *args)`` on ``world_size`` ranks; return results in rank order.

    ``fn`` must be a module-level function of an importable module.  ``backend`` defaults to
    NCCL when there are at least ``world_size`` GPUs, else gloo.  Every rank's output is
    re-printed as ``[rank k] ...`` (``quiet=True`` drops it).  Raises ``RankFailedError`` naming
    the first rank that failed, or ``LaunchTimeoutError`` after ``timeout_s`` seconds.
    """
    world_size = _check_world_size(world_size)
    _check_function(fn)
    if (isinstance(timeout_s, bool) or not isinstance(timeout_s, numbers.Real)
            or not 0 < timeout_s < 1e9):  # inf would overflow the ranks' timedelta
        raise LaunchError(f"timeout_s must be a number of seconds > 0 (and finite), got {timeout_s!r}")
    if torchrun_world_size() is not None:
        return _run_as_torchrun_rank(fn, world_size, args, timeout_s)
    if world_size > MAX_LOCAL_RANKS:
        raise LaunchError(f"world_size {world_size} is more local ranks than one machine can run "
                          f"(at most {MAX_LOCAL_RANKS}, each rank is a process); use torchrun "
                          "across nodes for more")
    backend = backend or pick_backend(world_size)
    if backend not in ("gloo", "nccl"):
        raise LaunchError(f"backend must be 'gloo' or 'nccl', got {backend!r}")
    if backend == "nccl" and torch.cuda.device_count() < world_size:
        raise LaunchError(f"backend nccl needs {world_size} GPUs, found {torch.cuda.device_count()}")
    try:
        pickle.dumps(args)
    except Exception as exc:  # noqa: BLE001
        raise LaunchError(f"arguments for {fn.__qualname__} cannot be sent to the ranks "
                          f"(not picklable): {exc}") from None

    ctx = _context()
    store = dist.TCPStore("127.0.0.1", 0, world_size + 1, is_master=True,
                          wait_for_workers=False, timeout=datetime.timedelta(seconds=timeout_s))
    results = ctx.Queue()
    procs: list = []
    with tempfile.TemporaryDirectory(prefix="playground-") as log_dir:
        try:
            with _child_env():
                for rank in range(world_size):
                    p = ctx.Process(target=_child, daemon=True, name=f"rank{rank}",
                                    args=(fn, rank, world_size, args, store.port, backend,
                                          timeout_s, log_dir, results, os.getpid()))
                    p.start()
                    procs.append(p)
            try:
                values = collect(procs, results, world_size, timeout_s, fn.__qualname__, log_dir)
            except LaunchTimeoutError as exc:
                where = where_stuck(procs, log_dir)
                lines = "".join(f"\n  rank {r} waits in {w}" for r, w in where.items())
                error = LaunchTimeoutError(f"{exc}{lines}")
                error.where = where
                raise error from None
        finally:
            _stop(procs)
            results.close()
            _replay_output(log_dir, world_size, quiet)
            del store
    return values


# ----------------------------------------------------------------------------- torchrun / shell
def torchrun_world_size() -> int | None:
    """WORLD_SIZE when this process was started by torchrun (one rank of a job), else None."""
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        return int(os.environ["WORLD_SIZE"])
    return None


def is_main_process() -> bool:
    """True except on the non-zero ranks of a torchrun job (who should not print reports)."""
    return int(os.environ.get("RANK", 0)) == 0 or torchrun_world_size() is None


def _run_as_torchrun_rank(fn, world_size: int, args, timeout_s: float) -> list:
    """Under torchrun this process *is* one rank: join through the environment, run ``fn`` once,
    and return every rank's value (gathered), like ``run`` does for local ranks."""
    given = torchrun_world_size()
    if world_size != given:
        raise LaunchError(f"under torchrun the world size is {given} (--nnodes x --nproc-per-node); "
                          f"{fn.__qualname__} asked for {world_size}")
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", 0))
    if not dist.is_initialized():
        # Join once per process and stay joined: a demo's report may launch further runs, and
        # re-joining torchrun's store after leaving it is not supported.
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        if backend == "nccl":
            torch.cuda.set_device(local_rank)
        else:
            torch.set_num_threads(1)
        dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s))
        atexit.register(_leave_group)
    value = fn(rank, world_size, *args)
    gathered = [None] * world_size
    dist.all_gather_object(gathered, value)
    return gathered


def _leave_group() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()
