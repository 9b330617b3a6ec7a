"""Stage-to-stage point-to-point: what crosses a pipeline boundary, and how its shape is known.

A pipeline moves exactly two kinds of tensor between neighbouring stages:

* forward, stage k -> k+1: the activation leaving stage k for one micro-batch;
* backward, stage k+1 -> k: the gradient of the loss with respect to that activation.

Both have the shape and dtype of the boundary activation, so the receiver must know them before
the message arrives (``recv`` fills a buffer it allocated).  Instead of sending a shape header
with every message, every rank *infers* all boundary shapes locally by running the whole chain on
PyTorch's ``meta`` device (shapes and dtypes, no data, no messages) -- the same idea as the shape
inference of ``torch.distributed.pipelining``.  So the only bytes on the wire are the tensors
themselves, and ``playground.comm.count`` sees exactly ``2 * M`` boundary tensors per boundary.

Sends are non-blocking (``isend``): a stage hands its output over and goes on computing, and no
schedule can deadlock on two ranks each blocked in ``send`` towards the other.  Receives block:
a stage cannot compute before its input is there, and that wait is exactly the idle time a
schedule is judged by.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

__all__ = ["boundary_shapes", "StageLink"]


def boundary_shapes(layers, bounds, example_input: torch.Tensor) -> list[tuple[torch.Size, torch.dtype]]:
    """Shape and dtype of the tensor entering each stage, for one micro-batch like ``example_input``.

    ``layers`` is the model's chain of modules and ``bounds[k]:bounds[k+1]`` the slice stage k
    holds.  Entry k describes stage k's input (entry 0 is ``example_input`` itself); no real
    arithmetic runs: the modules are copied to the ``meta`` device, which computes only shapes.
    """
    x = torch.empty(example_input.shape, dtype=example_input.dtype, device="meta")
    shapes = [(x.shape, x.dtype)]
    with torch.no_grad():
        for k in range(len(bounds) - 2):
            for layer in layers[bounds[k]:bounds[k + 1]]:
                x = copy.deepcopy(layer).to("meta")(x)
            shapes.append((x.shape, x.dtype))
    return shapes


@dataclass
class StageLink:
    """The point-to-point links of one stage: to the previous and to the next stage's rank.

    ``prev``/``next`` are global ranks (``None`` at the ends of the pipeline).  Sends are
    non-blocking; ``drain()`` waits for every send still in flight (call it before the step
    ends, so no buffer is released while the transport still reads it).
    """

    prev: int | None
    next: int | None
    in_shape: torch.Size | None = None      # this stage's input (= previous stage's output)
    in_dtype: torch.dtype | None = None
    out_shape: torch.Size | None = None     # this stage's output (= next stage's input)
    out_dtype: torch.dtype | None = None
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    _pending: list = field(default_factory=list)

    # forward direction ------------------------------------------------------------------
    def send_activation(self, y: torch.Tensor) -> None:
        self._check(y, self.out_shape, self.out_dtype, "activation sent forward")
        self._send(y, self.next)

    def recv_activation(self) -> torch.Tensor:
        return self._recv(self.in_shape, self.in_dtype, self.prev)

    # backward direction -----------------------------------------------------------------
    def send_grad(self, g: torch.Tensor) -> None:
        self._check(g, self.in_shape, self.in_dtype, "gradient sent backward")
        self._send(g, self.prev)

    def recv_grad(self) -> torch.Tensor:
        return self._recv(self.out_shape, self.out_dtype, self.next)

    def drain(self) -> None:
        for work in self._pending:
            work.wait()
        self._pending.clear()

    # -------------------------------------------------------------------------------------
    def _send(self, t: torch.Tensor, dst: int | None) -> None:
        if dst is None:
            raise RuntimeError("this stage has no neighbour in that direction")
        # keep the tensor referenced until the send completes
        t = t.detach().contiguous()
        self._pending.append(_Pending(dist.isend(t, dst), t))

    def _recv(self, shape, dtype, src: int | None) -> torch.Tensor:
        if src is None:
            raise RuntimeError("this stage has no neighbour in that direction")
        buf = torch.empty(shape, dtype=dtype, device=self.device)
        dist.recv(buf, src)
        return buf

    @staticmethod
    def _check(t: torch.Tensor, shape, dtype, what: str) -> None:
        if t.shape != shape or t.dtype != dtype:
            raise ValueError(f"{what} has shape {tuple(t.shape)} and dtype {t.dtype}, but the "
                             f"receiver expects {tuple(shape)} and {dtype} (inferred on meta)")


@dataclass
class _Pending:
    work: object
    tensor: torch.Tensor

    def wait(self) -> None:
        self.work.wait()

