"""Where a measurement came from: attached to every benchmark result the book quotes."""

from __future__ import annotations

import datetime
import os
import platform
import socket
import subprocess
from pathlib import Path

import torch
import torch.distributed as dist

__all__ = ["provenance"]

_ROOT = Path(__file__).resolve().parent.parent


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=_ROOT, capture_output=True,
                             text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def provenance(backend: str | None = None) -> dict:
    """Host, devices, library versions, backend, date and git commit of this run."""
    cuda = torch.cuda.is_available()
    nccl = None
    if cuda:
        try:
            nccl = ".".join(map(str, torch.cuda.nccl.version()))
        except Exception:  # noqa: BLE001 - a CUDA build without NCCL
            nccl = None
    return {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "device": torch.cuda.get_device_name(0) if cuda else f"CPU ({platform.processor() or platform.machine()})",
        "device_count": torch.cuda.device_count() if cuda else 0,
        "torch": torch.__version__,
        "nccl": nccl,
        "gloo": dist.is_gloo_available(),
        "backend": backend,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "git_commit": _git_commit(),
    }
