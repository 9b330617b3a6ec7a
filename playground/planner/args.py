"""The planner's flags, shared by its two commands (``capacity_plan`` and ``step_time``).

Numbers accept K/M/B/T suffixes (``parse_number``); a parse error raises ``PlanError`` instead of
printing argparse's usage dump, so each command can say it in one line and exit with status 2.
"""

from __future__ import annotations

import argparse

from playground import hardware
from playground.planner.errors import PlanError

__all__ = ["parse_number", "planner_parser", "add_layout_arguments", "glue_negative_values"]

_SUFFIX = {"k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12, "p": 1e15}


def parse_number(text: str) -> float:
    """'175e9', '175B', '1.4T', '4M' -> float; anything else -> PlanError."""
    t = text.strip()
    scale = _SUFFIX.get(t[-1:].lower(), 1.0) if t and t[-1:].isalpha() else 1.0
    try:
        value = float(t[:-1] if scale != 1.0 else t) * scale
    except ValueError:
        raise PlanError(f"not a number: {text!r}") from None
    return value


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line on stderr, exit status 2, no usage dump
        raise PlanError(message)


def planner_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m playground.capacity_plan",
                description="Capacity plan of an LLM training run (numbers accept K/M/B/T suffixes).")
    num = ["params", "active-params", "tokens", "compute", "layers", "hidden", "heads", "vocab",
           "seq-len", "global-batch-tokens", "gpus", "mfu", "achieved-tflops", "price-per-gpu-hour",
           "micro-batch-size", "max-days"]
    for name in num:
        p.add_argument(f"--{name}", type=str, default=None)
    p.add_argument("--gpu", default="H100", help=f"one of {', '.join(hardware.gpu_names())}")
    p.add_argument("--recompute", default="none", help="none | selective | full")
    p.add_argument("--zero-stage", default="0", help="0 | 1 | 2 | 3")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return add_layout_arguments(p)   # --tp --pp --dp --vpp --search ...: the step-time model


_LAYOUT_FLAGS = ("tp", "pp", "dp", "vpp")


def add_layout_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the layout flags to a planner-style parser (numbers as strings, parsed later)."""
    have = set(parser._option_string_actions)
    for name in (*_LAYOUT_FLAGS, "micro-batch-size", "ffn", "kv-heads", "gpus-per-node",
                 "nvlink-gbs", "network-gbs", "global-batch"):
        if f"--{name}" not in have:
            parser.add_argument(f"--{name}", type=str, default=None)
    for name in ("sequence-parallel", "flash-attention", "overlap-grad-reduce", "gated-mlp", "search"):
        if f"--{name}" not in have:
            parser.add_argument(f"--{name}", action="store_true")
    return parser


def glue_negative_values(argv: list[str]) -> list[str]:
    """``--params -7B`` -> ``--params=-7B``, so a negative number is reported as one, not as a flag."""
    out = []
    for arg in argv:
        if out and out[-1].startswith("--") and "=" not in out[-1] and arg[:1] == "-" \
                and arg[1:2].replace(".", "0").isdigit():
            out[-1] = f"{out[-1]}={arg}"
        else:
            out.append(arg)
    return out
