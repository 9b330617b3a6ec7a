"""Counting what moves: the course's single byte counter.

``with comm.count() as moved: ...`` records, on this rank, every ``torch.distributed`` call made
inside the block:

* point-to-point (``send``, ``recv``, ``isend``, ``irecv``, ``batch_isend_irecv``): the exact bytes
  this rank sent and received.  Everything the package builds from point-to-point is therefore
  counted exactly, whatever the algorithm.
* collectives (``all_reduce``, ``reduce_scatter_tensor``, ``all_gather_into_tensor``, ...): the
  call and its *payload*, the bytes of the input this rank hands in.  What a built-in collective
  puts on the wire depends on its internal algorithm, which torch does not expose; the payload is
  the honest number to set beside a formula.

It works by wrapping the functions of ``torch.distributed`` for the duration of the block and
restoring them afterwards.  Libraries that bypass those functions (FSDP2 and DTensor call the
functional collectives in ``torch.ops._c10d_functional``) are not seen: count their traffic from
the formula, or from their tensors' sizes.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

__all__ = ["count", "Traffic", "tensor_bytes"]

P2P_SEND = ("send", "isend")
P2P_RECV = ("recv", "irecv")
# collective -> index of the argument (positional) that is this rank's input, and its keyword
COLLECTIVE_INPUT = {
    "all_reduce": (0, "tensor"),
    "broadcast": (0, "tensor"),
    "reduce": (0, "tensor"),
    "all_gather": (1, "tensor"),
    "all_gather_into_tensor": (1, "input_tensor"),
    "all_gather_single": (1, "input_tensor"),
    "reduce_scatter": (1, "input_list"),
    "reduce_scatter_tensor": (1, "input"),
    "reduce_scatter_single": (1, "input"),
    "all_to_all": (1, "input_tensor_list"),
    "all_to_all_single": (1, "input"),
    "gather": (0, "tensor"),
    "scatter": (1, "scatter_list"),
    "barrier": (None, None),
}


def tensor_bytes(obj) -> int:
    """Bytes of a tensor's elements (or the sum over a list/tuple of tensors)."""
    if obj is None:
        return 0
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, (list, tuple)):
        return sum(tensor_bytes(t) for t in obj)
    return 0


@dataclass(eq=False)  # identity, not contents: nested counters may hold equal counts
class Traffic:
    """What one rank moved inside a ``count()`` block."""

    sent_bytes: int = 0
    received_bytes: int = 0
    calls: dict = field(default_factory=lambda: defaultdict(int))
    payload_bytes: dict = field(default_factory=lambda: defaultdict(int))

    def record_p2p(self, op: str, nbytes: int, sending: bool) -> None:
        self.calls[op] += 1
        if sending:
            self.sent_bytes += nbytes
        else:
            self.received_bytes += nbytes

    def record_collective(self, op: str, nbytes: int) -> None:
        self.calls[op] += 1
        self.payload_bytes[op] += nbytes

    def summary(self) -> dict:
        """Plain, picklable dict (what ranks return to the launcher)."""
        return {"sent_bytes": self.sent_bytes, "received_bytes": self.received_bytes,
                "calls": dict(sorted(self.calls.items())),
                "payload_bytes": dict(sorted(self.payload_bytes.items()))}


_lock = threading.Lock()
_active: list[Traffic] = []
_originals: dict[str, object] = {}


_local = threading.local()


@contextmanager
def _outermost():
    """Yield True only for the outermost wrapped call: torch's ``send`` is built on ``isend``,
    ``all_gather_object`` on ``all_gather``; only the call the user made is counted."""
    depth = getattr(_local, "depth", 0)
    _local.depth = depth + 1
    try:
        yield depth == 0
    finally:
        _local.depth = depth


def _wrap_p2p(name, original, sending):
    def wrapper(tensor, *args, **kwargs):
        with _outermost() as outer:
            if outer:
                for traffic in list(_active):
                    traffic.record_p2p(name, tensor_bytes(tensor), sending)
            return original(tensor, *args, **kwargs)
    wrapper.__wrapped__ = original
    return wrapper


def _wrap_batch(original):
    """Count each op of a batch once.

    torch's ``batch_isend_irecv`` calls ``op.op`` and tells sends from receives by identity with
    the module's ``isend``; ops built before the block hold the unwrapped functions, so point
    them at the wrappers installed now (nested, those do not count again).
    """
    def wrapper(p2p_op_list, *args, **kwargs):
        with _outermost() as outer:
            given = [op.op for op in p2p_op_list]
            for op in p2p_op_list:
                sending = getattr(op.op, "__wrapped__", op.op) is _originals["isend"]
                op.op = c10d.isend if sending else c10d.irecv
                if outer:
                    for traffic in list(_active):
                        traffic.record_p2p("isend" if sending else "irecv",
                                           tensor_bytes(op.tensor), sending)
            try:
                return original(p2p_op_list, *args, **kwargs)
            finally:
                for op, fn in zip(p2p_op_list, given):
                    op.op = fn
    wrapper.__wrapped__ = original
    return wrapper


def _wrap_collective(name, original, position, keyword):
    def wrapper(*args, **kwargs):
        with _outermost() as outer:
            if outer:
                if position is None:
                    nbytes = 0
                elif keyword in kwargs:
                    nbytes = tensor_bytes(kwargs[keyword])
                else:
                    nbytes = tensor_bytes(args[position]) if len(args) > position else 0
                for traffic in list(_active):
                    traffic.record_collective(name, nbytes)
            return original(*args, **kwargs)
    wrapper.__wrapped__ = original
    return wrapper


def _install() -> None:
    for name in P2P_SEND + P2P_RECV:
        _originals[name] = getattr(dist, name)
        wrapped = _wrap_p2p(name, _originals[name], name in P2P_SEND)
        setattr(dist, name, wrapped)
        setattr(c10d, name, wrapped)
    _originals["batch_isend_irecv"] = dist.batch_isend_irecv
    setattr(dist, "batch_isend_irecv", _wrap_batch(_originals["batch_isend_irecv"]))
    setattr(c10d, "batch_isend_irecv", dist.batch_isend_irecv)
    for name, (position, keyword) in COLLECTIVE_INPUT.items():
        if not hasattr(dist, name):  # names differ between torch releases
            continue
        _originals[name] = getattr(dist, name)
        wrapped = _wrap_collective(name, _originals[name], position, keyword)
        setattr(dist, name, wrapped)
        setattr(c10d, name, wrapped)


def _uninstall() -> None:
    for name, original in _originals.items():
        setattr(dist, name, original)
        setattr(c10d, name, original)
    _originals.clear()


@contextmanager
def count():
    """Record this rank's communication inside the block; yields a :class:`Traffic`.

    Blocks may nest: every active counter sees every call.
    """
    traffic = Traffic()
    with _lock:
        if not _active:
            _install()
        _active.append(traffic)
    try:
        yield traffic
    finally:
        with _lock:
            _active.remove(traffic)
            if not _active:
                _uninstall()
