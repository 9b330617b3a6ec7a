"""Pipeline parallelism: the spec.

* Every schedule (naive, GPipe, 1F1B), with and without recomputation, for K in {2, 4} stages and
  M in {1, 2, 4, 8} micro-batches, ends a step with the gradients and parameters of single-process
  full-batch training, and with those of torch.distributed.pipelining (ScheduleGPipe,
  Schedule1F1B) on the same stages.
* Each boundary carries exactly the batch's activations forward and their gradients backward.
* Saved activations: GPipe holds all M micro-batches, 1F1B at most K-k on stage k,
  recomputation only the stage inputs plus one micro-batch; recomputation adds one forward's FLOPs.
* Interleaved 1F1B (V chunks per rank) equals single-process training and
  ScheduleInterleaved1F1B, moves each of the K·V-1 boundaries' bytes once each way, and holds
  the (micro-batch, chunk) pairs its schedule says; its ideal bubble is (K-1)/(V·M+K-1).
* Schedules and the bubble formula agree in the ideal simulation; bad input fails clearly.
* The timing table sets each step time beside (V·M+K-1)/(V·M)·(T_F+T_B) and reads the fixed
  cost c per action from the difference.
"""

from __future__ import annotations

import math

import pytest
import torch

from playground.model import ModelConfig
from playground.pipeline_parallel import PipeSpec, run_pipeline
from playground.pipeline_parallel import bubble_rows, check_equal, print_interleaved_comparison
from playground.pipeline_parallel import (action_chunk, max_in_flight, measured_bubble, predicted_bubble,
                                          schedule_actions, simulate, stage_bounds)

MICRO = (1, 2, 4, 8)


def _specs(K: int) -> list[PipeSpec]:
    common = dict(stages=K, device_time_s=None, keep_state=True, count_flops=True)
    specs = [PipeSpec("naive", micro_batches=1, **common)]
    for M in MICRO:
        for schedule in ("gpipe", "1f1b"):
            for recompute in (False, True):
                specs.append(PipeSpec(schedule, micro_batches=M, recompute=recompute, **common))
            if schedule == "gpipe" or M >= K:  # torch's Schedule1F1B needs M >= K
                specs.append(PipeSpec(schedule, micro_batches=M, engine="torch", stages=K,
                                      device_time_s=None, keep_state=True))
    if K == 4:  # other depth, width, K, M and dtype; 3 stages on 4 ranks (rank 3 sits out)
        deeper = ModelConfig(n_layers=5, d_model=16, n_heads=2, seq_len=8)
        specs.append(PipeSpec("1f1b", stages=3, micro_batches=6, batch_size=6, cfg=deeper,
                              device_time_s=None, keep_state=True, dtype=torch.float64,
                              recompute=True, count_flops=True))
    return specs


@pytest.fixture(scope="module", params=[2, 4], ids=lambda K: f"K{K}")
def runs(request):
    """One launch per K runs every schedule, M, recomputation and the torch engine."""
    return request.param, run_pipeline(_specs(request.param))


def test_every_schedule_equals_single_process_and_torch_pipelining(runs):
    K, records = runs
    torch_runs = {(r["spec"].schedule, K, r["spec"].micro_batches): r
                  for r in records if r["spec"].engine == "torch"}
    lines = check_equal(records, torch_runs)
    assert len(lines) == len(records)
    compared = sum("and torch.distributed.pipelining" in line for line in lines)
    assert compared == 2 * (len(MICRO) + sum(M >= K for M in MICRO))  # gpipe x4, 1f1b M>=K; +recompute
    assert any(r["spec"].dtype == torch.float64 for r in records) == (K == 4)


def test_each_boundary_moves_the_batch_activations_once_each_way(runs):
    K, records = runs
    for rec in records:
        spec = rec["spec"]
        if spec.engine != "playground":
            continue
        cfg, K = spec.cfg, spec.stages
        q = torch.tensor([], dtype=spec.dtype).element_size()
        boundary = spec.batch_size * cfg.seq_len * cfg.d_model * q  # (B, s, h), whatever M
        for k, st in enumerate(rec["stages"]):
            expected = boundary * ((k < K - 1) + (k > 0))
            assert st["traffic"]["sent_bytes"] == expected
            assert st["traffic"]["received_bytes"] == expected
            sends = st["traffic"]["calls"].get("isend", 0)
            assert sends == spec.micro_batches * ((k < K - 1) + (k > 0))


def test_saved_activations_gpipe_1f1b_and_recomputation(runs):
    K, records = runs
    by = {(r["spec"].schedule, r["spec"].micro_batches, r["spec"].recompute): r
          for r in records if r["spec"].engine == "playground" and r["spec"].stages == K}
    for M in MICRO:
        for k in range(K):
            gpipe = by[("gpipe", M, False)]["stages"][k]
            one = by[("1f1b", M, False)]["stages"][k]
            per = gpipe["saved_bytes"]
            assert len(set(per)) == 1  # equal micro-batches save equal bytes
            assert gpipe["peak_bytes"] == M * per[0]                 # GPipe: all M in flight
            assert one["peak_bytes"] == min(K - k, M) * per[0]       # 1F1B: at most K-k
            for schedule in ("gpipe", "1f1b"):
                re = by[(schedule, M, True)]["stages"][k]
                kept = re["kept_bytes"][0]                           # the stage input only
                in_flight = max_in_flight(schedule_actions(schedule, K, M, k))
                assert kept < per[0]
                assert re["peak_bytes"] == in_flight * kept + per[0]
                # recomputation: the backward re-runs the forward, exactly once
                plain = by[(schedule, M, False)]["stages"][k]["flops"]
                assert re["flops"]["F"] == plain["F"] > 0
                assert re["flops"]["B"] == plain["B"] + plain["F"]


def _hand_offs(rec) -> list[tuple]:
    """Every message of a step as (sender rank, sender's event end, receiver rank, receiver's
    event start): F(m) of piece c hands its activation to F(m) of piece c+1, B(m) of piece c+1
    its gradient to B(m) of piece c.  Piece c = v·K + k is chunk v of rank k (V = 1: c = k)."""
    K = rec["spec"].stages
    at = {}  # (op, m, piece) -> (rank, start, end)
    for k, st in enumerate(rec["stages"]):
        for op, m, start, end, *chunk in st["events"]:
            at[op, m, (chunk[0] if chunk else 0) * K + k] = (k, start, end)
    out = []
    for (op, m, c), (k, _, end) in at.items():
        nxt = ("F", m, c + 1) if op == "F" else ("B", m, c - 1)
        if nxt in at:
            out.append((k, end, at[nxt][0], at[nxt][1]))
    return out


def _causal_up_to_one_offset_per_rank(hand_offs, ranks: int) -> bool:
    """Whether some offset d_k per rank makes every message arrive after it was sent:
    start_j + d_j >= end_i + d_i.  The ranks stamp time from the moment each leaves the start
    barrier, and they leave it a few ms apart on a loaded CPU; the offsets absorb that.  Such
    offsets exist iff no cycle of ranks needs more total skew than 0 (max-plus Floyd-Warshall)."""
    need = [[-math.inf] * ranks for _ in range(ranks)]  # least d_j - d_i the messages i -> j need
    for i, end, j, start in hand_offs:
        need[i][j] = max(need[i][j], end - start)
    for via in range(ranks):
        for i in range(ranks):
            for j in range(ranks):
                need[i][j] = max(need[i][j], need[i][via] + need[via][j])
    return all(need[k][k] < 0 for k in range(ranks))


def test_events_are_causal_across_ranks(runs):
    """F(m) on stage k starts after F(m) on stage k-1 ends, and B(m) on stage k-1 after B(m) on
    stage k ends (up to one start offset per rank); each rank runs one action at a time, in its
    schedule's order."""
    _, records = runs
    for rec in records:
        spec = rec["spec"]
        if spec.engine != "playground":
            continue
        K = spec.stages
        for k, st in enumerate(rec["stages"]):
            assert [(op, m) for op, m, _, _ in st["events"]] == \
                schedule_actions(spec.schedule, K, spec.micro_batches, k)
            times = [t for _, _, start, end in st["events"] for t in (start, end)]
            assert times == sorted(times) and times[0] >= 0  # one action at a time
        hand_offs = _hand_offs(rec)
        assert len(hand_offs) == 2 * spec.micro_batches * (K - 1)
        assert _causal_up_to_one_offset_per_rank(hand_offs, K), spec
        assert 0 <= rec["bubble"] < 1


def test_causality_check_catches_a_message_received_before_it_was_sent():
    # ranks 0 -> 1 forward, 1 -> 0 backward; rank 1's clock may run 5 ms behind rank 0's
    skewed = [(0, 0.010, 1, 0.006), (1, 0.020, 0, 0.026)]
    assert _causal_up_to_one_offset_per_rank(skewed, 2)
    # no offset can explain a forward received 5 ms early and a backward received on time
    assert not _causal_up_to_one_offset_per_rank([(0, 0.010, 1, 0.005), (1, 0.020, 0, 0.021)], 2)
    # three ranks in a ring (interleaved): 1 ms early twice, then 2.5 ms late: offsets exist;
    # 1 ms early twice, then only 1.5 ms late: each message alone is fine, the cycle is not
    ring = [(0, 0.010, 1, 0.009), (1, 0.020, 2, 0.019), (2, 0.030, 0, 0.0325)]
    assert _causal_up_to_one_offset_per_rank(ring, 3)
    assert not _causal_up_to_one_offset_per_rank(ring[:2] + [(2, 0.030, 0, 0.0315)], 3)


@pytest.mark.parametrize("K", [1, 2, 3, 4, 6, 8])
@pytest.mark.parametrize("M", [1, 2, 3, 4, 8, 16])
def test_simulated_bubble_is_the_formula_and_1f1b_bounds_in_flight(K, M):
    for schedule in ("gpipe", "1f1b"):
        timeline = simulate(schedule, K, M, t_f=1.0, t_b=2.0)
        assert measured_bubble(timeline)["bubble"] == pytest.approx(predicted_bubble(K, M))
        assert measured_bubble(timeline)["step_s"] == pytest.approx((M + K - 1) * 3.0)
    for k in range(K):
        assert max_in_flight(schedule_actions("gpipe", K, M, k)) == M
        assert max_in_flight(schedule_actions("1f1b", K, M, k)) == min(K - k, M)


def test_stage_rule_is_balanced_and_covers_the_chain():
    assert stage_bounds(4, 4) == [0, 2, 3, 4, 6]   # embedding+block | block | block | block+head
    assert stage_bounds(4, 2) == [0, 3, 6]
    assert stage_bounds(5, 2) == [0, 4, 7]         # the extra block goes to the earlier stage
    for L in range(1, 9):
        for K in range(1, L + 1):
            b = stage_bounds(L, K)
            blocks = [b[k + 1] - b[k] - (k == 0) - (k == K - 1) for k in range(K)]
            assert b[0] == 0 and b[-1] == L + 2 and max(blocks) - min(blocks) <= 1 and min(blocks) >= 1


@pytest.mark.parametrize("kwargs, message", [
    (dict(schedule="zigzag"), "unknown schedule"),
    (dict(schedule="naive", micro_batches=4), "naive schedule"),
    (dict(micro_batches=3, batch_size=8), "does not split"),
    (dict(stages=5), "at least one block"),
    (dict(stages=0), "stages must be"),
    (dict(engine="torch", recompute=True), "without recomputation"),
    (dict(engine="torch", schedule="1f1b", stages=4, micro_batches=2), "micro_batches >= stages"),
    (dict(device_time_s=(0.1,)), "device_time_s"),
    (dict(schedule="interleaved", chunks=1), "chunks >= 2"),
    (dict(schedule="interleaved", stages=1, chunks=2), "stages >= 2"),
    (dict(schedule="interleaved", stages=2, chunks=2, micro_batches=3, batch_size=6), "multiple of stages"),
    (dict(schedule="interleaved", stages=4, chunks=2, micro_batches=4), "at least one block"),
    (dict(schedule="1f1b", stages=2, chunks=2), "only the 'interleaved'"),
    (dict(schedule="interleaved", stages=2, chunks=0), "chunks must be"),
])
def test_bad_input_fails_with_one_clear_error(kwargs, message):
    with pytest.raises(ValueError, match=message):
        PipeSpec(**kwargs)


def test_too_few_ranks_fails_before_launch():
    with pytest.raises(ValueError, match="4 stages need 4 ranks"):
        run_pipeline([PipeSpec(stages=4, device_time_s=None)], world_size=2)



def test_bubble_explorer_builds_a_widget():
    widgets = pytest.importorskip("ipywidgets")
    from playground.pipeline_parallel import bubble_explorer
    assert isinstance(bubble_explorer(), widgets.VBox)


def _interleaved_specs() -> list[PipeSpec]:
    exact = dict(device_time_s=None, keep_state=True, batch_size=8)
    deep = ModelConfig(n_layers=8)
    specs = []
    for K, V, M, cfg in ((2, 2, 4, ModelConfig()), (4, 2, 8, deep), (2, 4, 2, deep)):
        specs.append(PipeSpec("interleaved", stages=K, chunks=V, micro_batches=M, cfg=cfg, **exact))
        specs.append(PipeSpec("interleaved", stages=K, chunks=V, micro_batches=M, cfg=cfg,
                              engine="torch", **exact))
    specs.append(PipeSpec("interleaved", stages=2, chunks=2, micro_batches=4, recompute=True, **exact))
    specs.append(PipeSpec("interleaved", stages=2, chunks=2, micro_batches=4, dtype=torch.bfloat16,
                          **exact))
    # 3 stages on 4 ranks, float64, 3 chunks each
    specs.append(PipeSpec("interleaved", stages=3, chunks=3, micro_batches=6, batch_size=6,
                          cfg=ModelConfig(n_layers=9, d_model=16, n_heads=2, seq_len=8),
                          dtype=torch.float64, device_time_s=None, keep_state=True))
    return specs


@pytest.fixture(scope="module")
def interleaved_runs():
    return run_pipeline(_interleaved_specs(), world_size=4)


def test_interleaved_equals_single_process_and_torch_interleaved_1f1b(interleaved_runs):
    torch_runs = {(r["spec"].schedule, r["spec"].stages, r["spec"].micro_batches): r
                  for r in interleaved_runs if r["spec"].engine == "torch"}
    lines = check_equal(interleaved_runs, torch_runs)
    assert sum("and torch.distributed.pipelining" in line for line in lines) == 4


def test_interleaved_moves_every_boundary_once_each_way_and_holds_what_its_schedule_says(
        interleaved_runs):
    for rec in interleaved_runs:
        spec = rec["spec"]
        if spec.engine != "playground":
            continue
        K, V, M, cfg = spec.stages, spec.chunks, spec.micro_batches, spec.cfg
        boundary = spec.batch_size * cfg.seq_len * cfg.d_model * torch.tensor([], dtype=spec.dtype).element_size()
        for k, st in enumerate(rec["stages"]):
            pieces = [v * K + k for v in range(V)]
            crossings = sum((c < K * V - 1) + (c > 0) for c in pieces)
            assert st["traffic"]["sent_bytes"] == st["traffic"]["received_bytes"] == boundary * crossings
            # one message per micro-batch and direction: (KV-1)/(K-1) times 1F1B's, not V times
            assert st["traffic"]["calls"].get("isend", 0) == M * crossings
            actions = schedule_actions("interleaved", K, M, k, V)
            assert [(op, m, v) for op, m, _, _, v in st["events"]] == actions
            if k == 0:  # activations and gradients cross the K·V - 1 boundaries, after being sent
                assert len(_hand_offs(rec)) == 2 * M * (K * V - 1)
                assert _causal_up_to_one_offset_per_rank(_hand_offs(rec), K), spec
            if spec.recompute:
                continue
            # every (micro-batch, chunk) saves its chunk's bytes until its backward
            per_chunk = {}
            for (op, m, v), nbytes in zip([a for a in actions if a[0] == "F"], st["saved_bytes"]):
                assert per_chunk.setdefault(v, nbytes) == nbytes
            live = peak = 0
            for op, m, v in actions:
                live += per_chunk[v] if op == "F" else -per_chunk[v]
                peak = max(peak, live)
            assert st["peak_bytes"] == peak


@pytest.mark.parametrize("K", [2, 3, 4, 8])
@pytest.mark.parametrize("V", [2, 3, 4])
@pytest.mark.parametrize("rounds", [1, 2, 4])
def test_interleaved_bubble_shrinks_by_v_and_messages_arrive_in_order(K, V, rounds):
    M = rounds * K
    timeline = simulate("interleaved", K, M, t_f=1.0, t_b=2.0, chunks=V)
    assert measured_bubble(timeline)["bubble"] == pytest.approx(predicted_bubble(K, M, V))
    assert measured_bubble(timeline)["step_s"] == pytest.approx((V * M + K - 1) * 3.0 / V)
    sent, received = {}, {}
    for k in range(K):
        actions = schedule_actions("interleaved", K, M, k, V)
        warmup = M * V if M == K else 2 * (K - 1 - k) + (V - 1) * K
        assert max_in_flight(actions) == min(M * V, warmup + 1)
        assert sorted(actions) == sorted((op, m, v) for op in "BF" for m in range(M) for v in range(V))
        for op, m, v in actions:
            c = v * K + k
            if op == "F" and c > 0:
                received.setdefault(((c - 1) % K, k), []).append(("F", m, c - 1))
            if op == "F" and c < K * V - 1:
                sent.setdefault((k, (c + 1) % K), []).append(("F", m, c))
            if op == "B" and c < K * V - 1:
                received.setdefault(((c + 1) % K, k), []).append(("B", m, c + 1))
            if op == "B" and c > 0:
                sent.setdefault((k, (c - 1) % K), []).append(("B", m, c))
    # each ordered pair of ranks receives in the order it sends: plain FIFO matching (NCCL has no
    # tags) hands every message to the right action
    assert sent == received
    assert action_chunk(("F", 0)) == 0 and action_chunk(("F", 0, 2)) == 2


def test_bubble_rows_predict_the_step_and_recover_a_fixed_cost_per_action():
    """(V·M+K-1) slots of (t_f+t_b)/V + 2c each give back c; without emulation, no formula."""
    c, work = 0.001, 0.3                       # seconds: hand-off cost, T_F + T_B
    for schedule, V, M in (("1f1b", 1, 8), ("interleaved", 2, 8)):
        spec = PipeSpec(schedule, stages=4, micro_batches=M, chunks=V, device_time_s=(0.1, 0.2),
                        cfg=ModelConfig(n_layers=8))
        slots = V * M + 4 - 1
        step = slots * (work / (V * M) + 2 * c)
        rec = {"spec": spec, "bubble": 0.3, "step_s": step,
               "stages": [{"emulated": True, "overruns": 0}] * 4}
        row, = bubble_rows([rec])
        assert row["step_formula_s"] == pytest.approx(slots / (V * M) * work, abs=1e-4)
        assert row["handoff_s"] == pytest.approx(c, abs=1e-5)
    rec["stages"] = [{"emulated": False, "overruns": 0}] * 4   # measured device time: no formula
    row, = bubble_rows([rec])
    assert row["step_formula_s"] is None and row["handoff_s"] is None


def test_interleaved_comparison_sets_each_rank_s_crossings_beside_1f1b_s(capsys):
    """Rank k's V pieces cross (c < KV-1) + (c > 0) boundary directions each; 1F1B's stage k
    crosses its own one (end stages) or two (inner stages)."""
    K, V, M = 4, 2, 8
    spec = PipeSpec("interleaved", stages=K, chunks=V, micro_batches=M, cfg=ModelConfig(n_layers=8))

    def stages(crossings):
        return [{"traffic": {"sent_bytes": 2048 * n, "calls": {"isend": M * n}}, "peak_bytes": 1024}
                for n in crossings]

    print_interleaved_comparison({"stages": stages([1, 2, 2, 1])},
                                 {"spec": spec, "stages": stages([3, 4, 4, 3])})
    lines = capsys.readouterr().out.splitlines()
    for k, (mine, plain) in enumerate(((3, 1), (4, 2), (4, 2), (3, 1))):
        assert f"cross {mine} boundary directions (1F1B's stage: {plain})" in lines[3 * k]
    assert lines[-1].endswith("(pv-1)/(p-1) = 7/3 = 2.333")
    assert max(len(line) for line in lines) <= 88, "the book cuts longer output lines"
