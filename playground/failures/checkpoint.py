"""Sharded checkpoints with ``torch.distributed.checkpoint`` (DCP), and what they should weigh.

Each rank writes only its own shards (``__<rank>_0.distcp``) plus, once, the ``.metadata`` that
says which slice of which tensor lives where; a load on a different number of ranks reads that
map and fetches the slices its new shards need (resharding).  ``get_state_dict`` /
``set_state_dict`` turn an FSDP2 model and its optimizer into that state (DTensors keyed by
parameter name) and back.
"""

from __future__ import annotations

import os
import time
import warnings
from pathlib import Path

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

from playground.launch import device
from playground.model import ModelConfig, build_model

__all__ = ["CHECKPOINT_CFG", "sharded_model", "save", "load", "bytes_written", "payload_by_rank",
           "shard_rows", "predicted_bytes"]

# Big enough that tensor bytes, not each file's per-tensor framing, dominate what is written.
CHECKPOINT_CFG = ModelConfig(vocab=64, d_model=64, n_heads=4, n_layers=2, seq_len=16)
ADAM_MOMENTS = 2   # exp_avg and exp_avg_sq: each the shape of its parameter


def sharded_model(cfg: ModelConfig, seed: int = 0, lr: float = 1e-3):
    """The shared model under FSDP2 (every block and the root), and its Adam."""
    from torch.distributed.fsdp import fully_shard
    warnings.filterwarnings("ignore", message=".*returned a view tensor.*")
    model = build_model(cfg, seed, device=device())
    for layer in model.layers:
        fully_shard(layer)
    fully_shard(model)
    return model, torch.optim.Adam(model.parameters(), lr=lr)


def save(model, optimizer, path, *, asynchronous: bool = False):
    """Write model + optimizer state, each rank its own shards; returns (seconds blocked, future).

    With ``asynchronous=True`` (``dcp.async_save``) the call returns once the shards are copied
    to host memory; the file writes finish in the background (``future.result()`` waits)."""
    state = dict(zip(("model", "optim"), get_state_dict(model, optimizer)))
    start = time.perf_counter()
    if asynchronous:
        future = dcp.async_save(state, checkpoint_id=str(path))
        return time.perf_counter() - start, future
    dcp.save(state, checkpoint_id=str(path))
    return time.perf_counter() - start, None


def load(model, optimizer, path) -> float:
    """Read a checkpoint into ``model`` and ``optimizer`` (on any number of ranks); seconds."""
    start = time.perf_counter()
    model_state, optim_state = get_state_dict(model, optimizer)
    state = {"model": model_state, "optim": optim_state}
    dcp.load(state, checkpoint_id=str(path))
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
    return time.perf_counter() - start


def bytes_written(path) -> dict:
    """Bytes in each rank's file (``__<rank>_0.distcp``) and in the shared ``.metadata``."""
    out = {"metadata": os.path.getsize(Path(path) / ".metadata")}
    for f in Path(path).glob("__*_0.distcp"):
        out[int(f.name.split("_")[2])] = f.stat().st_size
    return out


def payload_by_rank(path) -> dict:
    """What each rank's file holds, read from the checkpoint's own map (``.metadata``): tensor bytes
    of its shards (chunks with at least one dimension), of 0-dim tensors (Adam's ``step``, kept
    once for all ranks), other bytes (pickled objects), and the count of items."""
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata
    meta = dcp.FileSystemReader(str(path)).read_metadata()
    out: dict = {}
    for index, info in meta.storage_data.items():
        rank = int(info.relative_path.split("_")[2])
        row = out.setdefault(rank, {"shards": 0, "scalars": 0, "objects": 0, "items": 0, "file_bytes": 0})
        row["items"] += 1
        row["file_bytes"] += info.length
        tensor = meta.state_dict_metadata[index.fqn]
        if not isinstance(tensor, TensorStorageMetadata):
            row["objects"] += info.length
            continue
        chunk = next(c for c in tensor.chunks if tuple(c.offsets) == tuple(index.offset or c.offsets))
        size = torch.Size(chunk.sizes).numel() * torch.tensor([], dtype=tensor.properties.dtype).element_size()
        row["shards" if len(chunk.sizes) else "scalars"] += size
    return out


def shard_rows(rows: int, rank: int, world_size: int) -> int:
    """Rows of a dim-0 shard FSDP2 gives ``rank`` (``torch.chunk``: ceil(rows/n) each, the last
    ranks what is left, maybe none)."""
    per = -(-rows // world_size)
    return max(0, min(per, rows - rank * per))


def predicted_bytes(cfg: ModelConfig, rank: int, world_size: int, dtype_bytes: int = 4) -> int:
    """Tensor bytes rank ``rank`` should write: its shard of every parameter and of Adam's two
    moments, (1 + 2) x 4 B per element in fp32 -- 12 Psi / N, up to the rounding of the shards."""
    total = 0
    for p in build_model(cfg, 0).parameters():
        rest = p[0].numel() if p.dim() else 1
        total += shard_rows(p.shape[0] if p.dim() else 1, rank, world_size) * rest
    return (1 + ADAM_MOMENTS) * dtype_bytes * total
