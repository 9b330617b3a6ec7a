"""The command line of every demo: ``python -m playground.<demo> [--nproc N] [--timeout S]``.

Each demo module ends with ``if __name__ == "__main__": cli(fn, report=...)``.  Locally it
launches ``--nproc`` ranks with ``playground.launch.run``; under ``torchrun`` this process is one
rank of the job.  Bad input and Ctrl-C end the command with one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys

from playground.launch import (DEFAULT_TIMEOUT_S, LaunchError, is_main_process, run,
                               torchrun_world_size)

__all__ = ["cli"]


def _importable(fn):
    """Under ``python -m playground.x`` the demo's module is ``__main__``: use its real name."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if getattr(fn, "__module__", None) == "__main__" and spec is not None:
        return getattr(importlib.import_module(spec.name), fn.__qualname__)
    return fn


def cli(fn, *args, default_world_size: int = 4, description: str | None = None,
        report=None, check=None) -> list | None:
    """Entry point of a demo module: ``python -m playground.<demo> [--nproc N]``.

    Under ``torchrun`` (``RANK``/``WORLD_SIZE`` set) this process *is* one rank: it joins the
    job through the environment (NCCL on ``cuda:LOCAL_RANK`` when a GPU is present, else gloo)
    and calls ``fn`` once.  Otherwise it launches ``--nproc`` local ranks with ``run``.
    ``report(values)`` (optional) prints a summary of the per-rank return values (on rank 0).
    ``check(world_size)`` (optional) raises ``ValueError`` for a world size the demo cannot use,
    so that it is refused in one line before any rank starts.  Bad input and Ctrl-C end the
    command with one line on stderr (exit status 2 and 130), never a traceback.
    """
    fn = _importable(fn)
    parser = argparse.ArgumentParser(description=description or (fn.__doc__ or "").strip())
    parser.add_argument("--nproc", type=int, default=torchrun_world_size() or default_world_size,
                        help=f"number of local ranks (default {default_world_size}; "
                             "under torchrun, its world size)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds")
    opts = parser.parse_args()
    if opts.nproc < 1:
        parser.error(f"--nproc must be >= 1, got {opts.nproc}")
    if not 0 < opts.timeout < 1e9:
        parser.error(f"--timeout must be a finite number of seconds > 0, got {opts.timeout}")
    try:
        if check is not None:
            try:
                check(opts.nproc)
            except ValueError as exc:
                raise LaunchError(str(exc)) from None
        values = run(fn, opts.nproc, *args, timeout_s=opts.timeout)
        if report is not None:
            # Under torchrun every rank runs the report (it may launch further collective runs,
            # which need the whole job), but only rank 0's output is shown.
            with open(os.devnull, "w") as sink, contextlib.redirect_stdout(
                    sys.stdout if is_main_process() else sink):
                report(values)
    except LaunchError as exc:
        # one write per line: under torchrun every rank refuses at once on the same stderr, and
        # print's separate write of the newline lets two ranks' lines run together
        sys.stderr.write(f"error: {str(exc).splitlines()[0]}\n")
        raise SystemExit(2) from None
    except KeyboardInterrupt:
        sys.stderr.write("interrupted: every rank was stopped\n")
        raise SystemExit(130) from None
    return values
