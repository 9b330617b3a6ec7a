"""One published run of a training stack: what its source states, what it leaves unstated, and the
metric it is compared on (``published_metric``), and the Llama 2 and 3.1 shapes several stacks
ran (``llama2``, ``llama31``).  The rows themselves are gathered in ``playground.planner.published_stacks``."""

from __future__ import annotations

from dataclasses import dataclass, replace

from playground.planner.costs import Cluster, Layout, Model, flops_per_step
from playground.planner.presets import preset

__all__ = ["PublishedStackRun", "published_metric", "node_network", "published_step_time", "llama2", "llama31", "TE_ATTENTION",
           "MEGATRON_MOE_HOST", "te_experts"]


# Transformer Engine's attention on Hopper and Blackwell: cuDNN's fused kernel (TE selects it over
# FlashAttention on sm90, context parallelism included; transformer_engine/pytorch/attention.py, v1.5)
TE_ATTENTION = "cudnn"
# What a Megatron-Core MoE row leaves open about its host: Transformer Engine's GroupedLinear launches one cuBLAS
# GEMM per local expert from C++ (general_grouped_gemm -> multi_stream_cublas_gemm, transformer_engine/common/
# gemm/cublaslt_gemm.cu at d0067d0), after the dropless dispatcher's host sync, and the layer's routing and
# dispatch run from Python; a drop-and-pad layer it can replay from a CUDA graph (Megatron-Bridge's MoE guide)
MEGATRON_MOE_HOST = ("Transformer Engine's launch taken, a cuBLASLt GEMM per local expert from C++ at its measured "
                     "host time (moe_launch multi_stream); the range runs from a CUDA-graphed layer (no host time) to "
                     "one launching each expert from Python, as measured on an H200")


def te_experts(layout: Layout) -> Layout:
    """A Megatron-Core MoE layout with its experts launched as Transformer Engine's GroupedLinear launches them by
    default, each grouped GEMM a cuBLASLt GEMM per local expert from C++ (``moe_launch="multi_stream"``), unless a
    recipe read says the layer replays from a CUDA graph (or otherwise)."""
    return replace(layout, moe_launch="multi_stream") if layout.moe_launch == "grouped" else layout


@dataclass(frozen=True)
class PublishedStackRun:
    name: str
    stack: str                   # torchtitan, fms-fsdp, Megatron-Bridge, Megatron MoE Model Zoo, ...
    source: str                  # URL and the commit or date of the page read
    gpu: str                     # a name of playground.hardware
    model: Model
    layout: Layout
    unstated: tuple = ()         # Layout fields the source does not state
    tokens_per_s_per_gpu: float | None = None  # published
    step_time_s: float | None = None           # published
    tflops_per_gpu: float | None = None        # published, in the source's own FLOP count
    flop_count: str = ""         # "model", "hardware" (recomputation counted) or "unstated"
    note: str = ""               # settings the source states that Layout cannot express
    memory_misfit: str = ""      # non-empty: the planner's memory model says it does not fit, and why
    cite: str = ""               # BibTeX key in references.bib (proposed where not yet there)
    power_limit_w: float | None = None  # a board power limit the source states, below the GPU's TDP
    network_bytes_per_s: float | None = None  # the source's network, one direction a GPU (None: the hardware table's)
    gpus_per_node: int | None = None  # the NVLink block the job was placed in (None: the hardware table's node)

    @property
    def cluster(self) -> Cluster:
        return Cluster.of(self.gpu, gpus_per_node=self.gpus_per_node, power_limit_w=self.power_limit_w,
                          network_bytes_per_s=self.network_bytes_per_s)


def node_network(gbits_per_s: float, gpus_per_node: int = 8) -> float:
    """A node's network as sources state it (Gb/s, one direction, all its NICs) as the bytes/s each of
    its GPUs gets: what ``Cluster.network_bytes_per_s`` holds."""
    return gbits_per_s * 1e9 / 8 / gpus_per_node


def published_metric(row: PublishedStackRun, prediction: dict) -> tuple[str, float, float, float]:
    """(metric, predicted, published, ratio) to compare a row on: its step time when published, else
    tokens/s per GPU, else the step time its published TFLOP/s implies in its FLOP count.  ``ratio`` is
    predicted / published *throughput* (for a time: published time / predicted time), so > 1 means
    the model is optimistic, whatever the metric."""
    if row.step_time_s is not None:
        predicted, published = prediction["step_time_s"], row.step_time_s
        return "step_time_s", predicted, published, published / predicted
    if row.tokens_per_s_per_gpu is not None:
        predicted, published = prediction["tokens_per_s"] / row.layout.gpus, row.tokens_per_s_per_gpu
        return "tokens_per_s_per_gpu", predicted, published, predicted / published
    implied = published_step_time(row)
    return "step_time_s (implied by TFLOP/s)", prediction["step_time_s"], implied, implied / prediction["step_time_s"]


def published_step_time(row) -> float:
    """The step time a published row (of a stack, or a ``PublishedLayout``) states or implies: its
    global batch's tokens over its tokens/s, or its step's FLOPs (in the source's own count,
    recomputation included or not) over its TFLOP/s."""
    if row.step_time_s is not None:
        return row.step_time_s
    if getattr(row, "tokens_per_s_per_gpu", None) is not None:
        return row.layout.global_batch * row.model.seq_len / (row.tokens_per_s_per_gpu * row.layout.gpus)
    recompute = None if row.flop_count == "hardware" else "none"
    return flops_per_step(row.model, row.layout, recompute) / (row.tflops_per_gpu * 1e12 * row.layout.gpus)


# Llama 2's shapes (Touvron et al. 2023, Table 1; 34B from Code Llama), which several stacks ran
_LLAMA2 = dict(gated_mlp=True, tied_embeddings=False, position_embeddings=False, norm="rmsnorm", qkv_bias=False,
               proj_bias=False, vocab=32000, seq_len=4096)
_LLAMA2_SHAPES = {"7b": (32, 4096, 32, 11008, None), "13b": (40, 5120, 40, 13824, None),
                  "34b": (48, 8192, 64, 22016, 8), "70b": (80, 8192, 64, 28672, 8)}


def llama2(size: str) -> Model:
    layers, hidden, heads, ffn, kv = _LLAMA2_SHAPES[size]
    return Model(layers, hidden, heads, ffn=ffn, kv_heads=kv, name=f"llama2-{size}", **_LLAMA2)


def llama31(size: str, seq_len: int = 8192, name: str | None = None) -> Model:
    """Llama 3.1's shapes (Llama 3's, as the planner's presets hold them) at ``seq_len``."""
    return replace(preset(f"llama3-{size}"), seq_len=seq_len, name=name or f"llama3.1-{size}")
