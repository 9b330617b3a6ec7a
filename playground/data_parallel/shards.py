"""Which slice of a flat tensor each of n ranks holds: the one rule every sharded collective and every
ZeRO stage cuts by, kept free of torch so that the planner's memory formulas can use it without it."""

from __future__ import annotations

__all__ = ["shard_bounds"]


def shard_bounds(numel: int, world_size: int) -> list[tuple[int, int]]:
    """Chunk r of a flat tensor of ``numel`` elements is ``[start, end)``.

    The first ``numel % world_size`` chunks hold one extra element; with fewer elements than
    ranks the last chunks are empty.  The chunks tile ``[0, numel)`` in rank order.
    """
    if isinstance(numel, bool) or not isinstance(numel, int) or numel < 0:
        raise ValueError(f"numel must be an integer >= 0, got {numel!r}")
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be an integer >= 1, got {world_size!r}")
    base, extra = divmod(numel, world_size)
    bounds, start = [], 0
    for r in range(world_size):
        end = start + base + (1 if r < extra else 0)
        bounds.append((start, end))
        start = end
    return bounds
