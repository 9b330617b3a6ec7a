"""Benchmarks: ``python -m playground.bench NAME [--json] [--save]``.

Each benchmark is a module ``playground/bench/<name>.py`` with a one-line docstring,
``add_arguments(parser)`` and ``run(args) -> dict``.  Speed and memory targets live here, as
ratios measured side by side in one run; tests check correctness, never wall-clock.  Results
carry their provenance (``playground.results.provenance``) and ``--save`` keeps them under ``results/``.
"""

from __future__ import annotations

import importlib
import os
import pkgutil

__all__ = ["benchmarks", "check_fits"]


def benchmarks() -> dict:
    """{name: module} of every benchmark."""
    return {info.name: importlib.import_module(f"{__name__}.{info.name}")
            for info in pkgutil.iter_modules(__path__) if not info.name.startswith("_")}


def check_fits(need_bytes: float, what: str, per_gpu: bool = False) -> None:
    """Refuse, up front, a run that would need more memory than there is: ``need_bytes`` in
    this machine's RAM, or (``per_gpu``) in one GPU's memory.  ValueError naming ``what``."""
    if per_gpu:
        import torch
        have, where = torch.cuda.get_device_properties(0).total_memory, "one GPU's memory"
    else:
        try:
            have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (AttributeError, ValueError, OSError):  # no sysconf (Windows): cannot tell, let it run
            return
        where = "this machine's memory"
    if need_bytes > have:
        raise ValueError(f"{what} needs about {need_bytes / 1e9:,.1f} GB, more than {where} "
                         f"({have / 1e9:,.1f} GB): choose smaller sizes")
