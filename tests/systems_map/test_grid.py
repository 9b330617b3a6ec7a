"""The rank grid: groups are lines of one tensor of ranks; labels; real process groups."""

import pytest

from playground.systems_map.grid import RankGrid, grid_demo
from playground.launch import run


def test_groups_are_lines_of_the_grid():
    g = RankGrid(dp=2, pp=2, tp=2)
    assert g.world_size == 8
    assert g.all_groups("tp") == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert g.all_groups("pp") == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert g.all_groups("dp") == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert g.coords(5) == {"dp": 1, "pp": 0, "tp": 1}
    assert all(g.rank_at(**g.coords(r)) == r for r in range(8))
    assert g.group_ranks("pp", 5) == [5, 7]
    # every axis partitions the ranks
    for axis in g.axes:
        assert sorted(r for grp in g.all_groups(axis) for r in grp) == list(range(8))


def test_label():
    assert RankGrid(dp=2, tp=2).label(3) == "DP(2)-TP(2)-Rank(3)"
    assert RankGrid(dp=2, tp=2).describe(2) == "DP(2)-TP(2)-Rank(2): dp=1 tp=0"


def test_llama3_layout_keeps_tp_inside_a_node():
    # Dubey et al. (2024), Table 4: 16,384 GPUs as TP 8, CP 1, PP 16, DP 128; 8 GPUs per server
    g = RankGrid(dp=128, pp=16, cp=1, tp=8)
    assert g.world_size == 16384
    assert g.nodes_spanned("tp", 8) == 1
    assert g.nodes_spanned("pp", 8) == 16
    assert g.nodes_spanned("dp", 8) == 128


@pytest.mark.parametrize("make, match", [
    (lambda: RankGrid(), "at least one axis"),
    (lambda: RankGrid(dp=0), "positive integer"),
    (lambda: RankGrid(dp=2).coords(2), r"rank must be an integer in \[0, 2\)"),
    (lambda: RankGrid(dp=2).all_groups("tp"), "no axis 'tp'"),
    (lambda: RankGrid(dp=2, tp=2).rank_at(dp=0), "one coordinate per axis"),
    (lambda: RankGrid(dp=2, tp=2).rank_at(dp=0.5, tp=0), "not an integer in"),
    (lambda: RankGrid(dp=2, tp=2).nodes_spanned("tp", 2.5), "gpus_per_node must be an integer"),
])
def test_bad_input(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_real_groups_on_4_ranks():
    values = run(grid_demo, 4, {"dp": 2, "tp": 2}, quiet=True)
    for rank, v in enumerate(values):
        assert v["label"].startswith(f"DP(2)-TP(2)-Rank({rank})")
        for axis in ("dp", "tp"):
            ranks, total = v[axis]
            assert ranks == RankGrid(dp=2, tp=2).group_ranks(axis, rank)
            assert total == sum(ranks)
