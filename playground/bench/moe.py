"""MoE layer: one EP rank's routed experts, forward and backward, by each way the rows reach the GEMMs.

The layer is ``playground.systems_map.expert_execution.RoutedExperts`` at the shapes of published MoE
runs (one rank of their expert parallelism: its local experts, a micro-batch's tokens routed over all
experts, balanced as if exchanged by the all-to-all, which is not run), a few layers stacked, timed
forward and backward by five paths: a grouped GEMM with device-side group sizes (no host sync), the
same with the counts brought to the host first (a dropless dispatcher's sync), one GEMM per expert
after that sync, fixed-capacity slots (token dropping), and, on a GPU, the grouped path captured in a
CUDA graph (the host launches nothing).  On a GPU the kernels of one iteration
are traced (count and device time, so ``busy`` is the share of wall time the GPU worked), the same
layers are run at a handful of tokens (where the host, launching kernels, sets the pace), and the
step-time model's price of the same pieces for a fused stack (its GEMMs and its permutation and
activation bytes, at its stated constants, no sustained-clock derate: a short run) stands beside
each.  Every path's layer is first checked against the grouped one's output on the real shape.
``summary`` reads a GPU record the way chapter 6 does; ``eager_bytes`` fits the bytes an eager layer's
non-GEMM kernels move, which the step-time model charges a layout with ``kernels="eager"``; ``launch_fit``
the kernels a layer launches and the host's time for each, with which it prices a MoE layer's launches.
"""

from __future__ import annotations

import statistics
import time

import torch
from torch import nn

from playground.bench import check_fits
from playground.bench.mfu import _sync, table_gpu
from playground.bench.profile import kernel_class
from playground.planner.architecture import Model
from playground.planner.costs import BYTES, EFFICIENCY, activation_bytes, gemm_time, layer_gemms, permutation_bytes
from playground.systems_map.expert_execution import PATHS, RoutedExperts

# one EP rank of each published run: (hidden, expert width, experts, top-k, EP degree, what it stands for)
SHAPES = {
    "qwen3-30b-a3b": (2048, 768, 128, 8, 8, "Megatron-Bridge's Qwen3-30B-A3B at EP 8: 16 local experts"),
    "qwen3-235b-a22b": (4096, 1536, 128, 8, 32, "Qwen3-235B-A22B at EP 32 (Bridge, the Model Zoo): 4 local"),
    "deepseek-v3": (7168, 2048, 256, 8, 64, "DeepSeek-V3 at EP 64 (Bridge 25.09, AutoModel): 4 local"),
    "gpt-oss-120b": (2880, 2880, 128, 4, 64, "gpt-oss 120B at EP 64 (AutoModel): 2 local"),
    "mixtral-8x7b": (4096, 14336, 8, 2, 8, "Mixtral 8x7B at EP 8: one wide expert a rank"),
    "tiny": (64, 64, 16, 4, 4, "a CPU-sized layer for tests"),
}
SMALL_TOKENS = 64   # few enough that the device finishes each kernel before the host launches the next


def add_arguments(parser) -> None:
    parser.add_argument("--shapes", nargs="+", choices=list(SHAPES), default=None, metavar="SHAPE",
                        help=f"which layers ({', '.join(SHAPES)}); default: every named one on a GPU, tiny on a CPU")
    parser.add_argument("--paths", nargs="+", choices=PATHS + (GRAPHED,), default=None, metavar="PATH",
                        help=f"how the rows reach the GEMMs ({', '.join(PATHS)}; {GRAPHED}: the grouped "
                        "path captured in a CUDA graph, on a GPU; default: all that the device runs)")
    parser.add_argument("--tokens", type=int, default=None, help="tokens a rank routes per micro-batch "
                        "(default 4096 on a GPU, the runs' sequence at micro-batch 1; 128 on a CPU)")
    parser.add_argument("--layers", type=int, default=4, help="MoE layers stacked in one timed pass (default 4)")
    parser.add_argument("--capacity-factor", type=float, default=1.0, help="slots per expert on the capacity "
                        "path, over the mean (default 1.0)")
    parser.add_argument("--repeats", type=int, default=10, help="timed iterations (default 10)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed iterations first (default 3)")


class _Stack(nn.Module):
    """Routed-expert layers one after another, each added to the residual stream."""

    def __init__(self, layers):
        super().__init__()
        self.layers = nn.ModuleList(layers)

    def forward(self, x):
        for layer in self.layers:
            x = x + layer(x)
        return x


def _iteration(stack, x, grad) -> None:
    for p in stack.parameters():
        p.grad = None
    torch.autograd.backward(stack(x), grad)


def _time(stack, x, grad, device, repeats: int, warmup: int) -> float:
    """Median wall seconds of one forward and backward through ``stack``."""
    for _ in range(warmup):
        _iteration(stack, x, grad)
    times = []
    for _ in range(repeats):
        _sync(device)
        start = time.perf_counter()
        _iteration(stack, x, grad)
        _sync(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _trace(stack, x, grad, device) -> tuple[int, float, float]:
    """(kernels launched, their device seconds, of which matrix products') in one iteration; zeros on a CPU."""
    if device.type != "cuda":
        return 0, 0.0, 0.0
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        _iteration(stack, x, grad)
        _sync(device)
    kernels = [(e.name, e.time_range.elapsed_us() * 1e-6) for e in prof.events()
               if e.device_type == torch.autograd.DeviceType.CUDA and not e.is_user_annotation]
    gemm = sum(t for name, t in kernels if kernel_class(name) == "matrix products")
    return len(kernels), sum(t for _, t in kernels), gemm


def modelled(shape: str, tokens: int, gpu) -> dict:
    """The step-time model's price of one rank's routed experts for one pass forward and backward:
    the router and expert GEMMs (``layer_gemms`` at EP, each backward an input and a weight gradient,
    bf16 as the bench runs them) and the permutation and activation bytes it charges, a third forward."""
    h, f, e, k, ep, _ = SHAPES[shape]
    model = Model(2, h, max(1, h // 128), seq_len=tokens, experts=e, top_k=k, moe_ffn=f, gated_mlp=True)
    gemms = [g for g in layer_gemms(model, 1, 1, ep=ep, moe=True) if g[0] in ("router", "experts_in", "experts_out")]
    forward = sum(gemm_time(*g[1:], gpu, EFFICIENCY) for g in gemms)
    backward = sum(gemm_time(c, M, K, N, gpu, EFFICIENCY) + gemm_time(c, K, N, M, gpu, EFFICIENCY)
                   for _, c, M, N, K in gemms)
    moved = 3 * (permutation_bytes(model, tokens, 1) + activation_bytes(model, tokens, k * f, 1))
    elementwise = moved / (EFFICIENCY.hbm * gpu.hbm_bytes_per_s)
    return {"gemm_s": forward + backward, "elementwise_s": elementwise, "layer_s": forward + backward + elementwise}


def _check(args) -> None:
    for name in ("tokens", "layers", "repeats"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise ValueError(f"--{name} must be >= 1, got {value}")
    if args.warmup < 0:
        raise ValueError(f"--warmup must be >= 0, got {args.warmup}")
    if not args.capacity_factor > 0:
        raise ValueError(f"--capacity-factor must be > 0, got {args.capacity_factor}")


GRAPHED = "grouped_graph"   # the grouped path captured in a CUDA graph, forward and backward: no launch from the host


def _build(shape, path, n_layers, device, capacity_factor, sample):
    h, f, e, k, ep, _ = SHAPES[shape]
    stack = _Stack([RoutedExperts(h, f, e, e // ep, k, "grouped" if path == GRAPHED else path, capacity_factor,
                                  device=device) for _ in range(n_layers)])
    if path == GRAPHED:
        if device.type != "cuda":
            raise RuntimeError("a CUDA graph needs a GPU")
        stack = torch.cuda.make_graphed_callables(stack, (sample,))
    return stack


def run_shape(shape: str, args, device) -> dict:
    h, f, e, k, ep, what = SHAPES[shape]
    chosen = args.paths or (PATHS + (GRAPHED,) if device.type == "cuda" else PATHS)
    paths = [p for p in PATHS + (GRAPHED,) if p in chosen]    # the grouped path first: the others are read against it
    tokens = args.tokens or (4096 if device.type == "cuda" else 128)
    # weights and their gradients, the activations saved per layer (the k copies, both MLP widths), twice over
    need = 2 * BYTES * args.layers * (3 * (e // ep) * h * f + e * h) * 2 + 2 * BYTES * args.layers * tokens * k * (3 * h + 6 * f)
    check_fits(need, f"a stack of {args.layers} {shape} layers at {tokens:,} tokens", per_gpu=device.type == "cuda")
    g = torch.Generator().manual_seed(1)
    x = torch.randn(tokens, h, generator=g).to(device, torch.bfloat16)
    grad = torch.randn(tokens, h, generator=g).to(device, torch.bfloat16)
    gpu = table_gpu(torch.cuda.get_device_name(device)) if device.type == "cuda" else None
    model = modelled(shape, tokens, gpu) if gpu else None
    row = {"shape": shape, "stands_for": what, "tokens": tokens, "rows": tokens * k, "local_experts": e // ep,
           "hidden": h, "expert_width": f, "layers": args.layers,
           "model_ms_per_layer": round(model["layer_s"] * 1e3, 3) if model else None,
           "model_gemm_ms_per_layer": round(model["gemm_s"] * 1e3, 3) if model else None, "paths": {}}
    # agreement: one layer's output against the grouped path's (a stack's routing can flip on a near tie:
    # the combine's atomic adds land in any order), the graph's on a one-layer graph of its own
    first, n = None, args.layers
    for path in paths:
        try:
            stack = _build(shape, path, n, device, args.capacity_factor, x)
            one = _build(shape, GRAPHED, 1, device, args.capacity_factor, x) if path == GRAPHED else stack.layers[0]
            out = one(x).detach().float()
            del one
            if path == "capacity" and args.capacity_factor < e / k:   # drops: not comparable to dropless
                agrees = None
            elif first is None:
                first, agrees = out, True
            else:
                agrees = bool(torch.allclose(out, first, rtol=2e-2, atol=2e-2))
            del out
            wall = _time(stack, x, grad, device, args.repeats, args.warmup) / n
            kernels, busy, gemm = _trace(stack, x, grad, device)
            entry = {"ms_per_layer": round(wall * 1e3, 3), "agrees_with_grouped": agrees}
            if path != GRAPHED:     # a graph replays the shapes it captured: no small run
                small_x, small_g = x[:SMALL_TOKENS].contiguous(), grad[:SMALL_TOKENS].contiguous()
                small = _time(stack, small_x, small_g, device, args.repeats, args.warmup) / n
                _, small_busy, _ = _trace(stack, small_x, small_g, device)
                entry["host_ms_per_layer_at_64_tokens"] = round(small * 1e3, 3)
        except (RuntimeError, NotImplementedError) as exc:   # a path this torch or device lacks
            row["paths"][path] = {"failed": str(exc).splitlines()[0][:200]}
            continue
        if kernels:
            entry.update(kernels_per_layer=round(kernels / n, 1), busy_ms_per_layer=round(busy / n * 1e3, 3),
                         gemm_ms_per_layer=round(gemm / n * 1e3, 3), busy_share=round(busy / n / wall, 3))
            if path != GRAPHED:
                entry.update(busy_ms_per_layer_at_64_tokens=round(small_busy / n * 1e3, 3),
                             host_us_per_kernel=round(small / (kernels / n) * 1e6, 2))
        if model:
            entry["measured_over_model"] = round(wall / model["layer_s"], 3)
            if kernels:
                entry["gemm_over_model"] = round(gemm / n / model["gemm_s"], 3)
        row["paths"][path] = entry
        del stack
        if device.type == "cuda":
            torch.cuda.empty_cache()
    times = {p: v["ms_per_layer"] for p, v in row["paths"].items() if "ms_per_layer" in v}
    if "grouped" in times:
        row["over_grouped"] = {p: round(t / times["grouped"], 3) for p, t in times.items() if p != "grouped"}
    return row


def run(args) -> dict:
    _check(args)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    shapes = args.shapes or ([s for s in SHAPES if s != "tiny"] if device.type == "cuda" else ["tiny"])
    rows = [run_shape(s, args, device) for s in shapes]
    gpu = table_gpu(torch.cuda.get_device_name(device)) if device.type == "cuda" else None
    return {"backend": None, "device_type": device.type, "gpu_in_table": gpu.name if gpu else None,
            "dtype": "bf16 weights, activations and gradients", "capacity_factor": args.capacity_factor,
            "rows": rows,
            "note": "one EP rank's routed experts, the all-to-all not run (balanced routing: rows sent stand in "
                    "for rows received); ms per layer = wall time of forward and backward over the stacked "
                    "layers, divided by their number; host_ms_per_layer_at_64_tokens = the same at 64 tokens, "
                    "where kernel launches set the pace; agrees_with_grouped: one layer's output equals the grouped path's "
                    "within bf16 tolerance (the graph: a one-layer graph's; capacity with drops: not compared); "
                    "the model's price has no sustained-clock derate"}


def summary(record: dict) -> list[dict]:
    """One row per shape of a GPU record, what chapter 6 reads: the grouped path against the model's
    price (whole layer, GEMMs alone, the rest of the device's work against the element-wise bytes the
    model charges), the host's time for a layer at 64 tokens, and each other path over the grouped one."""
    rows = []
    for row in record["rows"]:
        grouped = row["paths"]["grouped"]
        model_other = row["model_ms_per_layer"] - row["model_gemm_ms_per_layer"]
        over = row.get("over_grouped", {})
        rows.append({
            "shape": row["shape"], "local_experts": row["local_experts"],
            "rows_per_expert": row["rows"] // row["local_experts"],
            "model_ms": row["model_ms_per_layer"], "grouped_ms": grouped["ms_per_layer"],
            "grouped_over_model": grouped["measured_over_model"], "gemm_over_model": grouped["gemm_over_model"],
            "other_over_model": round((grouped["busy_ms_per_layer"] - grouped["gemm_ms_per_layer"]) / model_other, 2),
            "host_ms_at_64_tokens": grouped["host_ms_per_layer_at_64_tokens"],
            "kernels": grouped["kernels_per_layer"],
            **{f"{p}_over_grouped": over.get(p) for p in ("grouped_sync", "loop_sync", "capacity", GRAPHED)}})
    return rows


def eager_bytes(record: dict) -> tuple[float, float]:
    """HBM bytes an eager layer's non-GEMM kernels move, forward and backward together, per element of
    the dispatched copies (T k h) and per element of the routed activation (T k f): the least-squares
    fit, over a GPU record's shapes, of the grouped path's device time outside its matrix products,
    read at the model's HBM rate (``Efficiency.hbm`` of the datasheet's bandwidth)."""
    gpu = table_gpu(record["gpu_in_table"])
    rate = EFFICIENCY.hbm * gpu.hbm_bytes_per_s
    xs, ys = zip(*(_elements_and_bytes(row, rate) for row in record["rows"]))
    fit = torch.linalg.lstsq(torch.tensor(xs, dtype=torch.float64),
                             torch.tensor(ys, dtype=torch.float64).unsqueeze(1)).solution
    return float(fit[0, 0]), float(fit[1, 0])


def _elements_and_bytes(row: dict, rate: float) -> tuple[tuple[int, int], float]:
    """((dispatched elements, routed activation elements), bytes the grouped path's non-GEMM time moves at ``rate``)."""
    h, f, e, k, ep, _ = SHAPES[row["shape"]]
    grouped = row["paths"]["grouped"]
    return (row["tokens"] * k * h, row["tokens"] * k * f), \
        (grouped["busy_ms_per_layer"] - grouped["gemm_ms_per_layer"]) * 1e-3 * rate


def eager_bytes_fit(record: dict, row_bytes: float, act_bytes: float) -> dict:
    """{shape: the bytes ``row_bytes`` and ``act_bytes`` predict over those the record's grouped
    path moved}, for any GPU record (one the fit left out too)."""
    rate = EFFICIENCY.hbm * table_gpu(record["gpu_in_table"]).hbm_bytes_per_s
    out = {}
    for row in record["rows"]:
        (rows, acts), moved = _elements_and_bytes(row, rate)
        out[row["shape"]] = (row_bytes * rows + act_bytes * acts) / moved
    return out


def launch_fit(records: list[dict]) -> dict:
    """What the step-time model prices a MoE layer's host launches with (``costs.moe_host_time``), read off
    GPU records: the kernels a grouped layer launches (median over shapes), the kernels each local expert
    adds when launched on its own (least squares through the origin over the local experts), and the
    host's time per kernel at 64 tokens over every eager path, shape and record (median, least, most); and
    how eq-moe-host's floor, the longer of the device's busy time and the host's launching, compares with
    each eager layer's measured time ((shape, tokens, path, floor / measured)); and the device's idle time a
    kernel, wall time less the traced kernels' busy time over their count, median over the layers, by path
    (``gap_us``: launched eagerly, after a host sync, from a graph), which checks ``Efficiency.kernel_s``."""
    rows = [row for record in records for row in record["rows"]]
    grouped = [row["paths"]["grouped"]["kernels_per_layer"] for row in rows]
    local = torch.tensor([float(row["local_experts"]) for row in rows], dtype=torch.float64)
    extra = torch.tensor([row["paths"]["loop_sync"]["kernels_per_layer"] - row["paths"]["grouped"]["kernels_per_layer"]
                          for row in rows], dtype=torch.float64)
    eager = ("grouped", "grouped_sync", "loop_sync")
    per_kernel = [row["paths"][p]["host_us_per_kernel"] for row in rows for p in eager]
    floor = [(row["shape"], row["tokens"], p, max(row["paths"][p]["busy_ms_per_layer"],
                                                  row["paths"][p]["host_ms_per_layer_at_64_tokens"])
              / row["paths"][p]["ms_per_layer"]) for row in rows for p in eager]
    return {"layer_kernels": statistics.median(grouped),
            "expert_kernels": float((local * extra).sum() / (local * local).sum()),
            "host_us_per_kernel": statistics.median(per_kernel),
            "host_us_range": (min(per_kernel), max(per_kernel)), "floor_over_measured": floor,
            "gap_us": {p: statistics.median((row["paths"][p]["ms_per_layer"] - row["paths"][p]["busy_ms_per_layer"])
                                            * 1e3 / row["paths"][p]["kernels_per_layer"] for row in rows if p in row["paths"])
                       for p in ("grouped", "grouped_sync", GRAPHED) if any(p in row["paths"] for row in rows)}}
