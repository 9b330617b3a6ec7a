"""Published runs of today's stacks (torchtitan, fms-fsdp, Megatron-Bridge, the Megatron MoE Model Zoo,
DeepSpeed ZeRO-3, OPT-175B's FSDP + TP) against the step-time model.

These rows are data collected for issue 17, not a fitted validation: what must hold is asserted (the
rows build, the model predicts each, the ratio is finite, the layout fits or says why not); the ratios
themselves are printed (``pytest -s``), not asserted.  The issue's target band is
0.8 <= predicted / published <= 1.2 for every row, with no constant fitted per row.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import fields, replace

import pytest

from playground.planner.layout import Layout
from playground.planner.layout_checks import check_layout
from playground.planner.memory import memory_per_gpu
from playground.planner.published_stacks import (FMS_FSDP, MEGATRON_BRIDGE, MOE_MODEL_ZOO, NOT_REPRESENTABLE,
                                                 OPT_175B, STACK_RUNS, TORCHTITAN, ZERO3_TABLE2,
                                                 PublishedStackRun, published_metric)
from playground.planner.step_range import SETTINGS
from playground.planner.flops import megatron_core_flops_per_token
from playground.planner.step_time import predict

TARGET_BAND = (0.8, 1.2)  # issue 17's target (±20%); reported, not asserted, while the model has the gaps noted
LAYOUT_FIELDS = {f.name for f in fields(Layout)}


@pytest.fixture(scope="module")
def compared():
    out = []
    for row in STACK_RUNS:
        prediction = predict(row.model, row.cluster, row.layout)
        out.append((row, prediction, *published_metric(row, prediction)))
    return out


def test_the_collection_spans_three_more_stacks_with_h100s_and_fsdp():
    stacks = {r.stack for r in STACK_RUNS}
    assert {"torchtitan", "fms-fsdp", "Megatron-Bridge", "Megatron MoE Model Zoo"} <= stacks
    assert any(r.gpu == "H100" and r.layout.zero_stage == 3 for r in STACK_RUNS)
    assert any(r.layout.shard_group for r in FMS_FSDP)                 # HSDP
    assert any(r.layout.cp > 1 for r in TORCHTITAN) and any(r.layout.ep > 1 for r in MOE_MODEL_ZOO)
    assert len(ZERO3_TABLE2) == 6 and OPT_175B.layout.tp == 8 and OPT_175B.layout.gpus == 992
    assert len({r.name for r in STACK_RUNS}) == len(STACK_RUNS)
    assert all(isinstance(line, str) and line for line in NOT_REPRESENTABLE)


def test_fms_fsdps_rows_ride_the_network_its_readme_names():
    """400 Gb/s an A100 node and 800 an H100 node, an eighth to each GPU; HSDP's all-reduce across nodes
    then takes longer than on a DGX's eight NICs, and FSDP's gathers over whole nodes no less."""
    per_gpu = {r.gpu: r.cluster.network_bytes_per_s for r in FMS_FSDP}
    assert per_gpu == {"A100-80GB": 6.25e9, "H100": 12.5e9}
    hsdp = FMS_FSDP[0]
    dgx = predict(hsdp.model, replace(hsdp, network_bytes_per_s=None).cluster, hsdp.layout)
    own = predict(hsdp.model, hsdp.cluster, hsdp.layout)
    assert own["time_breakdown"]["dp_comm_exposed"] > 2 * dgx["time_breakdown"]["dp_comm_exposed"]
    assert own["links"]["replica"] == "network" and own["ring_bytes_per_s"]["replica"] == 6.25e9


def test_fms_fsdps_rows_run_the_flashattention_2_its_readme_names():
    """The README's first line: "SDPA implementation of Flash attention v2" (FlashAttention-3 came five
    months after its first table).  On an A100 the kernels cost alike; on an H100 FlashAttention-2 runs at
    its Hopper rate, so charged FlashAttention-3 the H100 rows would be predicted faster."""
    assert {r.layout.attention_kernel for r in FMS_FSDP} == {"fa2"}
    for row in FMS_FSDP[:1] + tuple(r for r in FMS_FSDP if r.gpu == "H100")[:1]:
        as_fa3 = predict(row.model, row.cluster, replace(row.layout, attention_kernel="fa3"))["step_time_s"]
        as_read = predict(row.model, row.cluster, row.layout)["step_time_s"]
        assert as_read > as_fa3 if row.gpu == "H100" else as_read == as_fa3


def test_fms_fsdps_selective_ac_share_is_read_from_its_counters_as_its_stated_rows_read():
    """HFU / MFU = 1 + p / 3.  On the rows whose checkpointing the README states the reading holds: the
    no-AC 7B (0.57, 0.57) reads p = 0, the full-AC 34B and 70B (0.47, 0.64; 0.50, 0.67) about 1.  The
    "Selective AC" rows take their p that way, and leave it unstated for the range."""
    from playground.planner.published_fms import share_from_counters
    assert share_from_counters(0.57, 0.57) == 0
    assert share_from_counters(0.47, 0.64) == share_from_counters(0.50, 0.67) == 1    # 1.09 and 1.02, at most 1
    assert share_from_counters(0.51, 0.59) == pytest.approx(0.47, abs=0.005)            # the 13B's "Selective AC"
    selective = [r for r in FMS_FSDP if "of blocks recomputed" in r.name]
    assert len(selective) == 8 and all("recompute_share" in r.unstated for r in selective)
    assert {round(r.layout.recompute_share, 2) for r in selective if r.model.layers == 40} == {0.47, 0.43, 0.39, 0.21}


@pytest.mark.parametrize("row", STACK_RUNS, ids=lambda r: r.name)
def test_each_row_states_its_source_and_what_it_leaves_unstated(row: PublishedStackRun):
    assert "github.com" in row.source or "arXiv" in row.source
    assert row.cite, "every row names its BibTeX key"
    named = LAYOUT_FIELDS | set(SETTINGS)   # a Layout field, or a setting that varies one (distributed_optimizer)
    assert set(row.unstated) <= named, f"not Layout fields: {set(row.unstated) - named}"
    published = [v for v in (row.tokens_per_s_per_gpu, row.step_time_s, row.tflops_per_gpu) if v is not None]
    assert published and all(v > 0 for v in published)
    if row.tflops_per_gpu is not None:
        assert row.flop_count in ("model", "hardware", "unstated")
    check_layout(row.model, row.layout)


def test_every_row_is_predicted_with_a_finite_ratio(compared):
    for row, prediction, metric, predicted, published, ratio in compared:
        assert math.isfinite(predicted) and predicted > 0, row.name
        assert math.isfinite(ratio) and ratio > 0, row.name


def test_layouts_fit_the_memory_model_or_say_why_not(compared):
    for row, prediction, *_ in compared:
        assert prediction["memory"]["fits"] or row.memory_misfit, \
            f"{row.name}: the memory model says it does not fit and the row does not say why"
        assert not (prediction["memory"]["fits"] and row.memory_misfit), f"{row.name}: its misfit note is stale"


def test_runs_that_ran_count_into_the_allowance_and_are_judged_to_fit_tightly(compared):
    """Ten published runs of the stacks (Nemotron-4 340B on 128 H100s thrice, gpt-oss 120B on 64 B200s at EP 8
    with nothing recomputed, as Megatron-Bridge 25.11's recipe ran it, three of llm-foundry's MPT runs, each at
    the largest micro-batch its table found to fit, its checkpointed layers' inputs kept on autocast's fp32
    stream, fms-fsdp's compiled 70B on H100s, 71% of its blocks recomputed as its counters read, and Llama 3.1
    405B on 256 GB200s at PP 16, VP 4 and VP 8, with nothing recomputed, as Megatron-Bridge 26.06's recipes run
    it) and Llama 3 405B on 8,192 H100s count past the usable memory but inside the GPU's: each ran, so the
    planner says they fit, only tightly.  The MoE runs that once joined them (gpt-oss on AutoModel, Qwen3-30B-A3B
    on B200s, DeepSeek-V3 on 1,024 H100s) left once a MoE layer kept what Megatron-Core v0.13 keeps; Llama 3.1
    405B on GB300s at TP 2 CP 2 left, and the GB200 VP 4 run came in from past the GPU's memory, once each linear
    layer kept the FP8 copy of its input Transformer Engine keeps; the GB200 VP 8 run and Llama 3's came in once
    each interleaved stage held what its schedule keeps in flight (stage 1 of 16 two chunks fewer than stage 0,
    not a whole stage's share fewer), and the GB200 VP 4 run stays inside the GPU only because its recipe keeps
    the weights in FP8 (``fp8_params``: 1 byte each on a Blackwell, not bf16's 2).  The Megatron-Core MoE report's
    DeepSeek-V3 in BF16 on GB200s joined them with the BF16 Adam moments the report states (past the GPU with fp32's)."""
    from playground.planner.replay import tight_runs
    tight = sorted(row.name for row, prediction, *_ in compared if prediction["memory"]["tight"])
    assert sorted(tight_runs()) == sorted(tight + ["Llama 3 405B, 8,192 GPUs"])  # what chapter 5 prints
    assert len(tight) == 11 and sum("340B" in n for n in tight) == 3 and sum(n.startswith("MPT-") for n in tight) == 3
    assert [n for n in tight if " B200" in n] == ["GPT OSS 120B, 64 B200, EP 8, BF16"]
    assert [n for n in tight if "GB200" in n or "GB300" in n] == [
        "DeepSeek-V3, 256 GB200, TP 1 PP 8 EP 32 VPP 4, BF16",
        "LLAMA3.1_405B, 256 GB200, TP 4 PP 16 VP 4, FP8-CS, 26.06", "LLAMA3.1_405B, 256 GB200, TP 4 PP 16 VP 8, FP8-MX, 26.06"]
    gb200 = next(row for row, *_ in compared if row.name.startswith("LLAMA3.1_405B, 256 GB200, TP 4 PP 16 VP 4"))
    assert not memory_per_gpu(gb200.model, replace(gb200.layout, fp8_params=False), gb200.cluster.gpu)["fits"]


def test_each_fp8_row_is_priced_at_the_scaling_its_stack_ran():
    """Tensor (current) scaling for Megatron-Bridge's FP8-CS and torchtitan's float8; block for the MXFP8 runs,
    DeepSeek-V3's 1 x 128 tiles and the Megatron-Core MoE report's blockwise FP8 on H100s; delayed for NeMo's runs of 2024 (Transformer Engine 1.x had no other recipe) and
    DGX Cloud's configs (fp8_amax_history_len 1024)."""
    def expected(row):
        if "FP8-MX" in row.name or "MXFP8" in row.name or "FP8-BLK" in row.name or row.stack.startswith("DeepSeek-V3"):
            return "block"
        if row.stack.startswith(("NeMo 24", "DGX Cloud")):
            return "delayed"
        return "tensor"
    fp8 = [row for row in STACK_RUNS if row.layout.dtype == "fp8"]
    assert len(fp8) > 80 and {row.layout.fp8_scaling for row in fp8} == {"tensor", "delayed", "block"}
    assert [row.name for row in fp8 if row.layout.fp8_scaling != expected(row)] == []
    assert all(row.layout.fp8_scaling == "tensor" for row in STACK_RUNS if row.layout.dtype == "bf16")


def test_ratio_reads_as_throughput_whatever_the_metric():
    row = MOE_MODEL_ZOO[0]
    faster = {"step_time_s": row.step_time_s / 2, "tokens_per_s": 1.0}
    assert published_metric(row, faster)[3] == pytest.approx(2.0)       # half the time: twice the throughput
    tps_row = FMS_FSDP[0]
    doubled = {"step_time_s": 1.0, "tokens_per_s": 2 * tps_row.tokens_per_s_per_gpu * tps_row.layout.gpus}
    assert published_metric(tps_row, doubled)[3] == pytest.approx(2.0)
    assert MEGATRON_BRIDGE[0].flop_count == "model"


def test_report_the_ratios_per_stack(compared, capsys):
    by_stack = defaultdict(list)
    lines = [f"{'stack / row':58} {'metric':12} {'pred':>9} {'publ':>9} {'ratio':>5} fits"]
    for row, prediction, metric, predicted, published, ratio in compared:
        by_stack[row.stack].append(ratio)
        lines.append(f"{row.name[:58]:58} {metric[:12]:12} {predicted:9.4g} {published:9.4g} {ratio:5.2f} "
                     f"{'yes' if prediction['memory']['fits'] else 'NO'}")
    lo, hi = TARGET_BAND
    for stack, ratios in by_stack.items():
        inside = sum(lo <= r <= hi for r in ratios)
        lines.append(f"{stack:30} rows {len(ratios):2}  ratio {min(ratios):.2f}-{max(ratios):.2f}  "
                     f"in the ±20% band: {inside}")
    with capsys.disabled():
        print("\n" + "\n".join(lines))


def test_llm_foundry_shapes_reproduce_the_parameter_counts_its_tables_print():
    from playground.planner.published_foundry import LLM_FOUNDRY, MPT_SHAPES, mpt
    for size, (*_, published) in MPT_SHAPES.items():
        assert mpt(size, 2048).param_count == published, size
    assert {r.gpu for r in LLM_FOUNDRY} == {"H100", "A100-80GB"}
    assert all(r.layout.zero_stage == 3 and r.layout.attention_kernel == "fa1" for r in LLM_FOUNDRY)
    for r in LLM_FOUNDRY:   # the tables' global batch is micro-batch x GPUs x accumulation
        assert r.layout.global_batch % (r.layout.micro_batch * r.layout.gpus) == 0, r.name


def test_megatron_cores_flop_count_turns_nemos_tflops_back_into_the_tokens_it_measured():
    """NeMo 24.07's table prints both numbers: LLAMA2-7B 776 TFLOP/s at 16,847 tokens/s, LLAMA3-8B
    697 at 12,036.  The count that links them is the one the long-sequence table's TFLOP/s are in."""
    from playground.planner.flops import megatron_core_flops_per_token
    from playground.planner.presets import preset
    from playground.planner.published_row import llama2
    assert 776e12 / megatron_core_flops_per_token(llama2("7b")) == pytest.approx(16847, rel=1e-3)
    assert 697e12 / megatron_core_flops_per_token(preset("llama3-8b")) == pytest.approx(12036, rel=1e-3)


def test_nemos_long_sequence_rows_use_a_gpu_per_1k_tokens_and_each_fits():
    from playground.planner.published_nemo import NEMO_2403_LONG
    assert len(NEMO_2403_LONG) == 9
    for row in NEMO_2403_LONG:
        assert row.layout.gpus * 1024 == row.model.seq_len, row.name
        assert row.layout.cp_method == "ring" and "recompute" in row.unstated
        assert predict(row.model, row.cluster, row.layout)["memory"]["fits"], row.name
    assert NEMO_2403_LONG[-1].model.seq_len == 1024 * 1024


def test_dgx_cloud_recipes_keep_the_accumulation_each_states_and_fit():
    """The recipes fix the accumulation (GA) at their micro-batch: the global batch over DP and it."""
    from playground.planner.published_nemo import NEMO_2409_DGXC
    accumulation = {"8B": 32, "70B": 64, "405B": 63, "15B": 4, "340B": 16, "175B": 64, "314B": 128}
    for row in NEMO_2409_DGXC:
        size = row.name.split(",")[0].split()[-1]
        assert row.layout.micro_batches == accumulation[size], row.name
        fits = predict(row.model, row.cluster, row.layout)["memory"]["fits"]
        assert row.step_time_s > 0 and (fits or row.memory_misfit), row.name
        assert row.unstated == (), "the recipe's config states every setting"
    assert {r.layout.dtype for r in NEMO_2409_DGXC} == {"bf16", "fp8"}


def test_the_rows_build_from_the_package_alone_and_their_inline_configs_match_the_chapters_copies():
    """The package reads no file of the book to build its rows (an installed wheel has no chapters/):
    AutoModel's gpt-oss and Kimi K2 shapes and BLOOM's are written inline, and they are what --hf-config
    reads from the copies of those config.json files in chapters/configs/families."""
    from pathlib import Path
    from playground.planner.hf_config import read_hf_config
    from playground.planner.published_automodel import AUTOMODEL
    families = Path(__file__).resolve().parents[2] / "chapters" / "configs" / "families"
    inline = {r.model.name: r.model for r in AUTOMODEL}
    for name in ("gpt-oss-20b", "gpt-oss-120b", "kimi-k2"):
        assert inline[name] == read_hf_config(families / name, seq_len=4096), name
    from playground.planner.published_layouts import BLOOM
    assert BLOOM.model == read_hf_config(families / "bloom", seq_len=2048)


def test_the_hopper_misses_follow_the_tensor_cores_share_of_the_step_and_the_ampere_ones_do_not():
    """Chapter 6's reading of the misses: on Hopper the ratio grows with the share of the step the
    layers' GEMMs and attention take (a rate: about 1.2x at the GEMMs' clock alone, 1.1x once the clock
    beside collectives is counted), not with element-wise work or exposed communication; on Ampere not
    with the tensor cores (what little relation there is, with exposed communication)."""
    from playground.planner.replay import miss_shares
    hopper, ampere = miss_shares("hopper"), miss_shares("ampere")
    correlation = hopper["correlation"]
    assert correlation["tensor_core"] > 0.4 > max(abs(correlation[k]) for k in ("elementwise", "logits"))
    assert hopper["correlation"]["exposed"] < 0 and 1.05 < hopper["tensor_core_factor"] < 1.15
    assert ampere["correlation"]["tensor_core"] < 0 < ampere["correlation"]["exposed"]
    assert len(hopper["rows"]) == 108 and len(ampere["rows"]) == 49


def test_megatron_lms_weak_scaling_rows_reproduce_the_sizes_and_mfu_its_table_prints():
    """The table names each GPT by its size and prints its MFU: the shapes (4h GELU MLP, untied
    131,072-token embeddings) give those sizes, and the TFLOP/s over the H100's bf16 peak give those
    MFUs.  What its text states is kept: TE's TP overlap, the distributed optimizer, fp32 gradients."""
    from playground.planner.published_megatron import MEGATRON_WEAK_SCALING
    mfu = (41, 47, 49, 46, 42, 43, 44, 48, 47)
    assert len(MEGATRON_WEAK_SCALING) == len(mfu) == 9
    for row, percent in zip(MEGATRON_WEAK_SCALING, mfu):
        size = float(row.name.split()[1].rstrip("B,")) * 1e9
        assert row.model.param_count == pytest.approx(size, rel=0.035), row.name   # 1.75B printed 1.7B
        tflops = row.tokens_per_s_per_gpu * megatron_core_flops_per_token(row.model) / 1e12
        # the table rounds against a 989 TFLOP/s peak (119B: 420.5 of 989 = 42.5%, printed 43%)
        assert abs(100 * tflops / (row.cluster.gpu.peak_bf16_flops / 1e12) - percent) <= 0.55, row.name
        lay = row.layout
        assert lay.zero_stage == 1 and lay.grad_reduce == "fp32" and lay.tp_overlap == ("all" if lay.tp > 1 else "none")
        assert set(row.unstated) == {"micro_batch", "recompute", "vpp"}
        assert predict(row.model, row.cluster, row.layout)["memory"]["fits"], row.name


def test_the_rows_read_this_session_are_read_as_their_tables_print_them():
    """The tables read this session: Megatron-Bridge 26.04.01's nine (held out) and 25.09's eleven (seen
    in part before, so not held out) DGX-H100 and DGX-B200 runs, whose names carry the GPUs and the
    TP / PP / CP / VP / EP their tables print, and AutoModel's Llama 3.1 70B (held out), whose step time
    and tokens/s a GPU agree on its batch (128 x 8,192 tokens)."""
    import re
    from playground.planner.published_automodel import AUTOMODEL_2604
    from playground.planner.published_bridge_2509 import MEGATRON_BRIDGE_2509
    from playground.planner.published_bridge_2604 import MEGATRON_BRIDGE_2604
    assert len(MEGATRON_BRIDGE_2604) == 9 and len(MEGATRON_BRIDGE_2509) == 11 and len(AUTOMODEL_2604) == 1
    for row in MEGATRON_BRIDGE_2604 + MEGATRON_BRIDGE_2509:
        lay = row.layout
        assert f"{lay.gpus} {row.gpu}" in row.name, row.name
        for label, value in (("TP", lay.tp), ("PP", lay.pp), ("CP", lay.cp), ("VP", lay.vpp), ("EP", lay.ep)):
            printed = re.search(rf"\b{label} (\d+)", row.name)
            assert int(printed.group(1)) == value if printed else value == 1, (row.name, label)
        assert lay.global_batch % (lay.dp * lay.micro_batch) == 0
    [llama] = AUTOMODEL_2604
    assert llama.layout.gpus == 64 and llama.layout.cp == 2 and llama.layout.zero_stage == 3
    tokens = llama.layout.global_batch * llama.model.seq_len
    from_step_time = tokens / (llama.step_time_s * llama.layout.gpus)
    assert from_step_time == pytest.approx(llama.tokens_per_s_per_gpu, rel=3e-4)   # the step printed to 10 ms


def test_bridge_rows_run_as_the_recipes_that_hold_their_layouts_and_say_so():
    """Where Megatron-Bridge's performance recipe of a release holds a row's layout, the row takes what the
    recipe sets that the table leaves out and the model prices, names the recipe in its note, and keeps
    those settings in its range (the table still does not state them)."""
    from playground.planner.published_bridge import MEGATRON_BRIDGE, MEGATRON_BRIDGE_B200
    from playground.planner.published_bridge_2509 import MEGATRON_BRIDGE_2509
    from playground.planner.published_bridge_2604 import MEGATRON_BRIDGE_2604
    rows = {row.name: row for row in MEGATRON_BRIDGE + MEGATRON_BRIDGE_B200 + MEGATRON_BRIDGE_2509 + MEGATRON_BRIDGE_2604}
    read = [row for row in rows.values() if "performance recipe" in row.note]
    assert len(read) == 25 and all(set(row.unstated) >= {"recompute", "tp_overlap"} for row in read)
    assert all("v0.4.2" in row.note for row in MEGATRON_BRIDGE_2604)   # every 26.04.01 row's layout is its recipe's
    dsv3 = rows["DeepSeekV3, 256 B200, PP 8 VP 2 EP 32, FP8-MX, 26.04.01"].layout
    assert (dsv3.ep_dispatch, dsv3.ep_overlap, dsv3.recompute, dsv3.recompute_modules) == \
        ("deepep", True, "selective", ("mla_up_proj", "mlp"))
    llama = [row for name, row in rows.items() if name.startswith(("LLAMA3_70B", "LLAMA3.1_405B"))]
    assert len(llama) == 8 and all(row.layout.tp_overlap == "all" for row in llama)
    # a recipe that does not hold the table's layout is not taken: 25.11's gpt-oss recipe is EP 64
    assert rows["GPT OSS 120B, 64 B200, EP 8, BF16"].layout.recompute == "none"
    # every family's recipe, in every release read, reduces gradients in bf16; the range still spans fp32
    assert all(row.layout.grad_reduce == "bf16" and "grad_reduce_in_fp32: false" in row.note
               and "grad_reduce" in row.unstated for row in read)
    assert rows["GPT OSS 120B, 64 B200, EP 8, BF16"].layout.grad_reduce == "fp32"


def test_the_held_out_check_counts_what_the_issue_holds_it_to():
    """The held-out runs are held within +-25% and to fitting as read; the benchmark reports what the
    check counts from the same replay as the visible rows, and each held-out run is one of those rows.
    What chapter 6 says of the replay holds: every dense held-out run within +-20%, the misses MoE, and every
    MoE run of 26.06 replayed from a whole-iteration CUDA graph (on GB200s, GB300s and B300s) within +-20% too;
    Megatron-LM's graphed recipes not (EP 64 over 128 rack GPUs predicted too slow, Qwen3-30B-A3B too fast)."""
    from playground.bench.throughput import per_stack
    from playground.planner.published_stacks import HELD_OUT, HELD_OUT_BAND, STACK_RUNS
    from playground.planner.replay import held_out_table
    held = held_out_table()
    summary, rows = held["summary"], held["rows"]
    runs = [run for group in HELD_OUT.values() for run in group]
    assert HELD_OUT_BAND == 0.25 and summary["rows"] == len(runs) == 51 and set(runs) <= set(STACK_RUNS)
    assert per_stack()["held_out"] == summary and all("(held out)" in run.stack for run in runs)
    dense = [r for r in rows if not r["moe"]]
    assert len(dense) == 8 and all(abs(r["ratio"] - 1) <= 0.20 for r in dense)
    assert all(r["moe"] for r in rows if abs(r["ratio"] - 1) > HELD_OUT_BAND)
    graphed = {run.name for run in HELD_OUT["Megatron-Bridge 26.06"] if run.model.is_moe and run.layout.moe_launch == "graphed"}
    assert len(graphed) == 10 and all(abs(r["ratio"] - 1) <= 0.20 for r in rows if r["name"] in graphed)
    recipes = {r["name"]: r["ratio"] for r in rows if r["source"] == "Megatron-LM MoE recipes" and "full CG" in r["name"]}
    assert len(recipes) == 3 and all(abs(ratio - 1) > 0.20 for ratio in recipes.values())


def test_every_held_out_run_is_judged_to_fit_as_read_and_with_what_its_table_omits():
    """Every held-out run fits as read, and once the settings its table leaves unstated may take any value.  The
    Megatron-Core MoE report's Qwen3-235B at micro-batch 3 on GB200s fits only with the activation offloading its Table 5
    ran it with (counted at 211 GB with every activation on the GPU, past the GB200's 186 GB; with each dispatched copy
    in host memory, inside it), and the copies cost it nothing.  DeepSeek-V3 in BF16 on GB200s, counted past the GPU with
    fp32 Adam moments, fits (tightly) with the BF16 moments the report states.  Llama
    3.1 405B on 256 GB200s at PP 16, no recompute in its recipe, was counted past a GB200's 186 GB while each linear
    layer kept its input in bf16; with the FP8 copy Transformer Engine keeps, both runs fit (VP 4 tightly), and in
    bf16 they would not.  DeepSeek-V3 on B200s, which found no room while the memory model
    kept each expert's output (as a combine that weights the outputs does) and each linear layer's input in bf16,
    fits with its recipe's recompute once a MoE layer keeps what Megatron-Core v0.13 and later keep, and with either
    of the two corrections alone."""
    from playground.planner.published_stacks import HELD_OUT
    from playground.planner.replay import held_out_table
    held = held_out_table()
    runs = {run.name: run for runs in HELD_OUT.values() for run in runs}
    assert all(r["fits"] and not runs[r["name"]].memory_misfit for r in held["rows"])
    assert held["summary"]["fit_as_unstated"] == held["summary"]["judged_to_fit"] == len(held["rows"]) == 51
    qwen3 = runs["Qwen3-235B, 256 GB200, TP 1 PP 4 EP 64 VPP 6, MXFP8"]
    assert qwen3.layout.offload_modules == ("expert_fc1",) and "offload_modules" in qwen3.unstated
    kept = replace(qwen3.layout, offload_modules=())
    assert not memory_per_gpu(qwen3.model, kept, qwen3.gpu)["fits"]
    offloaded, on_gpu = (predict(qwen3.model, qwen3.cluster, lay) for lay in (qwen3.layout, kept))
    assert offloaded["time_breakdown"]["activation_offload"] == 0 and offloaded["step_time_s"] == on_gpu["step_time_s"]
    dsv3_bf16 = runs["DeepSeek-V3, 256 GB200, TP 1 PP 8 EP 32 VPP 4, BF16"]
    assert dsv3_bf16.layout.optimizer_moments == "bf16"
    assert memory_per_gpu(dsv3_bf16.model, dsv3_bf16.layout, dsv3_bf16.gpu)["tight"]
    assert not memory_per_gpu(dsv3_bf16.model, replace(dsv3_bf16.layout, optimizer_moments="fp32"), dsv3_bf16.gpu)["fits"]
    gb200 = [run for runs in HELD_OUT.values() for run in runs if run.name.startswith("LLAMA3.1_405B, 256 GB200")]
    assert len(gb200) == 2
    for run in gb200:
        assert memory_per_gpu(run.model, run.layout, run.gpu)["fits"]
        assert not memory_per_gpu(run.model, replace(run.layout, fp8_saved_inputs=False), run.gpu)["fits"]
    dsv3 = next(run for runs in HELD_OUT.values() for run in runs if run.name.startswith("DeepSeekV3"))
    assert dsv3.layout.moe_probs == "activation" and dsv3.layout.selective_modules == ("mla_up_proj", "mlp")
    for probs, fp8_inputs, fits in (("combine", False, False), ("combine", True, True), ("activation", False, True)):
        kept = replace(dsv3.layout, moe_probs=probs, fp8_saved_inputs=fp8_inputs)
        assert memory_per_gpu(dsv3.model, kept, dsv3.gpu)["fits"] == fits


def test_every_held_out_run_keeps_its_first_replay_beside_todays():
    """The held-out check is read against the model as it stood before anything was changed for those
    runs: each run's first ratio is recorded, and the table reports both."""
    from playground.planner.published_stacks import HELD_OUT, HELD_OUT_FIRST_REPLAY
    from playground.planner.replay import held_out_table
    assert set(HELD_OUT_FIRST_REPLAY) == {run.name for runs in HELD_OUT.values() for run in runs}
    held = held_out_table()
    assert all(r["first_replay"] == HELD_OUT_FIRST_REPLAY[r["name"]] for r in held["rows"])
    # 26.04.01 and AutoModel's, 26.06's, the MoE report's, Megatron-LM's MoE recipes'
    assert held["summary"]["first_within_band"] == 5 + 13 + 9 + 5


def test_the_moe_reports_runs_take_appendix_b_as_read():
    """The Megatron-Core MoE report's nine runs take Table 20's layouts and B.2's settings: HybridEP on the racks and
    DeepEP on H100s, the all-to-all overlap where B.2 turns it on, its recompute, the experts launched by the host
    (graphs cover the attention, router and preprocessing only), experts not split by TP, and DeepSeek-V3 on H100s
    at PP 8 as two of the report's three readings give it.  All nine replayed within +-25% before any change."""
    from playground.planner.published_moe_report import MCORE_MOE_REPORT
    from playground.planner.published_stacks import HELD_OUT_FIRST_REPLAY
    rows = {run.name: run for run in MCORE_MOE_REPORT}
    assert len(rows) == 9
    for run in MCORE_MOE_REPORT:
        layout = run.layout
        assert layout.ep_dispatch == ("deepep" if run.gpu == "H100" else "hybridep")
        assert layout.moe_launch == "multi_stream" and layout.expert_tp_degree == 1 and layout.moe_imbalance == 1
        assert run.tokens_per_s_per_gpu and "moe_launch" in run.unstated
        assert abs(HELD_OUT_FIRST_REPLAY[run.name] - 1) <= 0.25
    overlapped = {name for name, run in rows.items() if run.layout.ep_overlap}
    assert overlapped == {"DeepSeek-V3, 256 GB300, TP 1 PP 4 EP 64 VPP 4, MXFP8",
                          "DeepSeek-V3, 1024 H100, TP 2 PP 8 EP 64 VPP 4, FP8-BLK",
                          "Qwen3-235B, 256 GB200, TP 1 PP 4 EP 64 VPP 6, MXFP8",
                          "Qwen3-235B, 256 GB200, TP 1 PP 4 EP 32 VPP 12, BF16",
                          "Qwen3-235B, 256 H100, TP 2 PP 8 EP 32 VPP 4, BF16"}
    h100 = rows["DeepSeek-V3, 1024 H100, TP 2 PP 8 EP 64 VPP 4, FP8-BLK"]
    assert (h100.layout.tp, h100.layout.pp, h100.layout.dp) == (2, 8, 64) and h100.layout.fp8_scaling == "block"
    assert "recompute" in h100.unstated   # Table 17 and B.2 disagree
    assert rows["Qwen3-235B, 256 H100, TP 2 PP 8 EP 32 VPP 4, BF16"].layout.selective_modules == ("moe_act", "layernorm")
    assert rows["Qwen3-235B, 128 GB300, TP 4 PP 4 CP 4 EP 32 VPP 12, MXFP8, 128K"].model.seq_len == 131072


def test_the_26_06_runs_take_their_recipes_and_their_racks_as_the_launcher_places_them():
    """Each 26.06 row takes what its v0.5.0 recipe sets, read after the first replay: the MXFP8 MoE runs on GB200s and
    GB300s (and Qwen3-30B-A3B on B300s) HybridEP overlapped and the whole iteration CUDA-graphed, the other B300 runs
    HybridEP with the experts launched from the host, the dense runs TP communication overlapped.  An NVL72 job
    shares NVLink in the blocks Megatron-Bridge's launcher places it in: 8 GPUs whole, 64 and 256 in blocks of 64."""
    from playground.planner.published_bridge import nvl72_block
    from playground.planner.published_bridge_2606 import MEGATRON_BRIDGE_2606
    assert [nvl72_block(n) for n in (8, 64, 72, 256, 288)] == [8, 64, 72, 64, 72]
    for run in MEGATRON_BRIDGE_2606:
        assert "Megatron-Bridge v0.5.0's performance recipe" in run.note and run.layout.grad_reduce == "bf16"
        assert run.cluster.gpus_per_node == (min(run.layout.gpus, 64) if run.gpu.startswith("GB") else 8)
        rack = run.gpu.startswith("GB") or (run.gpu == "B300" and run.name.startswith("Qwen3_30B"))
        if not run.model.is_moe:
            assert run.layout.tp_overlap == "all"
        elif run.gpu == "H100":
            assert run.layout.ep_dispatch == "hybridep" and run.layout.moe_launch == "multi_stream"
        else:
            assert run.layout.ep_dispatch == "hybridep" and run.layout.ep_overlap == rack
            assert run.layout.moe_launch == ("graphed" if rack else "multi_stream")


def test_megatrons_ep_overlap_hides_the_share_of_its_all_to_alls_nsight_measured():
    """Megatron-Bridge's A/B (Qwen3-30B-A3B, 16 H100s, HybridEP) changed only the EP overlap, and Nsight
    read 36.55% of the communication hidden by GEMMs and attention: ``ep_overlap_hidden``.  The two rows
    differ in that one field; the model's step falls by that share of the all-to-alls it covers (less
    the SMs the dispatcher holds), not by all of them; and with every setting the page states the memory
    model counts 56.5 GiB against the 62.166 GiB rank 0 peaked at: HybridEP's buffers and the CUDA graphs'
    pools are not counted (with each expert's output kept, as a combine that weights them keeps it, it
    would count 62.5)."""
    from playground.planner.costs import overlapped
    from playground.planner.efficiency import EFFICIENCY
    from playground.planner.published_bridge_ab import BRIDGE_EP_OVERLAP_AB
    off, on = BRIDGE_EP_OVERLAP_AB
    assert EFFICIENCY.ep_overlap_hidden == 0.3655 and EFFICIENCY.spread["ep_overlap_hidden"] == (0.3655, 1.0)
    assert replace(off.layout, ep_overlap=True) == on.layout and (off.step_time_s, on.step_time_s) == (24.7138, 20.9920)
    slow, fast = (predict(r.model, r.cluster, r.layout) for r in (off, on))
    a2a = slow["time_breakdown"]["ep_all_to_all"]
    assert a2a < slow["time_breakdown"]["compute"]                 # the paired compute covers all of it
    hidden_all = overlapped(a2a, slow["time_breakdown"]["compute"], off.cluster.gpu, EFFICIENCY, 1.0)
    assert fast["time_breakdown"]["ep_all_to_all"] == pytest.approx(
        overlapped(a2a, slow["time_breakdown"]["compute"], off.cluster.gpu, EFFICIENCY, 0.3655), rel=0.02)
    assert fast["time_breakdown"]["ep_all_to_all"] > 3 * hidden_all
    assert 0.85 < slow["memory"]["total"] / 2**30 / 62.166 < 0.95
    kept = predict(off.model, off.cluster, replace(off.layout, moe_probs="combine"))["memory"]["total"]
    assert kept / 2**30 == pytest.approx(62.166, rel=0.02)


def test_megatron_cores_moe_rows_launch_their_experts_as_transformer_engine_does():
    """Every Megatron-Core MoE run whose layer is not replayed from a CUDA graph issues each grouped GEMM as a
    cuBLASLt GEMM per local expert (Transformer Engine's GroupedLinear by default: moe_launch multi_stream); the
    stacks with their own grouped kernels (torchtitan, NeMo AutoModel, DeepSeek's) keep one kernel a matrix; the
    range spans the launch wherever its host launches anything."""
    from playground.planner.published_stacks import STACK_RUNS
    moe = [run for run in STACK_RUNS if run.model.is_moe]
    megatron = [run for run in moe if run.stack.startswith("Megatron")]
    assert len(megatron) == 67
    assert {run.layout.moe_launch for run in megatron} == {"multi_stream", "graphed"}
    assert all(run.layout.moe_launch != "multi_stream" for run in moe if run not in megatron)
    # Megatron-LM's recipes state their graphs: a full-iteration one leaves the host nothing to launch
    stated = [run for run in megatron if run.stack == "Megatron-Bridge EP-overlap A/B"
              or (run.stack.startswith("Megatron-LM MoE recipes") and run.layout.moe_launch == "graphed")]
    assert len(stated) == 2 + 3 and all("moe_launch" in run.unstated for run in megatron if run not in stated)


def test_the_replay_spread_over_the_cores_gives_each_row_what_one_process_gives_it():
    from playground.hardware import on_every_core
    from playground.planner.replay import _stack_row
    picks = [0, len(STACK_RUNS) // 2, len(STACK_RUNS) - 1]
    assert on_every_core(_stack_row, picks) == [_stack_row(i) for i in picks]


def test_megatron_cores_flop_count_gives_what_the_moe_reports_figures_imply():
    """Megatron-Core v0.16's count (causal attention half, DeepSeek-V3's MTP layer in) gives the FLOPs a token each of
    the MoE report's nine runs implies, its TFLOP/s over its tokens/s, to the rounding of four-digit figures; the
    book's own count (attention over the whole sequence, no MTP) does not (0.55 at 128K)."""
    from playground.planner.costs import flops_per_step
    from playground.planner.flops import megatron_moe_flops_per_token
    from playground.planner.published_moe_report import MCORE_MOE_REPORT
    for run in MCORE_MOE_REPORT:
        implied = run.tflops_per_gpu * 1e12 / run.tokens_per_s_per_gpu
        megatron = megatron_moe_flops_per_token(run.model, 1 if run.name.startswith("DeepSeek") else 0)
        assert abs(implied / megatron - 1) < 0.015, run.name
    long = MCORE_MOE_REPORT[-1]
    ours = flops_per_step(long.model, long.layout, "none") / (long.layout.global_batch * long.model.seq_len)
    assert 0.5 < long.tflops_per_gpu * 1e12 / long.tokens_per_s_per_gpu / ours < 0.6


def test_megatron_lms_moe_recipes_take_their_args_as_read():
    """Megatron-LM's fourteen MoE recipes (its examples/moe_recipes index) as their ARGS state them: a full-iteration
    graph only in the paged-stash recipes, DeepEP where the recipe names it, fp8_param_gather and BF16 moments only where
    set, overlap_grad_reduce off where unset; each TFLOP/s read back as tokens/s in Megatron-Core's count (DeepSeek-V3's
    with its MTP layer), and its first replay recorded."""
    from playground.planner.flops import megatron_moe_flops_per_token
    from playground.planner.published_moe_recipes import MEGATRON_MOE_RECIPES
    from playground.planner.published_stacks import HELD_OUT_FIRST_REPLAY
    runs = {run.name: run for run in MEGATRON_MOE_RECIPES}
    assert len(runs) == 14 and set(runs) <= set(HELD_OUT_FIRST_REPLAY)
    for name, run in runs.items():
        layout = run.layout
        assert (layout.moe_launch == "graphed") == ("full CG" in name) and layout.expert_tp_degree == 1
        assert layout.ep_dispatch == ("deepep" if run.gpu == "B200" else "hybridep")
        # read back with DeepSeek-V3's MTP layer counted, as its recipes train it (4% more FLOPs a token)
        mtp = 1 if name.startswith("DeepSeek") else 0
        implied = run.tflops_per_gpu * 1e12 / run.tokens_per_s_per_gpu
        assert abs(implied / megatron_moe_flops_per_token(run.model, mtp) - 1) < 1e-4
        assert mtp == 0 or implied / megatron_moe_flops_per_token(run.model, 0) > 1.03
        assert run.unstated == (() if layout.moe_launch == "graphed" else ("moe_launch",))
    gb200_mx = [run for name, run in runs.items() if name.startswith("Qwen3-30B, 16 GB200") and "MXFP8" in name]
    assert len(gb200_mx) == 2 and not any(r.layout.fp8_params for r in gb200_mx)
    assert {name for name, run in runs.items() if not run.layout.overlap_grad_reduce} == \
        {name for name in runs if name.startswith(("Qwen3-30B, 16 GB200", "Qwen3-235B, 256 H100"))}
    assert {name for name, run in runs.items() if run.layout.optimizer_moments == "bf16"} == \
        {name for name, run in runs.items() if run.layout.dtype == "fp8" and not name.startswith("Qwen3-30B, 16 GB200")}
    dsv3 = runs["DeepSeek-V3, 256 GB200, TP 1 PP 4 EP 64 VP 4, MXFP8, partial CG"]
    assert dsv3.layout.selective_modules == ("mla_up_proj",) and dsv3.layout.offload_modules == ("expert_fc1",)
    assert sum(abs(HELD_OUT_FIRST_REPLAY[name] - 1) <= 0.25 for name in runs) == 5
