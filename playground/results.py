"""Benchmark results on record: the runs the book quotes, each with where it came from.

``python -m playground.bench NAME --save`` writes ``results/<NAME>-<device>.json`` with the
provenance of the run (host, device, library versions, backend, date, git commit).  Chapters read
them here, so a number measured on a GPU node is always shown with its origin, beside the
laptop run the reader just made.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["RESULTS_DIR", "on_record", "origin"]

RESULTS_DIR = Path(__file__).resolve().parent.parent / "results"


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
