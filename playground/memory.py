"""Counting bytes held in memory: the one way the course measures memory.

Summing ``untyped_storage().nbytes()`` over tensors, each storage counted once, is exact and
deterministic; process RSS carries hundreds of MiB of allocator noise and is a cross-check only.
Two tensors that are views of one storage (a flat gradient bucket and its per-parameter views, a
padded FSDP shard) are counted once.  A DTensor is counted by its local shard.

``PeakMemory`` measures the other side: the highest point torch's allocator reached inside a
block, transients included (on CUDA its own peak statistics; on CPU the allocation and free
events of ``torch.profiler``'s memory profiling, summed in time order).
"""

from __future__ import annotations

from typing import Iterable

import torch

__all__ = ["storage_bytes", "model_state_bytes", "SavedActivations", "PeakMemory"]


def _local(t: torch.Tensor) -> torch.Tensor:
    to_local = getattr(t, "to_local", None)  # DTensor: the shard this rank really holds
    return to_local() if callable(to_local) else t


def storage_bytes(tensors: Iterable[torch.Tensor | None]) -> int:
    """Bytes of the distinct storages behind ``tensors`` (``None`` entries are skipped)."""
    seen: set[tuple[int, str]] = set()
    total = 0
    for t in tensors:
        if t is None:
            continue
        storage = _local(t).untyped_storage()
        key = (storage.data_ptr(), str(storage.device))
        if storage.nbytes() == 0 or key in seen:
            continue
        seen.add(key)
        total += storage.nbytes()
    return total


# per-parameter counters of torch's optimizers (Adam's step, NAdam's mu_product, ASGD's eta/mu)
BOOKKEEPING = frozenset({"step", "mu_product", "eta", "mu"})


def _optimizer_tensors(optimizer) -> list[torch.Tensor]:
    """The optimizer's per-parameter state.  A 0-dim entry is a counter, left out, unless its
    parameter is itself 0-dim: a scalar parameter's momentum is a 0-dim tensor too."""
    tensors = []
    for param, state in optimizer.state.items():
        tensors += [v for key, v in state.items() if isinstance(v, torch.Tensor)
                    and key not in BOOKKEEPING and (v.dim() > 0 or param.dim() == 0)]
    return tensors


def model_state_bytes(parameters: Iterable[torch.Tensor], optimizer=None) -> dict[str, int]:
    """Per-rank bytes of the model states: parameters, gradients, optimizer state.

    Scalar optimizer entries (Adam's ``step``) are bookkeeping, not model state, and are left out.
    """
    params = list(parameters)
    out = {"parameters": storage_bytes(params),
           "gradients": storage_bytes(p.grad for p in params),
           "optimizer": storage_bytes(_optimizer_tensors(optimizer)) if optimizer else 0}
    out["total"] = out["parameters"] + out["gradients"] + out["optimizer"]
    return out


class SavedActivations(torch.autograd.graph.saved_tensors_hooks):
    """Count the bytes autograd saves for backward inside the block (storages counted once).

    Parameters that autograd saves are not activations; pass them in ``exclude`` to leave them out.
    """

    def __init__(self, exclude: Iterable[torch.Tensor] = ()):
        self._exclude = {_local(t).untyped_storage().data_ptr() for t in exclude}
        self._seen: set[int] = set()
        self.bytes = 0
        self.tensors = 0

        def pack(t: torch.Tensor):
            storage = t.untyped_storage()
            ptr = storage.data_ptr()
            if ptr not in self._exclude and ptr not in self._seen and storage.nbytes() > 0:
                self._seen.add(ptr)
                self.bytes += storage.nbytes()
                self.tensors += 1
            return t

        super().__init__(pack, lambda t: t)

    def __enter__(self) -> "SavedActivations":
        super().__enter__()
        return self


class PeakMemory:
    """``with PeakMemory(device) as peak:``: ``peak.bytes`` is the most the allocator held inside
    the block above what it held at entry; ``peak.net_bytes`` what the block left allocated.

    Every tensor torch allocates counts, temporaries of one operator and the re-grown storage of a
    ``resize_`` included; memory a library allocates outside torch (gloo's own buffers) does not.
    CUDA: ``torch.cuda.max_memory_allocated`` (the device's statistics are reset at entry).  CPU:
    the profiler's memory events of this process, in time order (slow: for small runs only).
    """

    def __init__(self, device=None):
        self.device = torch.device(device if device is not None else "cpu")
        self.bytes: int | None = None
        self.net_bytes: int | None = None

    def __enter__(self) -> "PeakMemory":
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self._base = torch.cuda.memory_allocated(self.device)
        else:
            from torch.profiler import ProfilerActivity, profile
            self._profile = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
            self._profile.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self.bytes = torch.cuda.max_memory_allocated(self.device) - self._base
            self.net_bytes = torch.cuda.memory_allocated(self.device) - self._base
            return
        self._profile.__exit__(*exc)
        if exc[0] is not None:
            return
        events = sorted((e.start_ns(), e.nbytes()) for e in self._profile.profiler.kineto_results.events()
                        if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU)
        held = peak = 0
        for _, nbytes in events:  # + for an allocation, - for a free
            held += nbytes
            peak = max(peak, held)
        self.bytes, self.net_bytes = peak, held
