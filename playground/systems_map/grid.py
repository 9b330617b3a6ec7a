"""A rank grid: where each rank sits when several parallelisms compose.

Lay the ranks out as one tensor, ``torch.arange(world).view(dp, pp, tp)``; rank r's coordinates
are its index in that tensor, and the group of an axis is the slice that varies along that axis
with every other coordinate fixed.  The *last* axis varies fastest, so its groups are runs of
consecutive ranks: put TP last and a TP group lands inside one node (ranks 0..7 of a node of 8).

No global state: a ``RankGrid`` is a plain value; ``grid.groups(rank)`` makes the process groups
(every rank must call it, in the same order, as ``dist.new_group`` requires).
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist

__all__ = ["RankGrid", "GridGroups", "grid_demo"]


class RankGrid:
    """``RankGrid(dp=2, tp=2)``: axes in the order given, outermost first, last axis fastest."""

    def __init__(self, **sizes: int):
        if not sizes:
            raise ValueError("a rank grid needs at least one axis, e.g. RankGrid(dp=2, tp=2)")
        for name, size in sizes.items():
            if isinstance(size, bool) or not isinstance(size, int) or size < 1:
                raise ValueError(f"axis {name!r} must have a positive integer size, got {size!r}")
        self.axes = tuple(sizes)
        self.sizes = dict(sizes)
        self.world_size = math.prod(sizes.values())
        self.ranks = torch.arange(self.world_size).view(*sizes.values())

    def _axis(self, axis: str) -> int:
        if axis not in self.sizes:
            raise ValueError(f"no axis {axis!r} in this grid; axes are {list(self.axes)}")
        return self.axes.index(axis)

    def _rank(self, rank: int) -> int:
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < self.world_size:
            raise ValueError(f"rank must be an integer in [0, {self.world_size}), got {rank!r}")
        return rank

    def coords(self, rank: int) -> dict[str, int]:
        """{axis: index} of ``rank``, e.g. {'dp': 1, 'tp': 0}."""
        flat = self._rank(rank)
        out = {}
        for name in reversed(self.axes):
            flat, out[name] = divmod(flat, self.sizes[name])
        return {name: out[name] for name in self.axes}

    def rank_at(self, **coords: int) -> int:
        """The rank at the given coordinates (every axis must be named)."""
        if set(coords) != set(self.axes):
            raise ValueError(f"give one coordinate per axis {list(self.axes)}, got {sorted(coords)}")
        for name, i in coords.items():
            if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < self.sizes[name]:
                raise ValueError(f"{name}={i!r} is not an integer in [0, {self.sizes[name]})")
        return int(self.ranks[tuple(coords[a] for a in self.axes)])

    def all_groups(self, axis: str) -> list[list[int]]:
        """Every group of ``axis``: the lines of the grid along that axis, in a fixed order."""
        lines = self.ranks.movedim(self._axis(axis), -1).reshape(-1, self.sizes[axis])
        return [line.tolist() for line in lines]

    def group_ranks(self, axis: str, rank: int) -> list[int]:
        """The ranks that share every coordinate of ``rank`` except ``axis``."""
        self._rank(rank)
        return next(g for g in self.all_groups(axis) if rank in g)

    def nodes_spanned(self, axis: str, gpus_per_node: int) -> int:
        """How many nodes one group of ``axis`` touches when ranks fill nodes in order."""
        if isinstance(gpus_per_node, bool) or not isinstance(gpus_per_node, int) or gpus_per_node < 1:
            raise ValueError(f"gpus_per_node must be an integer >= 1, got {gpus_per_node!r}")
        return max(len({r // gpus_per_node for r in g}) for g in self.all_groups(axis))

    def label(self, rank: int) -> str:
        """``DP(2)-TP(2)-Rank(3)``: axis sizes, outermost first, then the rank."""
        self._rank(rank)
        return "-".join(f"{a.upper()}({n})" for a, n in self.sizes.items()) + f"-Rank({rank})"

    def describe(self, rank: int) -> str:
        """The label plus where the rank sits, e.g. ``DP(2)-TP(2)-Rank(3): dp=1 tp=1``."""
        return f"{self.label(rank)}: " + " ".join(f"{a}={i}" for a, i in self.coords(rank).items())

    def check_world_size(self, world_size: int) -> None:
        """Refuse a job whose size is not the grid's."""
        if world_size != self.world_size:
            raise ValueError(f"the grid {self.label(0).rsplit('-', 1)[0]} has {self.world_size} "
                             f"ranks but the job has {world_size}")

    def groups(self, rank: int, backend: str | None = None) -> "GridGroups":
        """Create one process group per axis line; keep those that contain ``rank``."""
        if dist.is_initialized():
            self.check_world_size(dist.get_world_size())
        mine = {}
        for axis in self.axes:
            for ranks in self.all_groups(axis):  # all ranks create all groups, same order
                group = dist.new_group(ranks, backend=backend)
                if rank in ranks:
                    mine[axis] = (group, ranks)
        return GridGroups(self, rank, mine)

    def __repr__(self) -> str:
        return "RankGrid(" + ", ".join(f"{a}={n}" for a, n in self.sizes.items()) + ")"


class GridGroups:
    """The process groups of one rank: ``g.group('tp')``, ``g.ranks('tp')``, ``g.index('tp')``."""

    def __init__(self, grid: RankGrid, rank: int, mine: dict):
        self.grid, self.rank, self._mine = grid, rank, mine

    def group(self, axis: str):
        self.grid._axis(axis)
        return self._mine[axis][0]

    def ranks(self, axis: str) -> list[int]:
        self.grid._axis(axis)
        return self._mine[axis][1]

    def index(self, axis: str) -> int:
        return self.grid.coords(self.rank)[axis]

    def __str__(self) -> str:
        return self.grid.describe(self.rank)


def grid_demo(rank: int, world_size: int, sizes: dict) -> dict:
    """Rank worker: build the grid's groups and all-reduce this rank's id along every axis.

    Returns {axis: (ranks of my group, sum of their ids)}: the sum proves the group really is
    the line of the grid it claims to be.
    """
    grid = RankGrid(**sizes)
    groups = grid.groups(rank)
    out = {"label": groups.__str__()}
    for axis in grid.axes:
        from playground.launch import device
        x = torch.tensor([float(rank)], device=device())
        dist.all_reduce(x, group=groups.group(axis))
        out[axis] = (groups.ranks(axis), int(x.item()))
    return out


def _report(values) -> None:
    for v in values:
        print(v["label"], " ".join(f"{a}:{v[a][0]}" for a in v if a != "label"))


if __name__ == "__main__":
    from playground.launch_cli import cli
    cli(grid_demo, {"dp": 2, "tp": 2}, default_world_size=4, report=_report,
        check=lambda n: RankGrid(dp=2, tp=2).check_world_size(n))
