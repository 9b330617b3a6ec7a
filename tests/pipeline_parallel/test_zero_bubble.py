"""Zero-bubble pipeline (ZB-H1, Qi et al. 2024): the spec.

* The backward splits into B (input gradient) and W (weight gradients); together they are bitwise
  the unsplit backward, and each does half of its FLOPs.
* A ZB-H1 step ends with the gradients and parameters of single-process training, bitwise those
  of 1F1B, and those of PyTorch's ScheduleInterleavedZeroBubble; PyTorch's ZB-V runs too.
* The schedule is a valid order: every F, B, W once, F before B before W, messages received in
  the order they are sent, PyTorch's own order, no deadlock; its ideal bubble is
  (K-1)(t_f+t_b-t_w)/(M(t_f+t_b+t_w)+(K-1)(t_f+t_b-t_w)).
* Memory: stage k holds K micro-batches' activations plus k+1 micro-batches' tap gradients
  (1F1B: K-k micro-batches).
* Under emulated device time the measured bubble is within 10 % of the formula, beside 1F1B's.
* Too few micro-batches (M < K) fail with one clear error before any rank starts.
"""

from __future__ import annotations

import statistics

import pytest
import torch

from playground.model import ModelConfig, build_model, loss_fn, synthetic_batch
from playground.pipeline_parallel import (PipeSpec, backward_input, backward_weight, bubble_rows, check_equal,
                                          max_in_flight, measured_bubble, predicted_bubble, predicted_zb_bubble,
                                          record_taps, run_pipeline, schedule_actions, simulate)

K, M = 4, 8
EMULATED = (0.4, 0.8)  # seconds, (T_F, T_B) of one stage on the mini-batch: F = B = W per micro-batch
REPEATS = 3


def _specs() -> list[PipeSpec]:
    exact = dict(stages=K, micro_batches=M, device_time_s=None, keep_state=True)
    specs = [PipeSpec("1f1b", count_flops=True, **exact), PipeSpec("zb", count_flops=True, **exact),
             PipeSpec("zb", engine="torch", **exact),
             PipeSpec("zbv", engine="torch", chunks=2, cfg=ModelConfig(n_layers=8), **exact),
             # 3 stages on 4 ranks, float64, another model and M
             PipeSpec("zb", stages=3, micro_batches=5, batch_size=5, dtype=torch.float64,
                      cfg=ModelConfig(n_layers=5, d_model=16, n_heads=2, seq_len=8),
                      device_time_s=None, keep_state=True)]
    # the timing runs: repetitions interleaved, the same emulated device time for both schedules
    specs += [PipeSpec(s, stages=2, micro_batches=2, batch_size=8, step=r, device_time_s=EMULATED)
              for r in range(REPEATS) for s in ("1f1b", "zb")]
    return specs


@pytest.fixture(scope="module")
def runs():
    """One launch of 4 ranks: equality, memory and timing runs."""
    return run_pipeline(_specs(), world_size=4)


def test_zero_bubble_split_backward_is_bitwise_the_unsplit_backward():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model: more threads only add contention on a shared CPU
    try:
        _split_equals_unsplit()
    finally:
        torch.set_num_threads(threads)


def _split_equals_unsplit():
    cfg = ModelConfig()
    full, split = build_model(cfg, 0), build_model(cfg, 0)
    tokens, targets = synthetic_batch(cfg, 8, 0, 0)
    for tokens_m, targets_m in zip(tokens.chunk(2), targets.chunk(2)):
        x_full = torch.nn.Sequential(*full.layers[:1])(tokens_m).detach().requires_grad_()
        loss_fn(torch.nn.Sequential(*full.layers[1:])(x_full), targets_m).backward()
        x = x_full.detach().clone().requires_grad_()
        rest = torch.nn.Sequential(*split.layers[1:])
        with record_taps(rest) as taps:
            y = loss_fn(rest(x), targets_m)
        assert len(taps) == 4 * (6 + 2) + 2                   # per block 2 norms + 6 linears; head 2
        before = [None if p.grad is None else p.grad.clone() for p in rest.parameters()]
        grad_x, tap_grads = backward_input(y, None, x, taps)
        for p, old in zip(rest.parameters(), before):           # B touched no weight gradient
            assert (p.grad is None and old is None) or torch.equal(p.grad, old)
        assert torch.equal(grad_x, x_full.grad)
        backward_weight(taps, tap_grads)
    for (name, p), q in zip(full.layers[1:].named_parameters(), split.layers[1:].parameters()):
        assert torch.equal(p.grad, q.grad), name


def test_zero_bubble_equals_single_process_1f1b_and_torch_zero_bubble(runs):
    plain, zb, zb_torch, zbv_torch, zb3 = runs[:5]
    lines = check_equal([plain, zb, zb_torch, zbv_torch, zb3], {("zb", K, M): zb_torch})
    assert "and torch.distributed.pipelining" in lines[1]
    for name, g in plain["grads"].items():  # same kernels, same accumulation order: bitwise
        assert torch.equal(zb["grads"][name], g), name
        assert torch.equal(zb["params"][name], plain["params"][name]), name
    for k in range(K):  # B and W split the backward's FLOPs in half
        f_zb, f_plain = zb["stages"][k]["flops"], plain["stages"][k]["flops"]
        assert f_zb["B"] == f_zb["W"] == f_plain["B"] // 2 and f_zb["F"] == f_plain["F"]
        # no new message: B sends exactly what 1F1B's backward sends, W sends nothing
        t_zb, t_plain = zb["stages"][k]["traffic"], plain["stages"][k]["traffic"]
        assert t_zb["sent_bytes"] == t_plain["sent_bytes"] > 0
        assert t_zb["calls"].get("isend") == t_plain["calls"].get("isend")


def test_zero_bubble_memory_is_k_micro_batches_plus_what_w_waits_for(runs):
    plain, zb = runs[0], runs[1]
    for k in range(K):
        st, ref = zb["stages"][k], plain["stages"][k]
        a, g = st["saved_bytes"][0], st["w_input_bytes"][0]
        assert set(st["saved_bytes"]) == {a} and set(st["w_input_bytes"]) == {g} and 0 < g < a
        assert ref["peak_bytes"] == (K - k) * a
        assert st["peak_bytes"] == K * a + (k + 1) * g
        # a and g, walked along the action list, give the same peak
        live = peak = 0
        for op, _ in schedule_actions("zb", K, M, k):
            live += {"F": a, "B": g, "W": -(a + g)}[op]
            peak = max(peak, live)
        assert peak == st["peak_bytes"]
        assert [op for op, *_ in st["events"]] == [op for op, _ in schedule_actions("zb", K, M, k)]


@pytest.mark.parametrize("K_", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("extra", [0, 1, 5, 12])
def test_zero_bubble_schedule_dependency_order_is_valid(K_, extra):
    from torch.distributed.pipelining.schedules import _get_1f1b_rank_ops
    M_ = K_ + extra
    sent, received = {}, {}
    for k in range(K_):
        actions = schedule_actions("zb", K_, M_, k)
        assert sorted(actions) == sorted((op, m) for op in "FBW" for m in range(M_))
        position = {a: i for i, a in enumerate(actions)}
        assert all(position["F", m] < position["B", m] < position["W", m] for m in range(M_))
        assert max_in_flight(actions) == K_                     # 1F1B: K - k
        pending = max(sum(1 for op, m in actions[:i + 1] if op == "B")
                      - sum(1 for op, m in actions[:i + 1] if op == "W") for i in range(len(actions)))
        assert pending == min(k + 1, M_)                        # B done, W deferred
        for op, m in actions:
            if op == "F" and k > 0:
                received.setdefault((k - 1, k), []).append(("F", m))
            if op == "F" and k < K_ - 1:
                sent.setdefault((k, k + 1), []).append(("F", m))
            if op == "B" and k < K_ - 1:
                received.setdefault((k + 1, k), []).append(("B", m))
            if op == "B" and k > 0:
                sent.setdefault((k, k - 1), []).append(("B", m))
        # PyTorch's ZB1P with one stage per rank: the same order
        warm = K_ - 1 - k
        theirs = _get_1f1b_rank_ops(1, K_, warm, M_ - warm, warm, k, lambda _: k, lambda _: k, k,
                                    enable_zero_bubble=True)
        names = {"FORWARD": "F", "BACKWARD_INPUT": "B", "BACKWARD_WEIGHT": "W"}
        assert [(names[a.computation_type.name], a.microbatch_index) for a in theirs if a] == actions
    assert sent == received                                     # FIFO matching is enough
    timeline = simulate("zb", K_, M_, t_f=1.0, t_b=2.0)         # no deadlock; F = B = W = 1
    assert measured_bubble(timeline)["bubble"] == pytest.approx(predicted_zb_bubble(K_, M_))
    assert predicted_zb_bubble(K_, M_) == pytest.approx((K_ - 1) / (3 * M_ + K_ - 1))
    assert measured_bubble(timeline)["step_s"] == pytest.approx(3 * M_ + K_ - 1)
    for t_f in (1.5, 3.0):                                      # F slower than B = W = 1
        tl = simulate("zb", K_, M_, t_f=t_f, t_b=2.0)
        assert measured_bubble(tl)["bubble"] == pytest.approx(predicted_zb_bubble(K_, M_, t_f, 1.0, 1.0))
    with pytest.raises(ValueError, match="t_w <= min"):         # W no longer fits an F's slot
        predicted_zb_bubble(K_, M_, 0.5, 1.0, 1.0)


def test_zero_bubble_measured_bubble_is_the_formula_within_10_percent_beside_1f1b(runs):
    rows = {r["schedule"]: r for r in bubble_rows(runs[5:])}
    zb, plain = rows["zb"], rows["1f1b"]
    assert zb["formula"] == pytest.approx(predicted_zb_bubble(2, 2), abs=1e-4)      # 1/7
    assert plain["formula"] == pytest.approx(predicted_bubble(2, 2), abs=1e-4)      # 1/3
    assert zb["overruns"] == plain["overruns"] == 0                 # the emulation held
    assert abs(zb["ratio"] - 1) <= 0.10, zb                         # emulated device time
    assert abs(plain["ratio"] - 1) <= 0.10, plain
    assert zb["measured"] < plain["measured"] and zb["step_s"] < plain["step_s"]
    steps = [r["step_s"] for r in runs[5:] if r["spec"].schedule == "zb"]
    assert statistics.median(steps) == pytest.approx(zb["step_formula_s"], rel=0.10)


@pytest.mark.parametrize("kwargs, message", [
    (dict(schedule="zb", stages=4, micro_batches=2), "needs micro_batches >= stages"),
    (dict(schedule="zb", stages=4, micro_batches=3, batch_size=6, engine="torch"),
     "needs micro_batches >= stages"),
    (dict(schedule="zb", recompute=True), "does not combine with recompute"),
    (dict(schedule="zbv", chunks=2, cfg=ModelConfig(n_layers=8)), "ScheduleZBVZeroBubble"),
    (dict(schedule="zbv", engine="torch", chunks=1), "chunks=2"),
    (dict(schedule="zb", chunks=2), "only the 'interleaved'"),
])
def test_zero_bubble_bad_sizes_fail_with_one_clear_error_before_any_rank_starts(kwargs, message):
    with pytest.raises(ValueError, match=message):
        PipeSpec(**kwargs)                  # run_pipeline takes PipeSpecs: nothing was launched
    if kwargs.get("micro_batches", 8) < kwargs.get("stages", 4):
        with pytest.raises(ValueError, match="micro_batches >= stages"):
            schedule_actions("zb", kwargs["stages"], kwargs["micro_batches"], 0)
        with pytest.raises(ValueError, match="micro_batches >= stages"):
            predicted_zb_bubble(kwargs["stages"], kwargs["micro_batches"])
