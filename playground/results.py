"""Benchmark results on record: the runs the book quotes, each with where it came from.

``provenance()`` says where a measurement came from (host, devices, library versions, backend,
date, git commit); every benchmark result carries it.

``python -m playground.bench NAME --save`` writes ``results/<NAME>-<device>.json`` with the
provenance of the run (host, device, library versions, backend, date, git commit).  Chapters read
them here, so a number measured on a GPU node is always shown with its origin, beside the
laptop run the reader just made.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import socket
import subprocess
from pathlib import Path

import torch
import torch.distributed as dist

__all__ = ["RESULTS_DIR", "on_record", "origin", "provenance"]

_ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = _ROOT / "results"


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



def on_record(benchmark: str) -> list[dict]:
    """Every saved result of ``benchmark``, GPU runs first, then by device name."""
    runs = [json.loads(p.read_text()) for p in sorted(RESULTS_DIR.glob(f"{benchmark}-*.json"))]
    return sorted(runs, key=lambda r: (r["provenance"]["device_count"] == 0,
                                       r["provenance"]["device"]))


def origin(result: dict) -> str:
    """One line saying where a result was measured."""
    p = result["provenance"]
    where = (f"{p['device_count']} x {p['device']}" if p["device_count"]
             else f"{p['device']}, {p['cpu_count']} cores")
    commit = (p.get("git_commit") or "unknown")[:10]
    return (f"{where}; torch {p['torch']}, backend {p['backend'] or 'none'}; "
            f"{p['date'][:10]}; commit {commit}")
