"""Benchmarks: ``python -m playground.bench NAME [--json] [--save]``.

Each benchmark is a module ``playground/bench/<name>.py`` with a one-line docstring,
``add_arguments(parser)`` and ``run(args) -> dict``.  Speed and memory targets live here, as
ratios measured side by side in one run; tests check correctness, never wall-clock.  Results
carry their provenance (``playground.provenance``) and ``--save`` keeps them under ``results/``.
"""

from __future__ import annotations

import importlib
import pkgutil

__all__ = ["benchmarks"]


def benchmarks() -> dict:
    """{name: module} of every benchmark."""
    return {info.name: importlib.import_module(f"{__name__}.{info.name}")
            for info in pkgutil.iter_modules(__path__) if not info.name.startswith("_")}
