"""How a launch fails: the launcher's errors, and how the parent tells a cause from its echoes.

When one rank fails, its peers fail too (a closed connection, a collective that never
completes), often within milliseconds.  ``collect`` gathers the ranks' results and, on the first
failure, ``_root_cause`` waits a moment for the others and blames the rank that failed first --
or a rank that died without a word, which is what its peers' errors are about.  When nothing
fails but the launch times out, ``where_stuck`` asks each live rank for its stack (SIGUSR1) and says
which collective each one waits in, called from where: the odd one out is the culprit.
"""

from __future__ import annotations

import os
import pickle
import queue
import signal
import time
from pathlib import Path

__all__ = ["LaunchError", "RankFailedError", "LaunchTimeoutError", "collect", "where_stuck"]

_POLL_S = 0.05


class LaunchError(RuntimeError):
    """Something about the launch itself is wrong (bad input, rendezvous)."""


class RankFailedError(LaunchError):
    """A rank raised an exception or exited abnormally."""

    def __init__(self, rank: int, message: str):
        super().__init__(message)
        self.rank = rank


class LaunchTimeoutError(LaunchError):
    """Ranks did not finish within ``timeout_s``."""


def _last_words(log_dir: str, rank: int, lines: int = 3) -> str:
    """The end of a dead rank's stderr: a native crash (a gloo abort on mismatched sizes, a
    segfault) prints its reason there and raises nothing the parent could report."""
    path = Path(log_dir) / f"rank{rank}.err"
    text = path.read_text(errors="replace").strip() if path.exists() else ""
    if not text:
        return ""
    tail = "\n".join(f"    {line}" for line in text.splitlines()[-lines:])
    return f"\n--- rank {rank} stderr, last lines ---\n{tail}"


def collect(procs, results, world_size, timeout_s, name, log_dir) -> list:
    """Every rank's value in rank order, or the one error that explains the failure."""
    deadline = time.monotonic() + timeout_s
    values: dict[int, object] = {}
    dead_since: dict[int, float] = {}
    while len(values) < world_size:
        try:
            rank, status, when, payload = results.get(timeout=_POLL_S)
        except queue.Empty:
            now = time.monotonic()
            for rank, p in enumerate(procs):
                if rank in values or p.is_alive():
                    continue
                # Give a message already in flight a moment to arrive before blaming the rank.
                if now - dead_since.setdefault(rank, now) > 1.0:
                    raise RankFailedError(
                        rank, f"rank {rank} of {name} exited with code {p.exitcode} "
                        "without returning (killed or crashed)" + _last_words(log_dir, rank))
            if now > deadline:
                waiting = [r for r in range(world_size) if r not in values]
                raise LaunchTimeoutError(
                    f"{name} timed out after {timeout_s:g} s: ranks {waiting} had not finished "
                    "(a hang, a deadlock, or a collective some rank never joined)") from None
            continue
        if status == "error":
            raise _root_cause(procs, results, (rank, when, payload), name, values, log_dir)
        values[rank] = pickle.loads(payload)
    for p in procs:
        p.join(5)
    return [values[r] for r in range(world_size)]


def _root_cause(procs, results, first, name, values, log_dir,
                grace_s: float = 1.0) -> RankFailedError:
    """One failure makes its peers fail too; blame the rank that failed first.

    A rank that died without a word (crash, kill, even ``os._exit(0)``) is the cause of its
    peers' connection errors: it is dead, sent no error and returned no value.
    """
    errors, returned = [first], set(values)
    until = time.monotonic() + grace_s
    while time.monotonic() < until:
        try:
            rank, status, when, payload = results.get(timeout=_POLL_S)
        except queue.Empty:
            continue
        if status == "error":
            errors.append((rank, when, payload))
        else:
            returned.add(rank)
    reported = {r for r, _, _ in errors}
    for r, p in enumerate(procs):
        if r not in reported | returned and not p.is_alive():
            return RankFailedError(r, f"rank {r} of {name} exited with code {p.exitcode} "
                                      f"without returning (killed or crashed); ranks "
                                      f"{sorted(reported)} failed in turn" + _last_words(log_dir, r))
    rank, _, payload = min(errors, key=lambda e: e[1])
    summary, _, tb = payload.partition("\n")
    others = sorted(r for r, _, _ in errors if r != rank)
    also = f" (then ranks {others} failed in turn)" if others else ""
    return RankFailedError(rank, f"rank {rank} of {name} raised {summary}{also}\n"
                                 f"--- rank {rank} traceback ---\n{tb}")


def where_stuck(procs, log_dir: str, wait_s: float = 5.0) -> dict[int, str]:
    """{rank: "all_reduce, called at file.py:42 in fn"} for every live rank: the innermost
    ``torch.distributed`` call (if any) and the frame of the user's code that made it, read from
    the stack dump each rank writes on SIGUSR1.  The odd one out is usually the culprit.  A loaded
    machine may take a while to write the dumps: they are read again until every live rank's is
    complete and no file still grows, for at most ``wait_s``."""
    live = [rank for rank, p in enumerate(procs) if p.is_alive()]
    for rank in live:
        os.kill(procs[rank].pid, signal.SIGUSR1)
    deadline, sizes, where = time.monotonic() + wait_s, None, {}
    while True:
        time.sleep(0.1)
        paths = {rank: Path(log_dir) / f"rank{rank}.err" for rank in live if procs[rank].is_alive()}
        now = {rank: path.stat().st_size if path.exists() else -1 for rank, path in paths.items()}
        where = {rank: w for rank, path in paths.items() if now[rank] >= 0 and (w := _stuck_at(path))}
        if (set(where) == set(paths) and now == sizes) or time.monotonic() > deadline:
            return where
        sizes = now


def _stuck_at(path: Path) -> str | None:
    """Where the main thread of the dump in ``path`` stands, or None if there is no such dump yet."""
    dump = path.read_text(errors="replace").split("(most recent call first):")
    stack = next((d for d in reversed(dump) if " in _child" in d), "")  # the rank's main thread
    frames = [line.strip()[len('File "'):].split('", line ') for line in stack.splitlines()
              if line.strip().startswith('File "')]
    frames = [(f, *rest[0].split(" in ")) for f, *rest in frames if rest]
    user = next(((f, n, name) for f, n, name in frames if f"{os.sep}torch{os.sep}" not in f
                 and not f.endswith(("launch.py", "threading.py"))), None)
    op = next((name for f, _, name in frames if f"{os.sep}distributed{os.sep}" in f
               and not name.startswith("_") and name != "wrapper"), None)
    if not user:
        return None
    short = os.path.relpath(user[0]) if not os.path.relpath(user[0]).startswith("..") else user[0]
    return (f"{op}, called at " if op else "") + f"{short}:{user[1]} in {user[2]}"
