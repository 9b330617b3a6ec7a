"""Ring collectives: the contract of dist.all_reduce, built from send/recv, bytes counted exactly.

Each launch batches every (dtype, size) case for one world size, so the file stays fast.
"""

import pytest
import torch
import torch.distributed as dist

from playground import comm
from playground.launch import run
from playground.data_parallel import (ring_all_gather, ring_all_reduce, ring_bytes_sent, ring_reduce_scatter,
                                      shard_bounds)

DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.int64)
SIZES = (0, 1, 2, 3, 5, 7, 64, 1003, 4096)
BF16_EPS = 2.0 ** -8  # unit roundoff of bfloat16 (8 significand bits)


def _data(rank, numel, dtype, seed):
    g = torch.Generator().manual_seed(seed * 7919 + rank)
    if dtype == torch.int64:
        return torch.randint(-(2 ** 40), 2 ** 40, (numel,), generator=g)
    return torch.randn(numel, generator=g, dtype=torch.float64).to(dtype)


def _check_against_reference(got, numel, dtype, world_size, seed, what):
    """Compare with the exact sum, computed in one process from every rank's regenerated data."""
    inputs = [_data(r, numel, dtype, seed) for r in range(world_size)]
    if dtype == torch.int64:
        assert torch.equal(got, sum(inputs)), what
        return
    exact = torch.stack([x.double() for x in inputs]).sum(0)
    if dtype == torch.bfloat16:
        # n-1 additions, each rounding to bf16: error <= (n-1)·u·Σ|x_i| (+ the final rounding)
        bound = world_size * BF16_EPS * torch.stack([x.double().abs() for x in inputs]).sum(0)
        assert bool(((got.double() - exact).abs() <= bound).all()), what
    else:
        torch.testing.assert_close(got, exact.to(dtype), msg=what)


def all_cases(rank, world_size, seed):
    """Every dtype and size: ring all-reduce vs dist.all_reduce vs the exact sum; bytes counted."""
    report = []
    for dtype in DTYPES:
        for numel in SIZES:
            x = _data(rank, numel, dtype, seed)
            ours, builtin = x.clone(), x.clone()
            with comm.count() as moved:
                out = ring_all_reduce(ours)
            dist.all_reduce(builtin)
            what = f"{dtype} numel={numel} n={world_size}"
            assert out is ours, what
            if dtype == torch.int64:
                assert torch.equal(ours, builtin), what
            elif dtype == torch.bfloat16:
                # sums in bf16 depend on the order of additions: the ring and gloo must each be
                # within bf16's rounding bound of the exact sum (checked below), so within twice
                # that bound of each other
                _check_against_reference(builtin, numel, dtype, world_size, seed, "gloo " + what)
            else:
                torch.testing.assert_close(ours, builtin, msg=what)
            _check_against_reference(ours, numel, dtype, world_size, seed, what)
            report.append((str(dtype), numel, moved.sent_bytes, moved.received_bytes,
                           moved.calls.get("isend", 0) + moved.calls.get("send", 0),
                           moved.payload_bytes.get("all_reduce", 0)))
    return report


def phases(rank, world_size, numel):
    """Reduce-scatter alone leaves the sum of chunk r on rank r; all-gather completes the rest."""
    x = _data(rank, numel, torch.float64, seed=3).reshape(-1, 1) if numel else torch.zeros(0)
    lo, hi = shard_bounds(numel, world_size)[rank]
    full = x.clone()
    dist.all_reduce(full)
    with comm.count() as rs_bytes:
        chunk = ring_reduce_scatter(x)
    assert chunk.data_ptr() == x.view(-1)[lo:].data_ptr() or chunk.numel() == 0  # a view, in place
    torch.testing.assert_close(chunk, full.view(-1)[lo:hi])
    # all-gather from a tensor whose only valid chunk is this rank's own
    y = torch.full_like(x, float("nan"))
    y.view(-1)[lo:hi] = chunk
    with comm.count() as ag_bytes:
        assert ring_all_gather(y) is y
    torch.testing.assert_close(y, full)
    return rs_bytes.sent_bytes, ag_bytes.sent_bytes


def subgroups(rank, world_size):
    """On a 2 x 2 layout, reduce over the 'data-parallel' pairs {0, 2} and {1, 3} only."""
    groups = [dist.new_group([0, 2]), dist.new_group([1, 3])]
    mine = groups[rank % 2]
    x = torch.arange(10, dtype=torch.float32) + 100 * rank
    expected = x.clone()
    dist.all_reduce(expected, group=mine)
    ring_all_reduce(x, group=mine)
    torch.testing.assert_close(x, expected)
    return x[:2].tolist()


def bad_input(rank, world_size):
    # a leaf that requires grad is reduced like dist.all_reduce reduces it (no autograd error)
    leaf = torch.ones(5, requires_grad=True)
    ring_all_reduce(leaf)
    assert leaf.tolist() == [float(world_size)] * 5 and leaf.grad_fn is None
    errors = []
    for bad in (torch.zeros(4, 4).t(), [1.0, 2.0]):
        try:
            ring_all_reduce(bad)
        except (ValueError, TypeError) as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
    return errors


def segmented(rank, world_size):
    """Chunks over SEGMENT_BYTES travel as several segments (the path small tensors never take):
    uneven float64 chunks of ~1.5 segments each, still equal to dist.all_reduce."""
    from playground.data_parallel.ring import SEGMENT_BYTES
    numel = world_size * 3 * SEGMENT_BYTES // 16 + world_size - 1
    x = _data(rank, numel, torch.float64, seed=5)
    expected = x.clone()
    dist.all_reduce(expected)
    with comm.count() as moved:
        ring_all_reduce(x)
    torch.testing.assert_close(x, expected)
    return numel, moved.sent_bytes


PHASE_NUMEL = {1: 5, 2: 0, 3: 10, 4: 2}  # uneven, empty, fewer elements than ranks


def builtin_phases(rank, world_size):
    """Each half of the ring equals PyTorch's own collective: ring_reduce_scatter leaves on rank r
    what dist.reduce_scatter_tensor returns there, ring_all_gather what dist.all_gather_single
    assembles (the built-ins need equal chunks: 12 float64 elements per rank)."""
    numel = 12 * world_size
    x = _data(rank, numel, torch.float64, seed=7)
    theirs = torch.empty(numel // world_size, dtype=x.dtype)
    dist.reduce_scatter_tensor(theirs, x.clone())
    ours = ring_reduce_scatter(x.clone())
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-12)
    gathered = torch.empty(numel, dtype=x.dtype)
    dist.all_gather_single(gathered, theirs)
    y = torch.full_like(x, float("nan"))
    lo, hi = shard_bounds(numel, world_size)[rank]
    y[lo:hi] = theirs
    torch.testing.assert_close(ring_all_gather(y), gathered, rtol=0, atol=0)
    return True


def suite(rank, world_size, seed):
    """Everything one world size checks, in one launch (each launch costs seconds)."""
    out = {"cases": all_cases(rank, world_size, seed),
           "phases": phases(rank, world_size, PHASE_NUMEL[world_size]),
           "builtin_phases": builtin_phases(rank, world_size),
           "bad": bad_input(rank, world_size)}
    if world_size == 4:
        out["subgroups"] = subgroups(rank, world_size)
    if world_size == 3:
        out["segmented"] = segmented(rank, world_size)
    return out


_RESULTS = {}


def results(world_size):
    if world_size not in _RESULTS:
        _RESULTS[world_size] = run(suite, world_size, 11)
    return _RESULTS[world_size]


# ----------------------------------------------------------------------------- shard_bounds
@pytest.mark.parametrize("numel", [0, 1, 3, 4, 10, 11, 1003])
@pytest.mark.parametrize("n", [1, 2, 3, 4, 7])
def test_shard_bounds_tile_in_order_with_extras_first(numel, n):
    bounds = shard_bounds(numel, n)
    assert len(bounds) == n
    assert bounds[0][0] == 0 and bounds[-1][1] == numel
    assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
    sizes = [e - s for s, e in bounds]
    assert sizes == [numel // n + (1 if r < numel % n else 0) for r in range(n)]


def test_shard_bounds_examples_and_errors():
    assert shard_bounds(10, 4) == [(0, 3), (3, 6), (6, 8), (8, 10)]
    assert shard_bounds(2, 4) == [(0, 1), (1, 2), (2, 2), (2, 2)]
    assert shard_bounds(0, 3) == [(0, 0)] * 3
    with pytest.raises(ValueError, match="world_size"):
        shard_bounds(10, 0)
    with pytest.raises(ValueError, match="numel"):
        shard_bounds(-1, 2)


def test_ring_bytes_refuses_what_is_not_a_ring_position_or_a_size():
    for bad, match in ((dict(rank=4), "rank"), (dict(rank=-1), "rank"),
                       (dict(element_size=0), "element_size"), (dict(phases=True), "phases")):
        with pytest.raises(ValueError, match=match):
            ring_bytes_sent(**(dict(numel=10, world_size=4, element_size=4) | bad))


def test_ring_bytes_formula_when_divisible():
    for n in (2, 3, 4, 8):
        S = 4 * 96 * n
        assert ring_bytes_sent(96 * n, n, 4) == 2 * (n - 1) * S // n
        assert ring_bytes_sent(96 * n, n, 4, phases=1) == (n - 1) * S // n


# ----------------------------------------------------------------------------- real runs
@pytest.mark.parametrize("world_size", [1, 2, 3, 4])
def test_ring_all_reduce_equals_builtin_every_dtype_and_size(world_size):
    for rank, values in enumerate(results(world_size)):
        report = values["cases"]
        for dtype_name, numel, sent, received, n_sends, builtin_payload in report:
            size = torch.empty(0, dtype=getattr(torch, dtype_name.split(".")[1])).element_size()
            assert sent == ring_bytes_sent(numel, world_size, size, rank), (dtype_name, numel)
            # the ring is symmetric: what rank r receives is what rank r-1 sends
            assert received == ring_bytes_sent(numel, world_size, size, (rank - 1) % world_size)
            assert n_sends <= 2 * (world_size - 1)
            assert builtin_payload == 0  # ring_all_reduce never calls the built-in
            if numel % world_size == 0:
                assert sent == 2 * (world_size - 1) * numel * size // world_size


@pytest.mark.parametrize("world_size", [1, 2, 3, 4])
def test_reduce_scatter_then_all_gather(world_size):
    numel = PHASE_NUMEL[world_size]
    values = [v["phases"] for v in results(world_size)]
    assert [rs for rs, _ in values] == [ring_bytes_sent(numel, world_size, 8, r, phases=1)
                                        for r in range(world_size)]
    totals = [rs + ag for rs, ag in values]
    assert totals == [ring_bytes_sent(numel, world_size, 8, r) for r in range(world_size)]


@pytest.mark.parametrize("world_size", [1, 2, 3, 4])
def test_reduce_scatter_and_all_gather_equal_pytorchs_own(world_size):
    assert all(v["builtin_phases"] for v in results(world_size))


def test_big_chunks_travel_in_segments_and_still_sum():
    for rank, (numel, sent) in enumerate(v["segmented"] for v in results(3)):
        assert sent == ring_bytes_sent(numel, 3, 8, rank)


def test_ring_on_a_subgroup_uses_group_ranks():
    values = [v["subgroups"] for v in results(4)]
    assert values == [[200.0, 202.0], [400.0, 402.0], [200.0, 202.0], [400.0, 402.0]]


def test_bad_input_is_one_clear_error():
    errors = results(2)[0]["bad"]
    assert errors[0].startswith("ValueError") and "contiguous" in errors[0]
    assert errors[1].startswith("TypeError") and "torch.Tensor" in errors[1]
    with pytest.raises(RuntimeError, match="process group"):
        ring_all_reduce(torch.zeros(3))
