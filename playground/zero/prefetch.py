"""ZeRO-3 with prefetching: gather the next unit's parameters while this one computes.

``ZeroDP(model, 3)`` gathers a unit just in time: its forward (or backward) waits for the
all-gather, and the wire is idle while the unit computes.  ``PrefetchZeroDP`` issues the gathers
as non-blocking collectives (``dist.all_gather_single(..., async_op=True)``; gloo runs them on
its own threads, NCCL on its own stream) on a process group of their own:

* ``prefetch=False``: unit i's gather is issued and waited for in unit i's forward pre-hook,
  the same schedule as ``ZeroDP`` stage 3 (a baseline that differs only in *when* it issues).
* ``prefetch=True``: in unit i's pre-hook, after waiting for unit i's own gather, it issues unit
  i+1's gather, then unit i computes while i+1's parameters travel.  Backward runs the units in
  reverse, so there it issues unit i-1's gather when backward reaches unit i (FSDP2's
  ``forward_prefetch`` / backward prefetch, one unit ahead).

Prefetching changes when bytes move, never which bytes or what is computed: the trained
parameters are bitwise those of the baseline.  The price is memory: two units' full parameters
exist at once instead of one.

Every gather and every unit's compute is stamped (``time.perf_counter``, one clock for all
processes of a machine) into ``timeline``: gather issue and completion (the completion stamped
by the collective's future, in the communication thread), compute start and end, and the time
the compute thread waited for the gather (its *exposed* communication).  On a CPU the ranks'
compute and gloo's communication threads share the same cores, so ``emulated_compute_s``
stretches each unit's compute to at least that long by sleeping, freeing the core as a GPU
frees the host while its kernels run: *emulated device time*, to be labelled wherever it shows.
"""

from __future__ import annotations

import numbers
import time

import torch
import torch.distributed as dist

from playground.data_parallel.shards import shard_bounds
from playground.zero.zero_dp import ZeroDP

__all__ = ["PrefetchZeroDP"]


class PrefetchZeroDP(ZeroDP):
    """ZeRO stage 3 over the whole process group whose parameter all-gathers are asynchronous,
    issued one unit ahead when ``prefetch`` (see module doc).  ``timeline`` holds one dict per
    event: ``unit``, ``phase`` ("forward"/"backward"), ``kind`` ("gather", "compute" or "reduce":
    the gradient's reduce-scatter, blocking, on the ring as in ``ZeroDP``), ``start``,
    ``end`` and, for gathers, ``waited`` (seconds the compute thread blocked on it)."""

    def __init__(self, model, precision: str = "mixed", *, prefetch: bool = True,
                 emulated_compute_s: float = 0.0, lr: float = 1e-3, betas=(0.9, 0.999),
                 eps: float = 1e-8):
        if not isinstance(prefetch, bool):
            raise ValueError(f"prefetch must be True or False, got {prefetch!r}")
        if isinstance(emulated_compute_s, bool) or not isinstance(emulated_compute_s, numbers.Real) \
                or not 0 <= emulated_compute_s <= 10:
            raise ValueError("emulated_compute_s must be a number of seconds in [0, 10], got "
                             f"{emulated_compute_s!r}")
        super().__init__(model, 3, precision, lr=lr, betas=betas, eps=eps)  # the whole group
        self.prefetch, self.emulated_compute_s = prefetch, float(emulated_compute_s)
        # gathers in flight must not share a channel with the ring's reduce-scatters
        self.gather_group = dist.new_group(list(range(self.n)))
        self.position = {id(u): i for i, u in enumerate(self.units)}
        self._in_flight: dict[int, tuple] = {}
        self._computing: dict | None = None
        self.timeline: list[dict] = []

    # ------------------------------------------------------------------ gathers
    def _issue_gather(self, i: int, phase: str) -> None:
        """Start the all-gather of unit ``i`` into its (re-allocated) full buffer; no wait."""
        u = self.units[i]
        if i in self._in_flight or u.flat.untyped_storage().nbytes():
            return  # already coming, or already there
        u.flat.untyped_storage().resize_(u.numel * u.flat.element_size())
        size = -(-u.numel // self.n)  # all_gather_single wants equal pieces: pad to ceil(numel/n)
        if size * self.n == u.numel:
            out, piece = u.flat.data, u.shard  # even: gather straight into the buffer
        else:
            out = torch.empty(size * self.n, dtype=u.flat.dtype, device=u.flat.device)
            piece = torch.zeros(size, dtype=u.flat.dtype, device=u.flat.device)
            piece[:u.hi - u.lo] = u.shard
        event = {"unit": i, "phase": phase, "kind": "gather", "start": time.perf_counter()}
        work = dist.all_gather_single(out, piece, group=self.gather_group, async_op=True)
        work.get_future().add_done_callback(  # runs when the bytes have arrived
            lambda _, event=event: event.setdefault("end", time.perf_counter()))
        self._in_flight[i] = (work, out, event)
        self._gathers += 1

    def _wait_gather(self, i: int) -> None:
        """Block until unit ``i``'s gather has landed (no-op if nothing is in flight)."""
        if i not in self._in_flight:
            return
        work, out, event = self._in_flight.pop(i)
        asked = time.perf_counter()
        work.wait()
        event.setdefault("end", time.perf_counter())
        event["waited"] = time.perf_counter() - asked
        u = self.units[i]
        if out is not u.flat.data:  # uneven shards: drop each rank's padding
            size = out.numel() // self.n
            for r, (lo, hi) in enumerate(shard_bounds(u.numel, self.n)):
                u.flat.data[lo:hi].copy_(out[r * size:r * size + hi - lo])
        self.timeline.append(event)

    def _arrive(self, u, phase: str, ahead: int) -> None:
        """Unit ``u`` is next to compute: have its parameters, send for the next unit's, go."""
        i = self.position[id(u)]
        self._issue_gather(i, phase)  # no-op when it was prefetched
        self._wait_gather(i)
        if self.prefetch and 0 <= i + ahead < len(self.units):
            self._issue_gather(i + ahead, phase)  # overlaps unit i's compute
        self._computing = {"unit": i, "phase": phase, "kind": "compute",
                           "start": time.perf_counter()}

    def _depart(self) -> None:
        event, self._computing = self._computing, None
        if event is None:
            return
        pad = event["start"] + self.emulated_compute_s - time.perf_counter()
        if pad > 0:
            time.sleep(pad)  # emulated device time: the core is free, as under a GPU kernel
        event["end"] = time.perf_counter()
        self.timeline.append(event)

    # ------------------------------------------------------------------ ZeroDP's hook points
    def _before_forward(self, u) -> None:
        self._arrive(u, "forward", +1)

    def _after_forward(self, u, out):
        self._depart()
        super()._after_forward(u, out)

    def _before_backward(self, u) -> None:
        self._arrive(u, "backward", -1)  # backward runs the units in reverse

    def _backward_done(self, u) -> None:
        self._depart()

    def _reduce(self, u, flat):
        event = {"unit": self.position[id(u)], "phase": "backward", "kind": "reduce",
                 "start": time.perf_counter()}
        shard = super()._reduce(u, flat)  # the ring reduce-scatter, blocking, as in ZeroDP
        event["end"] = time.perf_counter()
        self.timeline.append(event)
        return shard

    def exposed_gather_s(self) -> float:
        """Seconds the compute thread spent blocked on gathers, over the whole ``timeline``."""
        return sum(e["waited"] for e in self.timeline if e["kind"] == "gather")
