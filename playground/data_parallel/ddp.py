"""Data-parallel training from scratch, in the two designs PyTorch's DDP grew out of.

Every rank holds the whole model, runs forward and backward on its own slice of the batch, and
averages gradients with the others before the optimizer step, so all ranks apply the same update
and stay identical.  With equal slices, the average of the per-slice mean-loss gradients *is*
the full-batch gradient: data parallelism changes where the work runs, not what is computed.

1. ``allreduce_gradients``: after backward, one all-reduce per gradient tensor.  Simple, but
   it sends many small messages (one α each) and the network idles during all of backward.
2. ``BucketedDDP``: gradients are packed into flat buckets of about ``bucket_bytes``, in the
   order backward produces them (last layer first).  A hook fires as each gradient is ready;
   when a bucket is full its all-reduce starts asynchronously, while backward goes on computing
   the next layers' gradients.  ``finish()`` waits for the last buckets and writes the averaged
   gradients back.  It records when each event really happened (``events``), so the overlap can
   be drawn.  ``no_sync()`` (as in torch's DDP) turns the hooks off for gradient accumulation:
   the backward passes inside it only add into ``p.grad`` locally, and the first backward after
   it reduces the accumulated sum, one reduction per optimizer step instead of one per micro-batch.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from torch import nn

from playground.data_parallel.ring import ring_all_reduce

__all__ = ["allreduce_gradients", "BucketedDDP", "Bucket", "plan_buckets"]


def _grads(model: nn.Module) -> list[torch.Tensor]:
    return [p.grad for p in model.parameters() if p.requires_grad and p.grad is not None]


def allreduce_gradients(model: nn.Module, all_reduce=ring_all_reduce, group=None) -> int:
    """Average every gradient over the ranks of ``group``, one all-reduce per tensor.

    Call it between ``loss.backward()`` and ``optimizer.step()``.  Returns the number of
    all-reduces launched.  ``all_reduce`` is any in-place SUM (the ring of ``playground.data_parallel.ring``
    by default, ``dist.all_reduce`` works too).
    """
    n = dist.get_world_size(group)
    grads = _grads(model)
    for grad in grads:
        # a gradient takes its parameter's strides (a transposed weight's is non-contiguous):
        # reduce a contiguous copy and write it back, as the in-place all-reduce needs
        flat = grad if grad.is_contiguous() else grad.contiguous()
        all_reduce(flat, group=group)
        if flat is not grad:
            grad.copy_(flat)
        grad.div_(n)
    return len(grads)


@dataclass
class Bucket:
    """A flat buffer holding the gradients of ``params`` back to back."""

    index: int
    params: list
    offsets: list
    flat: torch.Tensor
    ready: int = 0  # gradients copied in since the last launch
    work: object = None  # the last launched reduction this step (None: none yet)


def plan_buckets(params: list, bucket_bytes: int) -> list[list]:
    """Group parameters, in the given order, into consecutive buckets of >= ``bucket_bytes``
    (the last may be smaller); a parameter bigger than a bucket gets one of its own.
    Buckets never mix dtypes or devices (one flat buffer each).
    """
    if isinstance(bucket_bytes, bool) or not isinstance(bucket_bytes, int) or bucket_bytes < 1:
        raise ValueError(f"bucket_bytes must be a positive integer, got {bucket_bytes!r}")
    buckets, current, size = [], [], 0
    for p in params:
        if current and (p.dtype, p.device) != (current[0].dtype, current[0].device):
            buckets.append(current)
            current, size = [], 0
        current.append(p)
        size += p.numel() * p.element_size()
        if size >= bucket_bytes:
            buckets.append(current)
            current, size = [], 0
    if current:
        buckets.append(current)
    return buckets


class _Done:
    """The handle of a reduction that already completed (a synchronous all-reduce)."""

    def wait(self) -> None:
        pass


_DONE = _Done()


@dataclass
class _Clock:
    start: float = field(default_factory=time.perf_counter)

    def now(self) -> float:
        return time.perf_counter() - self.start


class BucketedDDP:
    """Bucketed gradient averaging launched from autograd hooks, overlapping backward.

    Usage per step: ``ddp.start_step()``; ``loss.backward()``; ``ddp.finish()``;
    ``optimizer.step()``.  To accumulate k micro-batches, run the first k-1 backward passes
    inside ``with ddp.no_sync():`` and the last one outside it.  Without ``no_sync`` every
    backward reduces what ``p.grad`` holds so far (the result is the same, the bytes k times more).
    ``all_reduce=None`` launches ``dist.all_reduce`` asynchronously (overlapping backward); any
    in-place SUM such as the ring of ``playground.data_parallel.ring`` runs synchronously inside
    the hook instead, so that the byte counter sees every byte it sends.

    ``events`` lists ``(kind, bucket or parameter index, seconds since start_step)`` for this
    step, where kind is ``grad_ready``, ``launch``, ``done`` (stamped by the communication thread
    when the all-reduce completed), ``backward_end``, ``finished``, or one the caller recorded
    with ``mark``.
    """

    def __init__(self, model: nn.Module, bucket_bytes: int = 2 ** 20, group=None, all_reduce=None):
        params = [p for p in model.parameters() if p.requires_grad]
        if not params:
            raise ValueError("BucketedDDP needs a model with at least one trainable parameter")
        self.model, self.group, self.all_reduce = model, group, all_reduce
        self.synchronising = True  # False inside no_sync(): backward only accumulates locally
        self.world_size = dist.get_world_size(group)
        # backward produces gradients roughly in reverse order of definition: bucket that way
        self.buckets = []
        for i, members in enumerate(plan_buckets(params[::-1], bucket_bytes)):
            offsets, total = [], 0
            for p in members:
                offsets.append(total)
                total += p.numel()
            flat = torch.zeros(total, dtype=members[0].dtype, device=members[0].device)
            self.buckets.append(Bucket(i, members, offsets, flat))
        self._where = {p: (b, k) for b in self.buckets for k, p in enumerate(b.params)}
        self._index = {p: i for i, p in enumerate(params)}
        self._hooks = [p.register_post_accumulate_grad_hook(self._grad_ready) for p in params]
        self.events: list[tuple[str, int, float]] = []
        self._clock = _Clock()
        self._broadcast_parameters()

    def _broadcast_parameters(self):
        """Start from rank 0's weights, whatever each rank initialised (as torch DDP does)."""
        src = 0 if self.group is None else dist.get_global_rank(self.group, 0)
        with torch.no_grad():
            for p in self.model.parameters():
                dist.broadcast(p.data, src, group=self.group)

    def start_step(self) -> None:
        self.events = []
        self._clock = _Clock()
        for b in self.buckets:
            b.ready, b.work = 0, None

    @contextmanager
    def no_sync(self):
        """Backward passes inside the block accumulate into ``p.grad`` without communicating."""
        previous, self.synchronising = self.synchronising, False
        try:
            yield
        finally:
            self.synchronising = previous

    def mark(self, kind: str) -> None:
        """Record an event of the caller's (e.g. ``backward_start``) on this step's clock."""
        self.events.append((kind, -1, self._clock.now()))

    def _grad_ready(self, p: torch.Tensor) -> None:
        if not self.synchronising:  # accumulation: autograd has added into p.grad; nothing to send
            return
        bucket, k = self._where[p]
        if bucket.ready == 0 and bucket.work is not None:
            bucket.work.wait()  # an earlier backward's reduction still reads the flat buffer
        self.events.append(("grad_ready", self._index[p], self._clock.now()))
        off = bucket.offsets[k]
        # view_as, not p.grad.view(-1): a gradient may be non-contiguous (a transposed weight)
        bucket.flat[off:off + p.numel()].view_as(p.grad).copy_(p.grad)
        bucket.ready += 1
        if bucket.ready == len(bucket.params):
            bucket.ready = 0
            self._launch(bucket)

    def _launch(self, bucket: Bucket) -> None:
        bucket.flat.div_(self.world_size)  # average = sum of (gradient / n)
        self.events.append(("launch", bucket.index, self._clock.now()))
        if self.all_reduce is not None:  # a synchronous all-reduce: done when it returns
            self.all_reduce(bucket.flat, group=self.group)
            bucket.work = _DONE
            self.events.append(("done", bucket.index, self._clock.now()))
            return
        bucket.work = dist.all_reduce(bucket.flat, group=self.group, async_op=True)
        clock, events, index = self._clock, self.events, bucket.index

        def stamp(future):
            events.append(("done", index, clock.now()))
            return future.value()
        bucket.work.get_future().then(stamp)

    def finish(self) -> None:
        """Wait for every bucket's all-reduce and put the averaged gradients in ``p.grad``."""
        if not self.synchronising:
            raise RuntimeError("finish() inside no_sync(): run the last micro-batch's backward "
                               "outside the block, then call finish()")
        self.events.append(("backward_end", -1, self._clock.now()))
        missing = [b.index for b in self.buckets if b.ready or b.work is None]
        if missing:
            raise RuntimeError(
                f"buckets {missing} never filled: some parameters got no gradient this step "
                "(unused in forward?); every rank must produce every gradient")
        for b in self.buckets:
            b.work.wait()
            for p, off in zip(b.params, b.offsets):
                p.grad.copy_(b.flat[off:off + p.numel()].view_as(p.grad))
        self.events.append(("finished", -1, self._clock.now()))

    def remove_hooks(self) -> None:
        for h in self._hooks:
            h.remove()
        self._hooks = []
