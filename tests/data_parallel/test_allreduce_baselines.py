"""Parameter server, sharded parameter server and tree all-reduce: the dist.all_reduce contract,
exact bytes per rank, and the alpha-beta cost model's formulas."""

import math

import pytest
import torch
import torch.distributed as dist

from playground import comm

from playground.data_parallel import cost_model
from playground.data_parallel.allreduce_baselines import (parameter_server_all_reduce, sent_bytes,
                                            sharded_parameter_server_all_reduce, tree_all_reduce,
                                            tree_children)
from playground.launch import run

DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.int64)
SIZES = (0, 3, 1003)


def _variants(n):
    """(algorithm name for sent_bytes, options, function) for every configuration we check."""
    out = [("parameter_server", {"server": s}, lambda t, s=s: parameter_server_all_reduce(t, s))
           for s in sorted({0, n - 1})]
    out += [("sharded_ps", {"servers": k},
             lambda t, k=k: sharded_parameter_server_all_reduce(t, servers=k))
            for k in sorted({1, max(1, n - 1), n})]
    out += [("tree", {"root": r}, lambda t, r=r: tree_all_reduce(t, root=r)) for r in sorted({0, n - 1})]
    return out


def suite(rank, world_size):
    report = []
    for name, options, fn in _variants(world_size):
        for dtype in DTYPES:
            for numel in SIZES:
                g = torch.Generator().manual_seed(rank * 101 + numel)
                x = (torch.randint(-1000, 1000, (numel,), generator=g) if dtype == torch.int64
                     else torch.randn(numel, generator=g, dtype=torch.float64).to(dtype))
                expected = x.clone()
                dist.all_reduce(expected)
                with comm.count() as moved:
                    assert fn(x) is not None
                what = f"{name} {options} {dtype} numel={numel}"
                if dtype == torch.int64:
                    assert torch.equal(x, expected), what
                elif dtype == torch.bfloat16:  # sums in another order: a few bf16 roundings apart
                    tol = 2 * world_size * 2.0 ** -8
                    torch.testing.assert_close(x, expected, rtol=tol, atol=tol * world_size, msg=what)
                else:
                    torch.testing.assert_close(x, expected, msg=what)
                report.append((name, options, x.element_size(), numel, moved.sent_bytes))
    errors = []
    for bad in (lambda: parameter_server_all_reduce(torch.zeros(3), server=world_size),
                lambda: sharded_parameter_server_all_reduce(torch.zeros(3), servers=0),
                lambda: tree_all_reduce(torch.zeros(3), root=-1)):
        try:
            bad()
        except ValueError as exc:
            errors.append(str(exc))
    return report, errors


@pytest.mark.parametrize("world_size", [1, 2, 3, 4])
def test_baselines_equal_builtin_and_send_the_predicted_bytes(world_size):
    for rank, (report, errors) in enumerate(run(suite, world_size)):
        for name, options, size, numel, sent in report:
            assert sent == sent_bytes(name, numel, world_size, size, rank, **options), \
                (name, options, numel, rank)
        assert len(errors) == 3 and "server" in errors[0] and "servers" in errors[1] \
            and "root" in errors[2]


def test_parameter_server_bytes_grow_with_n_ring_bytes_do_not():
    S = 4 * 4800
    for n in (2, 4, 8, 16):
        assert sent_bytes("parameter_server", 4800, n, 4, 0) == (n - 1) * S
        assert sent_bytes("ring", 4800, n, 4, 0) == 2 * (n - 1) * S // n < 2 * S
        assert sent_bytes("sharded_ps", 4800, n, 4, 0, servers=n) == 2 * (n - 1) * S // n


def test_tree_is_a_spanning_tree_of_depth_log2_n():
    for n in range(1, 20):
        parents = {}
        for v in range(n):
            for c in tree_children(v, n):
                assert c not in parents
                parents[c] = v
        assert sorted(parents) == list(range(1, n))  # every non-root has exactly one parent
        assert len(tree_children(0, n)) == (math.ceil(math.log2(n)) if n > 1 else 0)


def test_cost_model_fit_recovers_alpha_beta_and_predicts_the_formulas():
    alpha, beta = 30e-6, 1e-9
    data = {m: alpha + m * beta for m in (4, 64, 1024, 2 ** 16, 2 ** 20, 2 ** 24)}
    model = cost_model.fit(data, gamma_s_per_byte=1e-10)
    assert model.alpha_s == pytest.approx(alpha, rel=1e-6)
    assert model.beta_s_per_byte == pytest.approx(beta, rel=1e-6)
    S, n = 2 ** 24, 4
    assert cost_model.predict(model, "ring", n, S) == pytest.approx(
        2 * (n - 1) * alpha + 2 * (n - 1) / n * S * beta + (n - 1) / n * S * 1e-10)
    assert cost_model.predict(model, "parameter_server", n, S) == pytest.approx(
        2 * (n - 1) * (alpha + S * beta) + (n - 1) * S * 1e-10)
    assert cost_model.predict(model, "sharded_ps", n, S, servers=n) == pytest.approx(
        cost_model.predict(model, "ring", n, S))
    assert cost_model.predict(model, "tree", 5, S) == pytest.approx(
        6 * (alpha + S * beta) + 3 * S * 1e-10)
    assert cost_model.predict(model, "ring", 1, S) == 0.0
    with pytest.raises(ValueError, match="unknown algorithm"):
        cost_model.predict(model, "butterfly", n, S)
    with pytest.raises(ValueError, match="world size"):
        cost_model.predict(model, "ring", 0, S)
    with pytest.raises(ValueError, match="at least two"):
        cost_model.fit({4: 1e-5})


def test_timing_harness_reports_medians_spread_and_busbw():
    from playground.data_parallel import busbw_gb_s, ring_step_s, time_all_reduces
    out = run(time_all_reduces, 2, [4096, 65536], ("ring", "tree", "builtin"), 3, 1, True)
    assert out[1] == {}  # rank 0 reports for everyone
    result = out[0]
    assert result["world_size"] == 2 and result["repeats"] == 3 and result["backend"] == "gloo"
    for size, algs in result["times"].items():
        assert set(algs) == {"ring", "tree", "builtin"}
        for r in algs.values():
            assert r["p25_s"] <= r["median_s"] <= r["p75_s"]
            assert r["busbw_gb_s"] == pytest.approx(busbw_gb_s(size, r["median_s"], 2))
            assert r["busbw_gb_s"] == pytest.approx(size / r["median_s"] / 1e9)  # 2(n-1)/n = 1
    assert set(result["ping_pong"]) == {2 ** k for k in range(2, 25, 2)}
    assert result["alpha_beta"].alpha_s > 0 and result["alpha_beta"].beta_s_per_byte > 0
    assert set(result["tiny"]) == {2} and set(result["tiny"][2]) == {"ring", "tree", "builtin"}
    assert ring_step_s(result["tiny"]) == {2: result["tiny"][2]["ring"] / 2}  # 2(N-1) = 2 steps


def test_measured_times_are_set_beside_their_predictions():
    ab = cost_model.AlphaBeta(1e-5, 1e-9, 1e-10)
    S = 2 ** 20

    def timing(seconds):
        return {"median_s": seconds, "spread": 0.1}
    timed = {"world_size": 4, "alpha_beta": ab, "ping_pong": {4: 2e-5, S: 1e-5 + S * 1e-9},
             "times": {4096: {"ring": timing(1e-3), "parameter_server": timing(5e-4)},
                       S: {"ring": timing(0.01), "parameter_server": timing(0.02),
                           "builtin": timing(0.008)}}}
    check = cost_model.against_measured(timed, cores=2)
    bound = cost_model.machine_bound(ab, 4, S, 2)
    assert check["bound_s"] == bound and check["size"] == S
    assert check["over_bound"] == {"ring": 0.01 / bound, "parameter_server": 0.02 / bound,
                                   "builtin": 0.008 / bound}
    row = next(r for r in check["rows"] if r["size"] == S and r["algorithm"] == "builtin")
    assert row["predicted_s"] == cost_model.predict(ab, "ring", 4, S, cores=2)  # gloo's ring
    assert row["ratio"] == pytest.approx(0.008 / row["predicted_s"])
    assert check["ps_over_ring"]["measured"] == pytest.approx(2.0)
    assert check["ps_over_ring"]["per_link"] == pytest.approx(
        cost_model.predict(ab, "parameter_server", 4, S) / cost_model.predict(ab, "ring", 4, S))
    assert check["misfit"] == pytest.approx((2e-5 - 1e-5 - 4e-9) / 2e-5)  # the 4 B point
    assert len(cost_model.table(check).splitlines()) == 4 + 5 + 2  # header, rows, summary


def test_exposed_communication_of_buckets_follows_the_exercise():
    # ex-dp-bucket: 300 ms of backward, 2 GB of gradients, buckets take 1 ms + b / (10 GB/s)
    assert cost_model.exposed_after_backward(0.3, 80, 0.0035) == pytest.approx(0.0035)  # 25 MB
    assert cost_model.exposed_after_backward(0.3, 2000, 0.0011) == pytest.approx(1.90015)  # 1 MB
    assert cost_model.exposed_after_backward(0.3, 1, 0.201) == pytest.approx(0.201)  # one bucket
    for bad in (dict(buckets=0), dict(buckets=2.0), dict(bucket_s=-1.0), dict(backward_s=math.nan)):
        args = {"backward_s": 0.3, "buckets": 4, "bucket_s": 0.01} | bad
        with pytest.raises(ValueError, match=next(iter(bad))):
            cost_model.exposed_after_backward(**args)


def test_unknown_algorithm_and_bad_benchmark_options_are_named():
    from types import SimpleNamespace

    from playground.data_parallel import time_all_reduces
    from playground.bench import allreduce as bench
    with pytest.raises(ValueError, match="unknown all-reduce"):
        time_all_reduces(0, 1, [4], ("butterfly",))
    args = SimpleNamespace(sizes_mb=[64], world_sizes=[1], repeats=3, warmup=1)
    with pytest.raises(ValueError, match="world-sizes"):
        bench.run(args)


def test_cost_explorer_builds_its_widget():
    widgets = pytest.importorskip("ipywidgets")
    from playground.data_parallel import cost_explorer
    box = cost_explorer(cost_model.AlphaBeta(40e-6, 1e-9, 1e-10))
    assert isinstance(box, widgets.VBox)
    sliders = [w for row in box.children[:2] for w in row.children]
    assert [s.description for s in sliders] == ["ranks n", "S (bytes)", "α (µs)", "1/β (GB/s)"]
    sliders[0].value = 64  # moving a slider redraws without error


def test_cost_explorer_starts_at_the_fit_and_ignores_the_browsers_snapping(monkeypatch):
    pytest.importorskip("ipywidgets")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from playground.data_parallel import cost_explorer
    drawn = []
    monkeypatch.setattr(plt, "show", lambda *a, **k: drawn.append(plt.gcf().axes[0].get_title()))
    fit = cost_model.AlphaBeta(67.3e-6, 1e-9 / 2.531, 1e-10)
    box = cost_explorer(fit, n_ranks=4, size_bytes=16 * 2 ** 20)
    n, size, alpha, bandwidth = [w for row in box.children[:2] for w in row.children]
    assert (n.value, size.value) == (4, 16 * 2 ** 20)
    assert alpha.value == pytest.approx(67.3) and bandwidth.value == pytest.approx(2.531)
    assert all(w.layout.width and w.style.description_width == "initial"
               for w in (n, size, alpha, bandwidth))
    assert drawn == ["n = 4, S = 16 MiB: fastest is ring (predicted)"]   # drawn at once
    alpha.value = 67.3 * 1.003      # the browser snapping to the slider's step: no redraw
    assert len(drawn) == 1
    alpha.value = 200.0             # a real move redraws
    assert len(drawn) == 2
    plt.close("all")


def test_byte_and_time_formulas_refuse_bad_input_even_where_the_answer_would_be_zero():
    m = cost_model.AlphaBeta(1e-5, 1e-9)
    for call, match in (
            (lambda: sent_bytes("butterfly", 10, 1, 4, 0), "unknown algorithm"),
            (lambda: sent_bytes("ring", 10, 4, 4, 4), "rank"),
            (lambda: sent_bytes("ring", 10, 4, 4, 0, server=1), "no option 'server'"),
            (lambda: sent_bytes("parameter_server", 10, 4, 4, 0, server=4), "server"),
            (lambda: sent_bytes("sharded_ps", 10, 4, 4, 0, servers=0), "servers"),
            (lambda: sent_bytes("sharded_ps", 10, 4, 4, 0, servers=5), "servers"),
            (lambda: sent_bytes("tree", 0, 4, 4, 0, root=-1), "root"),
            (lambda: tree_children(4, 4), "v must be"),
            (lambda: cost_model.predict(m, "butterfly", 1, 1e6), "unknown algorithm"),
            (lambda: cost_model.predict(m, "sharded_ps", 4, 1e6, servers=-1), "servers"),
            (lambda: cost_model.predict(m, "sharded_ps", 4, 1e6, servers=5), "servers"),
            (lambda: cost_model.busiest_rank_bytes("sharded_ps", 4, 1e6, servers=0), "servers"),
            (lambda: cost_model.predict(m, "ring", 4, float("nan")), "message size"),
            (lambda: cost_model.predict(m, "ring", 4, "1e6"), "message size"),
            (lambda: cost_model.fit({4: 0.0, 8: 1e-5}), "times > 0")):
        with pytest.raises(ValueError, match=match):
            call()
    assert sent_bytes("sharded_ps", 10, 4, 4, 0, servers=None) == \
        sent_bytes("sharded_ps", 10, 4, 4, 0)


def test_quartiles_stay_within_the_samples():
    from playground.data_parallel.allreduce_lab import quartiles
    assert quartiles([9.0, 1.0]) == (3.0, 5.0, 7.0)  # "exclusive" would give p25 = -1
    assert quartiles([2.0]) == (2.0, 2.0, 2.0)
    assert quartiles([1.0, 2.0, 3.0]) == (1.0, 2.0, 3.0)


def one_rank_lab(rank, world_size):
    from playground.data_parallel.allreduce_lab import count_bytes, time_all_reduces, tiny_all_reduces
    errors = []
    for call in (lambda: cost_model.ping_pong(rank, [4]),  # used to wait forever for rank 1
                 lambda: count_bytes(rank, world_size, 5, [2]),
                 lambda: time_all_reduces(rank, world_size, [6]),
                 lambda: time_all_reduces(rank, world_size, [8], repeats=0),
                 lambda: tiny_all_reduces(rank, world_size),
                 lambda: tiny_all_reduces(rank, 2, warmup=-1),
                 lambda: tiny_all_reduces(rank, 2, ("butterfly",))):
        try:
            call()
            errors.append(None)
        except ValueError as exc:
            errors.append(str(exc))
    return errors


def test_lab_rank_functions_refuse_bad_input_instead_of_hanging():
    errors = run(one_rank_lab, 1, timeout_s=60)[0]
    assert "at least 2 ranks" in errors[0]
    assert "group sizes" in errors[1]
    assert "multiples of 4" in errors[2]
    assert "repeats" in errors[3]
    assert "at least 2 ranks" in errors[4]
    assert "warmup" in errors[5]
    assert "unknown all-reduce" in errors[6]
