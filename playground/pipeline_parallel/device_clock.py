"""Time on a pipeline rank: real timestamps, and padding of each action to an emulated device time.

Every forward and backward is timestamped with ``time.perf_counter`` on its rank, relative to the
moment the rank left a barrier all ranks join.  They do not leave it at exactly the same instant (up
to ~10 ms apart on a loaded 2-core CPU, against emulated actions of tenths of a second), so compare
timelines across ranks to that precision.  On a CPU with more ranks than cores, compute time
measures the operating system's scheduler, not the schedule.  So, optionally, each action is
*padded* to a fixed emulated device time: the arithmetic is real, then the rank sleeps until the
action has lasted what a device would take.  ``"auto"`` emulates on the CPU and not on GPUs, where
measured time is already device time.
"""

from __future__ import annotations

import time

import torch

from playground.pipeline_parallel.schedules import WEIGHT_SHARE

__all__ = ["DEFAULT_DEVICE_TIME_S", "DeviceClock"]

# emulated device time of ONE stage on the WHOLE mini-batch: (forward, backward) seconds.
# A micro-batch of b of the B examples takes the share b/B; backward = 2 x forward, as for a
# transformer whose backward computes gradients of both inputs and weights.  A split backward
# (zero bubble) gives B and W WEIGHT_SHARE-weighted parts of it: then F, B and W cost the same.
DEFAULT_DEVICE_TIME_S = (0.1, 0.2)


class DeviceClock:
    """Real timestamps on this rank, plus padding of each action to an emulated device time."""

    def __init__(self, dev: torch.device, device_time_s, batch_size: int, split: bool = False):
        if device_time_s == "auto":
            device_time_s = DEFAULT_DEVICE_TIME_S if dev.type == "cpu" else None
        self.per_example = None if device_time_s is None else tuple(t / batch_size for t in device_time_s)
        self.dev, self.overruns, self.t0 = dev, 0, 0.0
        self.w_share = WEIGHT_SHARE if split else 0.0  # a split backward: B and W share its time

    def start(self) -> None:
        self.t0 = time.perf_counter()

    def now(self) -> float:
        if self.dev.type == "cuda":
            torch.cuda.synchronize(self.dev)  # the event ends when the device is done
        return time.perf_counter() - self.t0

    def pad(self, started: float, op: str, examples: int, recompute: bool, share: float = 1.0) -> float:
        """Sleep until the action has lasted its emulated device time; return its end.

        ``share``: the part of the stage the action runs (1/V for one of V chunks)."""
        end = self.now()
        if self.per_example is None:
            return end
        f, b = self.per_example
        cost = {"F": f, "B": (1 - self.w_share) * b + (f if recompute else 0.0), "W": self.w_share * b}
        due = started + share * examples * cost[op]
        if end > due:
            self.overruns += 1  # real compute took longer than the emulated device time
            return end
        time.sleep(due - end)
        return self.now()
