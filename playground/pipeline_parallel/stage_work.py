"""One rank's share of a pipeline step: the compute of each action, and the bookkeeping around it.

``engine.run_actions`` is the lesson, the loop that receives, computes and sends; this module is
the harness it calls for the compute.  A ``StageWork`` holds the rank's V pieces of the chain and
does one forward, backward (B) or weight-gradient pass (W) at a time, and around each one it keeps
what the chapter measures: real timestamps padded to an emulated device time (``device_clock``),
the bytes autograd saves (``playground.memory.SavedActivations``), the peak held, and FLOPs
(``FlopCounterMode``).  None of it changes the arithmetic.
"""

from __future__ import annotations

from contextlib import nullcontext

import torch
from torch.utils.flop_counter import FlopCounterMode

from playground.memory import SavedActivations, storage_bytes
from playground.model import loss_fn
from playground.pipeline_parallel.device_clock import DeviceClock
from playground.pipeline_parallel.schedules import action_chunk
from playground.pipeline_parallel.split_backward import backward_input, backward_weight, record_taps

__all__ = ["StageWork"]


class StageWork:
    """The compute of rank k's actions: ``forward``, ``backward``, ``weight``; records as it goes."""

    def __init__(self, spec, chunk, pieces, first: int, last: int, inputs, targets, dev):
        self.spec, self.chunk, self.pieces = spec, chunk, pieces
        self.first, self.last = first, last
        self.inputs, self.targets = inputs, targets
        self.params = [p for module in chunk for p in module.parameters()]
        self.split = spec.schedule == "zb"         # B: input gradient only; W: weights, later
        self.clock = DeviceClock(dev, spec.device_time_s, spec.batch_size, self.split)
        self.flops = {"F": 0, "B": 0, "W": 0}
        self.events, self.saved, self.kept, self.for_w = [], [], {}, []
        self.stash, self.waiting = {}, {}
        self.live = self.peak = 0
        self.loss_total = torch.zeros((), device=dev)

    def is_first(self, v: int) -> bool:
        return self.pieces[v] == self.first

    def is_last(self, v: int) -> bool:
        return self.pieces[v] == self.last

    def _counter(self):
        return FlopCounterMode(display=False) if self.spec.count_flops else nullcontext()

    def _record(self, action, counter, started: float, ended: float) -> None:
        if self.spec.count_flops:
            self.flops[action[0]] += counter.get_total_flops()
        self.events.append((action[0], action[1], started, ended) + tuple(action[2:]))

    def _run(self, x, m: int, v: int):
        y = self.chunk[v](x)
        # 1/M: the mean over the batch
        return loss_fn(y, self.targets[m]) / self.spec.micro_batches if self.is_last(v) else y

    def forward(self, x, action):
        """F of micro-batch m on chunk v: returns the output to send on (the loss on the last piece)."""
        spec, m, v = self.spec, action[1], action_chunk(action)
        if not self.is_first(v) and not spec.recompute:
            x.requires_grad_()
        counter = self._counter()
        started = self.clock.now()
        held = SavedActivations(exclude=self.params)  # its __enter__ returns None
        with (counter, held, torch.no_grad() if spec.recompute else nullcontext(),
              record_taps(self.chunk[v]) if self.split else nullcontext() as taps):
            y = self._run(x, m, v)
        ended = self.clock.pad(started, "F", x.shape[0], spec.recompute, 1 / spec.chunks)
        if self.is_last(v):
            self.loss_total += y.detach()
        self.stash[m, v] = (x, None if spec.recompute else y, taps)
        self.saved.append(held.bytes)
        self.kept[m, v] = storage_bytes([x]) if spec.recompute else held.bytes
        self.live += self.kept[m, v]
        self.peak = max(self.peak, self.live)
        self._record(action, counter, started, ended)
        return y

    def backward(self, g, action):
        """B of micro-batch m on chunk v, given its output's gradient: returns the input's gradient."""
        spec, m, v = self.spec, action[1], action_chunk(action)
        x, y, taps = self.stash.pop((m, v))
        counter = self._counter()
        started = self.clock.now()
        with counter:
            if spec.recompute:
                x = x.detach().requires_grad_(not self.is_first(v))
                held = SavedActivations(exclude=self.params)
                with held:
                    y = self._run(x, m, v)
                self.peak = max(self.peak, self.live + held.bytes)  # one micro-batch, again
            if self.split:  # keeps the graph and the gradients at its taps for W
                gx, tap_grads = backward_input(y, g, None if self.is_first(v) else x, taps)
                self.waiting[m, v] = (taps, tap_grads, storage_bytes(tap_grads))
            else:
                torch.autograd.backward(y, g)
                gx = x.grad
        ended = self.clock.pad(started, "B", x.shape[0], spec.recompute, 1 / spec.chunks)
        if self.split:  # activations stay until W, with the gradients W starts from
            self.for_w.append(self.waiting[m, v][2])
            self.live += self.for_w[-1]
            self.peak = max(self.peak, self.live)
        else:
            self.live -= self.kept[m, v]
        self._record(action, counter, started, ended)
        return gx

    def weight(self, action) -> None:
        """W: the weight gradients of micro-batch m, whose B ran earlier."""
        m, v = action[1], action_chunk(action)
        taps, tap_grads, nbytes = self.waiting.pop((m, v))
        counter = self._counter()
        started = self.clock.now()
        with counter:
            backward_weight(taps, tap_grads)
        ended = self.clock.pad(started, "W", self.inputs[m].shape[0], False, 1 / self.spec.chunks)
        self.live -= self.kept[m, v] + nbytes
        self._record(action, counter, started, ended)

    def result(self, traffic: dict) -> dict:
        """What the rank reports for the step."""
        return {"events": self.events, "saved_bytes": self.saved, "kept_bytes": list(self.kept.values()),
                "w_input_bytes": self.for_w, "peak_bytes": self.peak, "overruns": self.clock.overruns,
                "emulated": self.clock.per_example is not None, "flops": self.flops,
                "traffic": traffic, "loss": self.loss_total.item() if self.last in self.pieces else None}
