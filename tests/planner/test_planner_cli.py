"""The planner's command line as a practitioner meets it: --help explains every option, numbers take
decimal and binary suffixes, the text report and --json carry the same numbers, bad input is one line
on stderr with exit 2 and nothing on stdout, and `pip install` gives a `capacity-plan` command."""

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from playground import planner as cp
from playground.planner.args import parse_number, planner_parser
from playground.planner.presets import preset_names
from playground.planner.step_time_cli import predict_from_args
from playground.planner.step_time_cli import report as step_time_report

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = Path(__file__).resolve().parents[2] / "chapters" / "configs"


def _cli(*args, module="capacity_plan"):
    return subprocess.run([sys.executable, "-m", f"playground.{module}", *args],
                          capture_output=True, text=True, timeout=120)


def test_help_explains_every_option_with_its_default():
    parser = planner_parser()
    for action in parser._actions:
        if action.dest == "help":
            continue
        assert action.help and "default" in action.help, action.option_strings
    text = parser.format_help()
    for name in preset_names():
        assert name in text
    for unit in ("GB/s", "tokens", "sequences", "TFLOP/s", "16Mi = 2^24"):
        assert unit in text


@pytest.mark.parametrize("text,value", [("16M", 16e6), ("16Mi", 2 ** 24), ("1.5Ki", 1536), ("175B", 175e9),
                                        ("1.4T", 1.4e12), ("4Gi", 4 * 2 ** 30), ("2e3", 2000.0), ("7", 7.0)])
def test_numbers_take_decimal_and_binary_suffixes(text, value):
    assert parse_number(text) == value


def test_a_16mi_token_batch_is_2048_sequences_and_16m_is_rounded_and_said():
    exact = cp.plan(model="llama3-405b", tokens=15.6e12, gpus=8192, tp=8, pp=16, global_batch_tokens=2 ** 24)
    assert exact["global_batch"] == 2048 and exact["global_batch_tokens"] == 2 ** 24
    assert not any("rounded" in n for n in exact["notes"])
    rounded = cp.plan(model="llama3-405b", tokens=15.6e12, global_batch_tokens=16e6)
    assert rounded["global_batch"] == 1953 and any("rounded to 1,953 sequences" in n for n in rounded["notes"])
    with pytest.raises(cp.PlanError, match="not a multiple of DP x micro-batch = 64 x 1: use 1920 or 1984"):
        cp.plan(model="llama3-405b", tokens=15.6e12, gpus=8192, tp=8, pp=16, global_batch_tokens=16e6)


def test_a_config_planned_without_seq_len_says_which_length_it_took():
    """OLMoE's config reaches 4,096 positions: without --seq-len the plan takes that and notes it;
    --seq-len given, the plan takes it and says nothing of the sort."""
    olmoe = str(Path(__file__).resolve().parents[2] / "chapters" / "configs" / "families" / "olmoe-1b-7b")
    taken, given = (json.loads(_cli("--hf-config", olmoe, "--tokens", "1T", "--json", *extra).stdout)
                    for extra in ((), ("--seq-len", "2048")))
    assert taken["global_batch"] * 4096 == taken["global_batch_tokens"]
    assert any("max_position_embeddings, 4,096 tokens, taken" in n for n in taken["notes"])
    assert given["global_batch"] * 2048 == given["global_batch_tokens"]
    assert not any("sequence length" in n for n in given["notes"])


def test_text_report_and_json_carry_the_same_numbers():
    args = ["--model", "llama3-8b", "--tokens", "2T", "--gpus", "64", "--tp", "1", "--pp", "1"]
    text, js = _cli(*args), _cli(*args, "--json")
    assert text.returncode == js.returncode == 0, text.stderr + js.stderr
    p = json.loads(js.stdout)
    assert max(len(line) for line in text.stdout.splitlines()) <= 88  # folded to fit a terminal and the book
    flat = " ".join(text.stdout.split())
    for shown in (f"{p['gpu_hours']:,.0f} GPU-hours", f"{p['days']:.1f} days", f"MFU {p['mfu']:.3f}",
                  f"HFU {p['hfu']:.3f}", f"{p['steps']:,} steps", f"{p['memory']['total'] / 2 ** 30:.1f} GiB",
                  f"step {p['step_time_s']:.3g} s"):
        assert shown in flat, shown
    layouts = [line for line in text.stdout.splitlines() if line.startswith("layout")]
    assert len(layouts) == 1 and "TP=1 x PP=1 x DP=64" in layouts[0]  # only the layout asked for


def test_json_keeps_its_keys_and_adds_the_new_ones():
    out = _cli("--model", "llama3-70b", "--tokens", "1.4T", "--gpus", "1024", "--tp", "8", "--pp", "4", "--json")
    assert out.returncode == 0, out.stderr
    p = json.loads(out.stdout)
    for key in ("params", "active_params", "tokens", "flops_per_token", "total_flops", "steps", "global_batch_tokens",
                "gpu_hours", "days", "cost", "memory", "parallelism", "warnings", "mfu", "hfu", "tflops_per_gpu",
                "model_tflops_per_gpu", "step_time_s", "tokens_per_s", "global_batch", "layout", "notes"):
        assert key in p, key
    for key in ("model_states", "activations", "total", "capacity", "usable", "fits", "logits", "zero3_buffers"):
        assert key in p["memory"], key
    for key in ("dp", "tp", "pp", "cp", "ep", "vpp", "zero_stage"):
        assert key in p["parallelism"], key
    for key in ("step_time_s", "tokens_per_s", "tflops_per_gpu", "model_tflops_per_gpu", "mfu", "hfu"):
        assert key in p["layout_prediction"], key


def test_a_config_json_goes_in_and_flags_override_it():
    out = _cli("--hf-config", str(CONFIGS / "llama3-8b"), "--tokens", "1T", "--gpus", "8", "--tp", "1",
               "--seq-len", "4096", "--json")
    p = json.loads(out.stdout)
    assert out.returncode == 0 and p["architecture"]["seq_len"] == 4096 and p["params"] == 8_030_261_248
    assert p["architecture"]["source"].startswith("config ") and p["architecture"]["kv_heads"] == 8


def test_an_moe_model_plans_with_expert_parallelism():
    out = _cli("--model", "deepseek-v3", "--gpu", "H800", "--gpus", "2048", "--tokens", "14.8T", "--pp", "16",
               "--ep", "64", "--recompute", "full", "--global-batch", "15360", "--json")
    assert out.returncode == 0, out.stderr
    p = json.loads(out.stdout)
    assert p["parallelism"]["ep"] == 64 and p["parallelism"]["dp"] == 128 and p["memory"]["fits"]
    assert p["active_params"] < 0.06 * p["params"]
    assert p["layout_prediction"]["time_breakdown"]["ep_all_to_all"] > 0


def test_capacity_plan_is_a_console_script_with_its_dependencies_declared():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["capacity-plan"] == "playground.planner.cli:main"
    assert {d.split(">")[0].split("=")[0] for d in project["dependencies"]} >= {"torch", "numpy", "matplotlib"}
    script = Path(sys.executable).with_name("capacity-plan")
    if script.exists():  # installed by `pip install -e .` (make venv)
        out = subprocess.run([str(script), "--model", "llama3-8b", "--tokens", "1T"], capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 0 and "GPU-hours" in out.stdout


def test_a_closed_pipe_ends_quietly():
    """`capacity_plan ... --search | head -2` must not print a BrokenPipeError traceback."""
    cmd = (f"{sys.executable} -m playground.capacity_plan --model llama3-8b --tokens 1T --gpus 64 --search "
           f"| head -1")
    out = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=120)
    assert out.stdout.startswith("model") and out.stderr == ""


BASE = ["--model", "llama3-8b", "--tokens", "1T"]
BAD = [
    (["--params", "-7B", "--tokens", "1T"], "--params must be a positive finite number"),
    (["--params", "0", "--tokens", "1T"], "--params must be a positive finite number"),
    (["--params", "seven", "--tokens", "1T"], "not a number"),
    (["--params", "7B", "--tokens", "nan"], "--tokens must be a positive finite number"),
    (["--params", "1e400", "--tokens", "1T"], "--params must be a positive finite number"),
    ([*BASE, "--gpu", "V100x"], "unknown GPU 'V100x'; known: A100-40GB"),
    ([*BASE, "--gpus", "0"], "--gpus must be a positive finite number"),
    ([*BASE, "--gpus", "inf"], "--gpus must be a positive finite number"),
    ([*BASE, "--gpus", "2.5"], "--gpus must be a whole number"),
    ([*BASE, "--mfu", "1.5"], "--mfu must be in (0, 1]"),
    ([*BASE, "--mfu", "0.4", "--achieved-tflops", "100"], "not both"),
    ([*BASE, "--achieved-tflops", "2000", "--gpu", "A100"], "exceeds"),
    ([*BASE, "--price-per-gpu-hour", "0"], "--price-per-gpu-hour must be a positive"),
    ([*BASE, "--zero-stage", "4"], "argument --zero-stage: invalid choice"),
    ([*BASE, "--recompute", "some"], "argument --recompute: invalid choice"),
    ([*BASE, "--loss-kernel", "liger"], "argument --loss-kernel: invalid choice"),
    ([*BASE, "--attention-kernel", "fa4"], "argument --attention-kernel: invalid choice"),
    ([*BASE, "--gpus", "8", "--recompute-modules", "attn"], "unknown recompute module 'attn'"),
    ([*BASE, "--gpus", "8", "--recompute-modules", "moe_act"], "recompute module moe_act needs a model with experts"),
    ([*BASE, "--gpus", "8", "--recompute", "full", "--recompute-modules", "layernorm"], "does not go with --recompute full"),
    ([*BASE, "--gpus", "8", "--recompute-share", "3/2"], "--recompute-share must be in (0, 1]"),
    ([*BASE, "--gpus", "8", "--recompute-share", "half"], "--recompute-share must be a number in (0, 1]"),
    ([*BASE, "--gpus", "8", "--recompute", "op", "--recompute-share", "0.5"], "does not go with --recompute op"),
    ([*BASE, "--frobnicate"], "unrecognized arguments"),
    (["--params", "7B", "--compute", "1e23"], "not both"),
    (["--params", "7B"], "give --tokens"),
    (["--compute", "inf"], "--compute must be a positive finite number"),
    ([*BASE, "--active-params", "9B"], "cannot exceed"),
    ([*BASE, "--global-batch", "512", "--global-batch-tokens", "4M"], "not both"),
    # models
    (["--model", "llama9", "--tokens", "1T"], "unknown model 'llama9'; known: gpt3-175b"),
    (["--model", "my/config.json", "--tokens", "1T"], "a config.json goes to --hf-config"),
    (["--hf-config", "/nonexistent/config.json", "--tokens", "1T"], "/nonexistent/config.json"),
    (["--model", "llama3-8b", "--hf-config", str(CONFIGS / "llama3-8b"), "--tokens", "1T"], "not both"),
    (["--layers", "32", "--tokens", "1T"], "all of --layers"),
    (["--layers", "32", "--hidden", "4096", "--heads", "30", "--tokens", "1T", "--gpus", "8", "--tp", "1"],
     "not divisible by 30 heads"),
    (["--kv-heads", "8", "--params", "7B", "--tokens", "1T"], "--kv-heads needs the shape"),
    # layouts
    ([*BASE, "--gpus", "64", "--tp", "8", "--pp", "2", "--dp", "3"], "8 x 2 x 1 x 3 = 48 is not the 64 GPUs"),
    ([*BASE, "--gpus", "64", "--tp", "64"], "TP=64 does not divide the 32 attention heads"),
    ([*BASE, "--gpus", "64", "--tp", "16", "--pp", "4"], "TP=16 does not divide the 8 key/value heads"),
    ([*BASE, "--gpus", "64", "--pp", "64"], "PP=64 is more than the 32 layers"),
    ([*BASE, "--gpus", "64", "--cp", "2", "--dp", "3", "--pp", "1", "--tp", "1"], "1 x 1 x 2 x 3 = 6 is not the 64 GPUs"),
    ([*BASE, "--gpus", "48", "--cp", "3"], "CP=3 does not divide the 8192-token sequence"),
    (["--model", "mixtral-8x7b", "--tokens", "1T", "--gpus", "64", "--ep", "4", "--dp", "6"],
     "EP=4 must divide DP x CP = 6"),
    (["--model", "mixtral-8x7b", "--tokens", "1T", "--gpus", "48", "--ep", "3"], "EP=3 does not divide the 8 experts"),
    ([*BASE, "--gpus", "64", "--ep", "2"], "EP=2 needs a mixture-of-experts model"),
    ([*BASE, "--gpus", "64", "--hsdp", "8", "--zero-stage", "1"], "--hsdp"),
    ([*BASE, "--gpus", "64", "--search", "--tp", "2"], "--search varies the layout"),
    ([*BASE, "--search"], "--search needs --gpus"),
    (["--model", "llama3-8b", "--tokens", "1T", "--gpu", "A100", "--gpus", "8", "--dtype", "fp8"],
     "has no FP8 tensor cores"),
    ([*BASE, "--gpus", "64", "--nvlink-gbs", "-5"], "--nvlink-gbs must be a positive"),
    ([*BASE, "--gpus", "64", "--network-gbs", "nan"], "--network-gbs must be a positive"),
    (["--params", "1e40", "--tokens", "1e40"], "the planner handles at most 10,000"),
]


@pytest.mark.parametrize("args,message", BAD, ids=[m for _, m in BAD])
def test_bad_input_is_one_line_and_exit_2(args, message, capsys):
    assert cp.main(args) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1, captured.err
    assert message in captured.err and "Traceback" not in captured.err


@pytest.mark.parametrize("content,message", [("{not json", "not valid JSON"), ("[1, 2]", "not an object"),
                                             ('{"model_type": "llama", "hidden_size": 4096}', "lacks")])
def test_a_broken_config_is_named_in_one_line(tmp_path, content, message, capsys):
    path = tmp_path / "config.json"
    path.write_text(content)
    assert cp.main(["--hf-config", str(tmp_path), "--tokens", "1T"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


def test_bad_input_from_a_real_process_is_one_line_and_exit_2():
    out = _cli("--params", "7B", "--tokens", "1T", "--gpu", "TPUv9")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("capacity_plan: error: unknown GPU")
    out = _cli("--model", "nope", "--gpus", "8", module="step_time")
    assert out.returncode == 2 and out.stdout == "" and "unknown model 'nope'" in out.stderr


def test_a_step_time_layout_that_does_not_fit_says_what_would():
    def advice(*args):
        report = step_time_report(predict_from_args(planner_parser().parse_args(
            ["--gpu", "H100", "--gpus", "8", "--global-batch", "8", *args])))
        assert "(does NOT fit)" in report
        lines = [line for line in report.splitlines() if line.startswith("would fit")]
        assert lines and all(line.endswith("GiB") for line in lines)
        return lines
    assert "would fit --zero-stage 2: 67.9 GiB" in advice("--model", "llama3-8b", "--zero-stage", "0")
    # 70B's weights, gradients and Adam states alone outgrow 8 GPUs: the fewest GPUs that hold it
    (more,) = advice("--model", "llama3-70b", "--zero-stage", "1")
    assert more.startswith("would fit --gpus ")


def test_a_layout_inside_the_gpu_but_past_the_margin_fits_only_tightly_and_says_what_leaves_room():
    """gpt-oss 120B as NeMo AutoModel ran it (FSDP 64 x EP 64, two 4K sequences, nothing recomputed,
    the loss on bf16 logits), each expert's output kept as a combine that weights them keeps it
    (--moe-probs combine), counts 77.2 GiB: inside an H100's 79.6, past the 73.7 usable."""
    config = Path(__file__).resolve().parents[2] / "chapters" / "configs" / "families" / "gpt-oss-120b"
    args = ["--hf-config", str(config), "--gpu", "H100", "--gpus", "64", "--ep", "64",
            "--zero-stage", "3", "--micro-batch-size", "2", "--global-batch", "512", "--seq-len", "4096",
            "--recompute", "none", "--no-loss-fp32", "--moe-probs", "combine"]
    report = step_time_report(predict_from_args(planner_parser().parse_args(args)))
    assert "(fits only tightly)" in report and "expandable_segments" in report
    room = [line for line in report.splitlines() if line.startswith("with room --")]
    assert room[0] == "with room --offload-modules expert_fc1: 71.2 GiB" and len(room) == 4   # the smallest change first
    assert "with room --optimizer-moments bf16: 70.4 GiB" in room
    plan = _cli(*args, "--tokens", "1T")
    assert plan.returncode == 0 and "fits only tightly" in plan.stdout and "with room  --" in plan.stdout


def test_the_stack_flags_name_what_a_plan_prices():
    """--attention-kernel cudnn, --autocast-fp32 and --loss-kernel megatron reach the layout the plan
    prices and the line that describes it, and each makes the step slower than the default."""
    base = ["--model", "llama3-8b", "--gpu", "H100", "--gpus", "8", "--tp", "1", "--global-batch", "64"]
    steps = {}
    for extra in ([], ["--attention-kernel", "cudnn"], ["--autocast-fp32"], ["--loss-kernel", "megatron"]):
        result = predict_from_args(planner_parser().parse_args(base + extra))
        steps[" ".join(extra)] = result["step_time_s"]
        report = step_time_report(result)
        label = {"--attention-kernel cudnn": "cuDNN attention", "--autocast-fp32": "autocast over fp32 weights",
                 "--loss-kernel megatron": "megatron loss kernel"}.get(" ".join(extra))
        assert label is None or label in report
    assert all(steps[k] > steps[""] for k in steps if k)


def test_a_recompute_share_reaches_the_plan_between_none_and_every_block():
    """--recompute-share 1/2 implies --recompute full over every other block: the report says so, and the
    step, the memory and the executed FLOPs a token land between recomputing nothing and every block."""
    base = ["--model", "llama3-8b", "--gpu", "H100", "--gpus", "8", "--tp", "1", "--global-batch", "64"]
    run = {name: predict_from_args(planner_parser().parse_args(base + extra)) for name, extra in (
        ("none", ["--recompute", "none"]), ("half", ["--recompute-share", "1/2"]), ("full", ["--recompute", "full"]))}
    assert "recompute full (50% of blocks)" in step_time_report(run["half"])
    for key in ("step_time_s", "flops_per_step"):
        assert run["none"][key] < run["half"][key] < run["full"][key], key
    memory = {k: v["memory"]["total"] for k, v in run.items()}
    assert memory["full"] < memory["half"] < memory["none"]


def test_a_layout_that_fits_with_half_its_blocks_recomputed_is_told_so():
    """Llama 3 8B, FSDP over 8 H100s, two 8K sequences a micro-batch, nothing recomputed: 96 GiB.  Recomputing
    every other block is the smallest share of the --recompute-share ladder (1/4, 1/2, 3/4) that fits."""
    report = step_time_report(predict_from_args(planner_parser().parse_args(
        ["--model", "llama3-8b", "--gpu", "H100", "--gpus", "8", "--global-batch", "64", "--zero-stage", "3",
         "--micro-batch-size", "2"])))
    advice = [line for line in report.splitlines() if line.startswith("would fit --recompute-share")]
    assert advice == ["would fit --recompute-share 1/2: 66.3 GiB"]


def test_a_search_holds_the_share_it_is_given_and_counts_its_flops():
    """--recompute-share with --gpus and no layout: the search keeps that share for every layout it tries,
    and the plan counts (6 + 2 r) N D when all it has is a parameter count."""
    plan = cp.plan(params=13e9, tokens=260e9, gpu="A100-80GB", gpus=64, recompute="full", recompute_share=1 / 3)
    assert plan["parallelism"]["source"] == "found by the search"
    assert "recompute full (33% of blocks)" in plan["parallelism"]["description"]
    counted = cp.plan(params=13e9, tokens=260e9, gpu="A100-80GB", mfu=0.45, recompute="full", recompute_share=0.5)
    assert counted["flops_method"] == "7ND" and counted["total_flops"] == pytest.approx(7 / 6 * counted["model_flops"])
    assert "7 N D: 6 N D and the forward again in 50% of the blocks" in " ".join(cp.report(counted).split())


def test_bf16_adam_moments_are_a_flag_the_layout_line_names_and_a_bad_dtype_is_one_line():
    out = _cli("--model", "llama3-8b", "--gpu", "H100", "--gpus", "8", "--tokens", "1B", "--optimizer-moments", "bf16")
    assert out.returncode == 0 and "bf16 Adam moments" in out.stdout
    bad = _cli("--model", "llama3-8b", "--gpu", "H100", "--gpus", "8", "--optimizer-moments", "fp16")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "--optimizer-moments" in bad.stderr


def test_activation_offloading_is_a_flag_the_layout_line_names_and_a_lone_attn_proj_is_one_line():
    out = _cli("--model", "mixtral-8x7b", "--gpu", "H100", "--gpus", "64", "--ep", "8", "--tokens", "1B",
               "--offload-modules", "expert_fc1,moe_act")
    assert out.returncode == 0 and "offloading" in out.stdout and "activation_offload" in out.stdout
    assert "of activations in host memory" in " ".join(out.stdout.split())
    for modules, says in (("attn_proj", "needs core_attn"), ("expert_fc1", "needs a model with experts")):
        bad = _cli("--model", "llama3-8b", "--gpu", "H100", "--gpus", "8", "--tokens", "1B", "--offload-modules", modules)
        assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and says in bad.stderr


def test_the_planner_plans_without_importing_torch_or_matplotlib():
    """A plan is arithmetic: both command lines, a plan and a step's prediction start in a fraction of a
    second because nothing on their path imports torch (about 3 s) or matplotlib."""
    code = ("import sys\n"
            "from playground.planner.cli import main\n"
            "from playground.step_time import main as step_time\n"
            "main(['--model', 'llama3-8b', '--tokens', '1T', '--gpus', '64', '--json'])\n"
            "step_time(['--model', 'llama3-70b', '--gpus', '64', '--tp', '8', '--pp', '2'])\n"
            "print(sorted(m for m in ('torch', 'matplotlib') if m in sys.modules), file=sys.stderr)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stderr.strip().splitlines()[-1] == "[]"
