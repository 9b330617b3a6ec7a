"""Numbers on the planner's command line: K/M/B/T (decimal) and Ki/Mi/Gi/Ti (binary) suffixes, and
the one-line errors for a flag that is not a positive finite number or not a whole one."""

from __future__ import annotations

import math

from playground.planner.errors import PlanError

__all__ = ["parse_number", "number", "whole"]

_SUFFIX = {"k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12, "p": 1e15,
           "ki": 2 ** 10, "mi": 2 ** 20, "gi": 2 ** 30, "ti": 2 ** 40}


def parse_number(text: str) -> float:
    """'175e9', '175B', '1.4T', '4M' (4e6), '16Mi' (2^24) -> float; anything else -> PlanError."""
    t = str(text).strip()
    scale = 1.0
    for suffix in sorted(_SUFFIX, key=len, reverse=True):
        if t.lower().endswith(suffix) and t[:-len(suffix)][-1:].replace(".", "0").isdigit():
            scale, t = _SUFFIX[suffix], t[:-len(suffix)]
            break
    try:
        value = float(t) * scale
    except ValueError:
        raise PlanError(f"not a number: {text!r}") from None
    return value


def number(opts, name: str, positive: bool = True) -> float | None:
    """``--name`` parsed as a finite number (``7B``, ``1e3``, ``16Mi``), or None when not given."""
    raw = getattr(opts, name.replace("-", "_"), None)
    if raw is None:
        return None
    try:
        value = parse_number(raw)
    except PlanError as e:
        raise PlanError(f"--{name}: {e}") from None
    if not math.isfinite(value) or (positive and value <= 0):
        raise PlanError(f"--{name} must be a positive finite number, got {raw!r}")
    return value


def whole(opts, name: str) -> int | None:
    value = number(opts, name)
    if value is not None and value != int(value):
        raise PlanError(f"--{name} must be a whole number, got {getattr(opts, name.replace('-', '_'))!r}")
    return None if value is None else int(value)
