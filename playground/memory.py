"""Counting bytes held in memory: the one way the course measures memory.

Summing ``untyped_storage().nbytes()`` over tensors, each storage counted once, is exact and
deterministic; process RSS carries hundreds of MiB of allocator noise and is a cross-check only.
Two tensors that are views of one storage (a flat gradient bucket and its per-parameter views, a
padded FSDP shard) are counted once.  A DTensor is counted by its local shard.
"""

from __future__ import annotations

from typing import Iterable

import torch

__all__ = ["storage_bytes", "model_state_bytes", "SavedActivations"]


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
